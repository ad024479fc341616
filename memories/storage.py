"""The replay's storage: a preallocated ring buffer that stores every state once.

Each slot holds one step of one environment: the state, the action taken in it, the reward that
followed, whether the episode ended after it (``terminated`` or ``truncated``) and whether the
action was greedy. The state after an episode's last action is stored in a slot of its own that
holds no action (it is needed to bootstrap through a truncation). The next state of slot ``i`` is
therefore slot ``i + 1``: the n-step transitions are assembled at sampling time by an assembler
(:mod:`memories.assemblers`), vectorised over the batch, and nothing is copied twice.

A slot may be sampled ("ready") once its n-step window is complete: ``n_steps`` later slots are
written, or the episode ended inside the window. Slots whose ``ready`` flag may have changed are
recorded (:meth:`StepStorage.pop_changed`) so that a sampler keeping per-slot state (priorities)
can follow without scanning the ring.

The arrays are allocated with ``np.zeros`` (the operating system maps the pages on first write),
so building a storage that is never filled costs almost nothing.
"""
from __future__ import annotations

from collections import deque

import numpy as np
import torch
from gymnasium import spaces

#: The per-slot arrays besides the states.
STEP_ARRAYS = ("actions", "rewards", "terminated", "ended", "greedy", "ready")


class StepStorage:
    """Ring buffer of steps.

    Args:
        observation_space: a ``spaces.Dict`` of ``Box`` spaces (the filtered observation space).
        capacity: number of slots (steps, plus one per finished episode for its final state).
        n_steps: length of the windows a slot must see completed before it is ready.
    """

    def __init__(self, observation_space: spaces.Dict, capacity: int, n_steps: int = 1) -> None:
        if n_steps < 1:
            raise ValueError(f"n_steps must be at least 1, got {n_steps}")
        if capacity <= n_steps + 1:
            raise ValueError(f"memory capacity {capacity} must exceed n_steps + 1 = {n_steps + 1}")
        self.observation_space = observation_space
        self.n_steps = n_steps
        self.capacity = 0
        self.cursor = 0  # next slot to write
        self.size = 0  # slots holding data
        self.pending: deque[int] = deque()  # slots of the current episode whose window is open
        self.transitions_added = 0  # actions stored since the storage was created
        #: Record the slots whose ``ready`` flag may change (a prioritized sampler turns it on).
        self.track_changes = False
        self._changed: list[int] = []
        self._allocate(capacity)

    def _allocate(self, capacity: int) -> None:
        self.capacity = capacity
        self.states = {k: np.zeros((capacity, *s.shape), dtype=s.dtype)
                       for k, s in self.observation_space.spaces.items()}
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=bool)
        self.ended = np.zeros(capacity, dtype=bool)  # terminated or truncated after this action
        self.greedy = np.zeros(capacity, dtype=bool)
        self.ready = np.zeros(capacity, dtype=bool)

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        """Number of slots that can be sampled."""
        return int(self.ready[: self.size].sum())

    def nbytes(self) -> int:
        """Bytes held by the arrays."""
        return sum(a.nbytes for a in self.states.values()) + sum(getattr(self, n).nbytes for n in STEP_ARRAYS)

    @property
    def changes_pending(self) -> int:
        """Number of slot changes recorded since the last :meth:`pop_changed`."""
        return len(self._changed)

    def pop_changed(self) -> np.ndarray:
        """(M,) unique slots whose ``ready`` flag may have changed since the last call."""
        if not self._changed:
            return np.empty(0, dtype=np.int64)
        changed = np.unique(np.fromiter(self._changed, dtype=np.int64, count=len(self._changed)))
        self._changed.clear()
        return changed

    # ------------------------------------------------------------------ writing
    def _write_state(self, state: dict[str, np.ndarray]) -> int:
        slot = self.cursor
        for key, array in self.states.items():
            array[slot] = state[key]
        self.ready[slot] = False
        self.ended[slot] = False
        self.terminated[slot] = False
        if self.track_changes:
            self._changed.append(slot)
        self.cursor = (slot + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        return slot

    def add(self, state: dict[str, np.ndarray], action: int, reward: float, next_state: dict[str, np.ndarray],
            terminated: bool, truncated: bool, was_greedy: bool = True) -> None:
        """Store one step of the environment. Steps of one episode must arrive in order."""
        slot = self._write_state(state)
        self.actions[slot] = action
        self.rewards[slot] = reward
        self.terminated[slot] = terminated
        self.ended[slot] = terminated or truncated
        self.greedy[slot] = was_greedy
        self.transitions_added += 1
        self.pending.append(slot)
        if terminated or truncated:
            self._write_state(next_state)
            self.ready[list(self.pending)] = True
            if self.track_changes:
                self._changed.extend(self.pending)
            self.pending.clear()
        elif len(self.pending) > self.n_steps:
            closed = self.pending.popleft()
            self.ready[closed] = True
            if self.track_changes:
                self._changed.append(closed)

    def end_episode_without_final_state(self) -> None:
        """Forget the open windows of an episode that stopped without a next state (a crash)."""
        self.pending.clear()

    def set_capacity(self, capacity: int) -> np.ndarray:
        """Grow (or shrink) the ring, keeping the newest data in order.

        Returns:
            (n,) the old slot of each new slot ``0 .. n - 1`` (oldest first).
        """
        order = (np.arange(self.size) + (self.cursor - self.size)) % self.capacity  # oldest first
        keep = order[-capacity:] if self.size > capacity else order
        if capacity == self.capacity:
            return keep
        old = {"states": {k: v[keep] for k, v in self.states.items()},
               **{n: getattr(self, n)[keep] for n in STEP_ARRAYS}}
        new_slot_of = {int(s): i for i, s in enumerate(keep)}
        self._allocate(capacity)
        n = len(keep)
        for k, v in old["states"].items():
            self.states[k][:n] = v
        for name in STEP_ARRAYS:
            getattr(self, name)[:n] = old[name]
        self.size = n
        self.cursor = n % capacity
        self.pending = deque(new_slot_of[s] for s in self.pending if s in new_slot_of)
        self._changed.clear()
        return keep

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        n = self.size
        return {
            "capacity": self.capacity, "cursor": self.cursor, "size": n, "pending": list(self.pending),
            "transitions_added": self.transitions_added,
            "states": {k: torch.from_numpy(v[:n].copy()) for k, v in self.states.items()},
            **{name: torch.from_numpy(getattr(self, name)[:n].copy()) for name in STEP_ARRAYS},
        }

    def load_state_dict(self, state: dict) -> None:
        self._allocate(int(state["capacity"]))
        n = int(state["size"])
        for k, v in state["states"].items():
            self.states[k][:n] = v.numpy()
        for name in STEP_ARRAYS:
            getattr(self, name)[:n] = state[name].numpy()
        self.size = n
        self.cursor = int(state["cursor"])
        self.pending = deque(int(s) for s in state["pending"])
        self.transitions_added = int(state["transitions_added"])
        self._changed.clear()
