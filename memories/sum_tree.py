"""A vectorised array-based sum tree (with a parallel max tree) over a fixed number of leaves.

The tree is a complete binary tree stored in one array of ``2 * P`` float64 values, where ``P``
is ``capacity`` rounded up to a power of two: node ``k`` has children ``2k`` and ``2k + 1``, the
root is node 1 and leaf ``i`` is node ``P + i`` (leaves ``capacity .. P - 1`` are padding and stay
0). Every operation works on a whole batch at once: :meth:`SumTree.update` writes the leaves and
recomputes their ancestors level by level, :meth:`SumTree.find` descends all queries together.
Parents are always recomputed from their children (never updated by deltas), so rounding errors
do not accumulate over millions of updates.
"""
from __future__ import annotations

import numpy as np


class SumTree:
    """Sums (and maxima) of non-negative leaf values, for proportional sampling.

    Args:
        capacity: number of leaves (at least 1).
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a sum tree needs at least one leaf, got capacity {capacity}")
        self.capacity = int(capacity)
        self._leaf_base = 1 << max(0, (self.capacity - 1).bit_length())  # P, a power of two >= capacity
        self._depth = self._leaf_base.bit_length() - 1  # levels below the root
        self._sum = np.zeros(2 * self._leaf_base, dtype=np.float64)
        self._max = np.zeros(2 * self._leaf_base, dtype=np.float64)

    # ------------------------------------------------------------------ reading
    @property
    def total(self) -> float:
        """Sum of all leaves."""
        return float(self._sum[1])

    @property
    def max(self) -> float:
        """Largest leaf (0 when every leaf is 0)."""
        return float(self._max[1])

    @property
    def leaves(self) -> np.ndarray:
        """(capacity,) float64 view of the leaf values (read only by convention: use :meth:`update`)."""
        return self._sum[self._leaf_base: self._leaf_base + self.capacity]

    def __getitem__(self, indices: np.ndarray | int) -> np.ndarray | float:
        """Leaf values at ``indices`` (any shape)."""
        return self._sum[self._leaf_base + np.asarray(indices, dtype=np.int64)]

    # ------------------------------------------------------------------ writing
    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set leaves ``indices`` (B,) to ``priorities`` (B,) (non-negative) and refresh their ancestors.

        With repeated indices the last value wins, as in numpy assignment.
        """
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        if indices.size == 0:
            return
        priorities = np.broadcast_to(np.asarray(priorities, dtype=np.float64).reshape(-1), indices.shape)
        if indices.min() < 0 or indices.max() >= self.capacity:
            raise IndexError(f"leaf indices must lie in [0, {self.capacity}), got {indices.min()}..{indices.max()}")
        if not np.all(priorities >= 0.0):  # also rejects NaN
            raise ValueError("priorities must be non-negative and not NaN")
        nodes = indices + self._leaf_base
        self._sum[nodes] = priorities
        self._max[nodes] = priorities
        for _ in range(self._depth):
            nodes = np.unique(nodes >> 1) if nodes.size > 1 else nodes >> 1
            left = nodes << 1
            self._sum[nodes] = self._sum[left] + self._sum[left + 1]
            self._max[nodes] = np.maximum(self._max[left], self._max[left + 1])

    def rebuild(self, leaves: np.ndarray) -> None:
        """Replace every leaf: ``leaves`` (n,) with ``n <= capacity`` fills leaves ``0 .. n - 1``, the rest become 0."""
        leaves = np.asarray(leaves, dtype=np.float64).reshape(-1)
        if leaves.size > self.capacity:
            raise ValueError(f"{leaves.size} leaves do not fit in a tree of capacity {self.capacity}")
        if not np.all(leaves >= 0.0):
            raise ValueError("priorities must be non-negative and not NaN")
        base = self._leaf_base
        self._sum[:] = 0.0
        self._sum[base: base + leaves.size] = leaves
        self._max[:] = 0.0
        self._max[base: base + leaves.size] = leaves
        level = base >> 1
        while level >= 1:  # nodes [level, 2 * level) from their children [2 * level, 4 * level)
            self._sum[level: 2 * level] = self._sum[2 * level: 4 * level: 2] + self._sum[2 * level + 1: 4 * level: 2]
            self._max[level: 2 * level] = np.maximum(self._max[2 * level: 4 * level: 2],
                                                     self._max[2 * level + 1: 4 * level: 2])
            level >>= 1

    def resize(self, new_capacity: int, keep: np.ndarray | None = None) -> None:
        """Change the number of leaves; new leaf ``j`` takes old leaf ``keep[j]``.

        Args:
            new_capacity: the new number of leaves.
            keep: (n,) old leaf indices, ``n <= new_capacity``; default: the first
                ``min(capacity, new_capacity)`` leaves in place.
        """
        old = self.leaves.copy()
        if keep is None:
            keep = np.arange(min(self.capacity, new_capacity))
        self.__init__(new_capacity)
        self.rebuild(old[np.asarray(keep, dtype=np.int64)])

    # ------------------------------------------------------------------ sampling
    def find(self, values: np.ndarray) -> np.ndarray:
        """Leaf index of each query: the ``i`` with ``cumsum[i - 1] <= value < cumsum[i]``.

        Args:
            values: (B,) query values, expected in ``[0, total)``; they are clipped into that range.

        Returns:
            (B,) int64 leaf indices. Every returned leaf has a positive value (when ``total > 0``):
            the descent never enters a subtree whose sum is 0, even when rounding pushes a query
            onto a boundary.
        """
        if self.total <= 0.0:
            raise ValueError("cannot search a sum tree whose total is 0")
        values = np.clip(np.asarray(values, dtype=np.float64).reshape(-1), 0.0, None)
        nodes = np.ones(values.shape, dtype=np.int64)
        for _ in range(self._depth):
            left = nodes << 1
            left_sum = self._sum[left]
            go_left = (values < left_sum) | (self._sum[left + 1] <= 0.0)
            values = np.where(go_left, values, values - left_sum)
            nodes = np.where(go_left, left, left + 1)
        return nodes - self._leaf_base
