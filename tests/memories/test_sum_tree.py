import numpy as np
import pytest

from memories.sum_tree import SumTree


def brute_force_find(leaves: np.ndarray, values: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.cumsum(leaves), values, side="right")


@pytest.mark.parametrize("capacity", [1, 7, 64, 1000])
def test_totals_and_find_match_brute_force(capacity):
    """update + find agree with a cumulative-sum search on random priorities (any capacity)."""
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity)
    leaves = np.zeros(capacity)
    for _ in range(5):  # several batched updates, with repeated indices
        idx = rng.integers(0, capacity, size=max(1, capacity // 3))
        prio = rng.random(idx.size) * (rng.random(idx.size) > 0.3)  # some zeros
        tree.update(idx, prio)
        leaves[idx] = prio  # numpy: last write wins, as in the tree
        assert tree.total == pytest.approx(leaves.sum(), rel=1e-12)
        assert tree.max == leaves.max()
        np.testing.assert_array_equal(tree.leaves, leaves)
    if leaves.sum() == 0:
        tree.update(np.array([0]), np.array([0.5]))
        leaves[0] = 0.5
    values = rng.random(10_000) * leaves.sum()
    found = tree.find(values)
    np.testing.assert_array_equal(found, brute_force_find(leaves, values))
    assert np.all(leaves[found] > 0)


def test_find_never_returns_an_empty_leaf_at_the_boundaries():
    """Queries at 0, at total and beyond land on positive leaves, never padding or zero leaves."""
    tree = SumTree(10)
    tree.update(np.array([0, 3, 4, 9]), np.array([0.0, 0.1, 0.0, 0.2]))
    found = tree.find(np.array([0.0, 0.1, 0.3, 0.30000001, 5.0, -1.0]))
    np.testing.assert_array_equal(found, [3, 9, 9, 9, 9, 3])


def test_rebuild_and_resize_keep_the_mapped_leaves():
    """rebuild sets every node from the leaves; resize moves leaf keep[j] to j."""
    rng = np.random.default_rng(0)
    tree = SumTree(13)
    leaves = rng.random(13)
    tree.rebuild(leaves)
    assert tree.total == pytest.approx(leaves.sum())
    keep = np.array([5, 6, 7, 8, 0, 1])
    tree.resize(40, keep)
    assert tree.capacity == 40
    np.testing.assert_array_equal(tree.leaves[:6], leaves[keep])
    assert np.all(tree.leaves[6:] == 0) and tree.total == pytest.approx(leaves[keep].sum())
    assert tree.max == leaves[keep].max()


@pytest.mark.reliability
def test_rejects_negative_or_nan_priorities():
    """Negative or NaN priorities would corrupt every total: they are refused."""
    tree = SumTree(4)
    with pytest.raises(ValueError):
        tree.update(np.array([1]), np.array([-1.0]))
    with pytest.raises(ValueError):
        tree.update(np.array([1]), np.array([np.nan]))
    with pytest.raises(ValueError):
        tree.find(np.array([0.0]))  # empty tree


@pytest.mark.parametrize("capacity", [2, 5, 65])
def test_small_and_odd_capacities(capacity):
    """Capacities just above a power of two get enough leaves: every leaf can be set and found."""
    tree = SumTree(capacity)
    tree.update(np.arange(capacity), np.arange(capacity) + 1.0)
    assert tree.total == pytest.approx(capacity * (capacity + 1) / 2)
    np.testing.assert_array_equal(tree.find(np.cumsum(np.arange(capacity) + 1.0) - 0.5), np.arange(capacity))


def test_refusals_name_the_problem():
    """Out-of-range leaves (below 0 or at capacity), negative priorities, too many leaves, a zero capacity
    and a search of an empty tree are refused with messages that say what is wrong."""
    tree = SumTree(4)
    for bad in ([4], [-1], [0, 4]):
        with pytest.raises(IndexError, match=r"leaf indices must lie in \[0, 4\)"):
            tree.update(np.array(bad), 1.0)
    with pytest.raises(ValueError, match="priorities must be non-negative and not NaN"):
        tree.update(np.array([1]), np.array([-1.0]))
    with pytest.raises(ValueError, match="priorities must be non-negative and not NaN"):
        tree.rebuild(np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="5 leaves do not fit in a tree of capacity 4"):
        tree.rebuild(np.ones(5))
    with pytest.raises(ValueError, match="at least one leaf, got capacity 0"):
        SumTree(0)
    with pytest.raises(ValueError, match="cannot search a sum tree whose total is 0"):
        tree.find(np.array([0.0]))


def test_resize_without_a_map_keeps_the_first_leaves():
    """resize(n) without keep: leaves 0 .. min(old, new) - 1 stay in place (growing and shrinking)."""
    tree = SumTree(4)
    tree.rebuild(np.array([1.0, 2.0, 3.0, 4.0]))
    tree.resize(6)
    np.testing.assert_array_equal(tree.leaves, [1, 2, 3, 4, 0, 0])
    tree.resize(3)
    np.testing.assert_array_equal(tree.leaves, [1, 2, 3])
    assert tree.total == 6.0 and tree.max == 3.0


def test_rebuild_fills_every_level():
    """After rebuild the root total and maximum are right for a tree several levels deep."""
    tree = SumTree(16)
    tree.rebuild(np.arange(16.0))
    assert tree.total == 120.0 and tree.max == 15.0
    np.testing.assert_array_equal(tree.find(np.array([0.5, 119.5])), [1, 15])
