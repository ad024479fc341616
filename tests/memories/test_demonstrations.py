"""memories/demonstrations.py: demonstration sets on disk, read into a replay as collected episodes
are, and the share of each batch drawn from them."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from memories.demonstrations import (MANIFEST, DemoEpisode, DemonstrationError, MixedReplay, fill_replay,
                                     load_demonstrations, write_demonstrations)
from memories.replay import make_replay

SPACE = spaces.Dict({
    "frame": spaces.Box(0, 255, (1, 4, 5), np.uint8),
    "floats": spaces.Box(-np.inf, np.inf, (3,), np.float32),
})


def episode(length: int, action: int = 1, terminated: bool = True, base: int = 0) -> DemoEpisode:
    t = np.arange(length + 1)
    return DemoEpisode(
        states={"frame": np.repeat((base + t).astype(np.uint8)[:, None, None, None], 20, axis=3).reshape(-1, 1, 4, 5),
                "floats": np.stack([np.zeros(length + 1), t, np.full(length + 1, base)], axis=1).astype(np.float32)},
        actions=np.full(length, action, np.int64), rewards=np.ones(length, np.float32),
        terminated=terminated, truncated=not terminated, outcome="finished" if terminated else "cut",
        step_info={"race_time_ms": 100.0 * (t[1:])})


def test_a_set_survives_the_round_trip(tmp_path):
    """Frames stay uint8, every array and the race state come back, the manifest names the episodes."""
    written = [episode(7), episode(4, action=3, terminated=False, base=50)]
    write_demonstrations(tmp_path, written, {"policy": "test"}, num_actions=12)
    loaded = load_demonstrations(tmp_path)
    assert loaded.source == {"policy": "test"} and loaded.num_steps == 11
    for a, b in zip(written, loaded.episodes):
        assert b.states["frame"].dtype == np.uint8
        for k in a.states:
            np.testing.assert_array_equal(a.states[k], b.states[k])
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.step_info["race_time_ms"], b.step_info["race_time_ms"])
        assert (a.terminated, a.truncated, a.outcome) == (b.terminated, b.truncated, b.outcome)
    loaded.check_fits(SPACE, 12)


def test_bad_sets_are_refused_with_the_reason(tmp_path):
    """No manifest, a missing episode file, other observation shapes, actions out of range."""
    with pytest.raises(DemonstrationError, match="rulka demos record"):
        load_demonstrations(tmp_path)
    write_demonstrations(tmp_path, [episode(3)], {}, 12)
    loaded = load_demonstrations(tmp_path)
    with pytest.raises(DemonstrationError, match="shape"):
        loaded.check_fits(spaces.Dict({"frame": spaces.Box(0, 255, (1, 8, 5), np.uint8),
                                       "floats": SPACE["floats"]}), 12)
    with pytest.raises(DemonstrationError, match="actions outside"):
        loaded.check_fits(SPACE, 1)
    (tmp_path / "episode_00000.npz").unlink()
    with pytest.raises(DemonstrationError, match="missing"):
        load_demonstrations(tmp_path)
    with pytest.raises(DemonstrationError, match="rewards"):
        DemoEpisode(episode(3).states, np.zeros(3, np.int64), np.zeros(2, np.float32), True, False).check()


def _add_collected(replay, ep: DemoEpisode) -> None:
    for t in range(ep.length):
        end = t == ep.length - 1
        replay.add({k: v[t] for k, v in ep.states.items()}, int(ep.actions[t]), float(ep.rewards[t]),
                   {k: v[t + 1] for k, v in ep.states.items()}, end and ep.terminated, end and ep.truncated, True)


def test_a_demonstration_fills_the_replay_as_the_collected_episode_would():
    """fill_replay leaves the storage exactly as adding the episode's steps one by one (same slots,
    episode ends, ready flags), with the run's filters applied, so n-step and mini-race batches are
    assembled the same way."""
    eps = [episode(9), episode(5, terminated=False, base=30)]
    demo = make_replay(SPACE, 100, 3, seed=0)
    collected = make_replay(SPACE, 100, 3, seed=0)
    fill_replay(demo, eps)
    for ep in eps:
        _add_collected(collected, ep)
    for name in ("actions", "rewards", "terminated", "ended", "ready"):
        np.testing.assert_array_equal(getattr(demo.storage, name), getattr(collected.storage, name))
    for k in SPACE.spaces:
        np.testing.assert_array_equal(demo.states[k], collected.states[k])
    filtered = make_replay(SPACE, 100, 3, seed=0)
    fill_replay(filtered, eps, lambda o: {**o, "floats": o["floats"] * 2}, lambda r: r * 0.5)
    np.testing.assert_array_equal(filtered.states["floats"], demo.states["floats"] * 2)
    np.testing.assert_array_equal(filtered.storage.rewards, demo.storage.rewards * 0.5)


def test_mixed_batches_hold_the_scheduled_share_and_leave_demonstration_priorities_alone():
    """round(share * B) rows come from the demonstrations, last, weight 1, priority_mask False; the
    collected part keeps its prioritized weights and its priorities are written."""
    demo = make_replay(SPACE, 200, 3, seed=1)
    fill_replay(demo, [episode(40, action=7, base=100)])
    collected = make_replay(SPACE, 200, 3, seed=2, prio_alpha=0.6)
    _add_collected(collected, episode(60, action=2))
    share = [0.25]
    mixed = MixedReplay(collected, demo, lambda: share[0])
    batch = mixed.sample(32, 0.99)
    assert batch.size == 32
    assert (batch.actions[-8:] == 7).all() and (batch.actions[:-8] == 2).all()
    assert not batch.priority_mask[-8:].any() and batch.priority_mask[:-8].all()
    assert torch.all(batch.weights[-8:] == 1)
    before = demo.storage.ready.copy()
    assert mixed.update_priorities(batch, torch.full((32,), 5.0)) == 24
    np.testing.assert_array_equal(demo.storage.ready, before)
    share[0] = 0.0
    assert (mixed.sample(16, 0.99).actions == 2).all()
    assert len(mixed) == len(collected) and mixed.capacity == collected.capacity
