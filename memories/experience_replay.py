"""A preallocated ring-buffer experience replay that stores every state once.

Each slot holds one step of one environment: the state, the action taken in it, the reward that
followed, whether the episode ended after it (``terminated`` or ``truncated``) and whether the
action was greedy. The state after an episode's last action is stored in a slot of its own that
holds no action (it is needed to bootstrap through a truncation). The next state of slot ``i`` is
therefore slot ``i + 1``, and n-step returns are assembled at sampling time, vectorised over the
batch: nothing is copied twice and no Python object is kept per transition.

A slot may be sampled ("ready") once its n-step window is complete: ``n_steps`` later slots are
written, or the episode ended inside the window.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import torch
from gymnasium import spaces


@dataclass
class SampledTransitions:
    """A sampled batch as numpy arrays (see :class:`rulka.core_types.TransitionBatch` for shapes)."""

    indices: np.ndarray
    states: dict[str, np.ndarray]
    actions: np.ndarray
    returns: np.ndarray
    discounts: np.ndarray
    next_states: dict[str, np.ndarray]
    steps_used: np.ndarray
    weights: np.ndarray
    #: Mini-race clock of each state, actions (None outside the mini-race replay).
    clocks: np.ndarray | None = None


#: The per-slot arrays besides the states.
_STEP_ARRAYS = ("actions", "rewards", "terminated", "ended", "greedy", "ready")


class ExperienceReplay:
    """Uniform replay over a ring buffer of steps, with n-step returns.

    Args:
        observation_space: a ``spaces.Dict`` of ``Box`` spaces (the filtered observation space).
        capacity: number of slots (steps, plus one per finished episode for its final state).
        n_steps: horizon of the returns.
        discard_non_greedy_actions_in_nsteps: cut the window before the first non-greedy action
            after the first one (the first action may be exploratory: it is the one evaluated).
        seed: seed of the sampling generator.
    """

    def __init__(
        self,
        observation_space: spaces.Dict,
        capacity: int,
        n_steps: int = 1,
        discard_non_greedy_actions_in_nsteps: bool = False,
        seed: int | None = None,
    ) -> None:
        if capacity <= n_steps + 1:
            raise ValueError(f"memory capacity {capacity} must exceed n_steps + 1 = {n_steps + 1}")
        if n_steps < 1:
            raise ValueError(f"n_steps must be at least 1, got {n_steps}")
        self.observation_space = observation_space
        self.n_steps = n_steps
        self.discard_non_greedy = discard_non_greedy_actions_in_nsteps
        self.rng = np.random.default_rng(seed)
        self.capacity = 0
        self._cursor = 0  # next slot to write
        self._size = 0  # slots holding data
        self._pending: deque[int] = deque()  # slots of the current episode whose window is open
        self.transitions_added = 0  # actions stored since the memory was created
        self._allocate(capacity)

    # ------------------------------------------------------------------ storage
    def _allocate(self, capacity: int) -> None:
        self.capacity = capacity
        self.states = {
            k: np.zeros((capacity, *s.shape), dtype=s.dtype) for k, s in self.observation_space.spaces.items()
        }
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=bool)
        self.ended = np.zeros(capacity, dtype=bool)  # terminated or truncated after this action
        self.greedy = np.zeros(capacity, dtype=bool)
        self.ready = np.zeros(capacity, dtype=bool)

    def nbytes(self) -> int:
        """Bytes held by the memory's arrays."""
        return sum(a.nbytes for a in self.states.values()) + sum(getattr(self, n).nbytes for n in _STEP_ARRAYS)

    def bytes_per_transition(self) -> float:
        """Memory held per slot, bytes (all arrays / capacity)."""
        return self.nbytes() / self.capacity

    def __len__(self) -> int:
        """Number of transitions that can be sampled."""
        return int(self.ready[: self._size].sum()) if self._size < self.capacity else int(self.ready.sum())

    @property
    def num_slots_used(self) -> int:
        return self._size

    def _write_state(self, state: dict[str, np.ndarray]) -> int:
        slot = self._cursor
        for key, array in self.states.items():
            array[slot] = state[key]
        self.ready[slot] = False
        self.ended[slot] = False
        self.terminated[slot] = False
        self._cursor = (slot + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)
        return slot

    def add(
        self,
        state: dict[str, np.ndarray],
        action: int,
        reward: float,
        next_state: dict[str, np.ndarray],
        terminated: bool,
        truncated: bool,
        was_greedy: bool = True,
    ) -> None:
        """Store one step of the environment. Steps of one episode must arrive in order."""
        slot = self._write_state(state)
        self.actions[slot] = action
        self.rewards[slot] = reward
        self.terminated[slot] = terminated
        self.ended[slot] = terminated or truncated
        self.greedy[slot] = was_greedy
        self.transitions_added += 1
        self._pending.append(slot)
        if terminated or truncated:
            self._write_state(next_state)
            for pending in self._pending:
                self.ready[pending] = True
            self._pending.clear()
        elif len(self._pending) > self.n_steps:
            self.ready[self._pending.popleft()] = True

    def end_episode_without_final_state(self) -> None:
        """Forget the open windows of an episode that stopped without a next state (a crash)."""
        self._pending.clear()

    def set_capacity(self, capacity: int) -> None:
        """Grow (or shrink) the ring, keeping the newest data in order."""
        if capacity == self.capacity:
            return
        order = (np.arange(self._size) + (self._cursor - self._size)) % self.capacity
        keep = order[-capacity:] if self._size > capacity else order
        old = {
            "states": {k: v[keep] for k, v in self.states.items()},
            **{n: getattr(self, n)[keep] for n in _STEP_ARRAYS},
        }
        pending_positions = {int(s): i for i, s in enumerate(keep)}
        self._allocate(capacity)
        n = len(keep)
        for k, v in old["states"].items():
            self.states[k][:n] = v
        for name in _STEP_ARRAYS:
            getattr(self, name)[:n] = old[name]
        self._size = n
        self._cursor = n % capacity
        self._pending = deque(pending_positions[s] for s in self._pending if s in pending_positions)

    # ------------------------------------------------------------------ sampling
    def sample_indices(self, batch_size: int) -> np.ndarray:
        """Uniformly drawn ready slots (rejection sampling: almost every slot is ready)."""
        if len(self) == 0:
            raise ValueError("cannot sample from a memory with no complete transition")
        chosen = np.empty(0, dtype=np.int64)
        while chosen.size < batch_size:
            draw = self.rng.integers(0, self._size, size=2 * (batch_size - chosen.size) + 8)
            chosen = np.concatenate([chosen, draw[self.ready[draw]]])
        return chosen[:batch_size]

    def n_step_windows(self, indices: np.ndarray, gamma: float, max_steps: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The n-step windows starting at ``indices``, each at most ``max_steps`` long.

        Returns ``(steps_used, returns, terminated, next_indices)``, each (B,): how many steps the
        window kept, their discounted reward sum, whether the episode terminated inside the window,
        and the slot of the state that follows the window.
        """
        steps = np.arange(self.n_steps)
        window = (indices[:, None] + steps) % self.capacity  # (B, n)
        ended = self.ended[window]
        included = (np.cumsum(ended, axis=1) - ended) == 0  # no episode end before step k
        if max_steps is not None:
            included &= steps < max_steps[:, None]
        if self.discard_non_greedy:
            exploratory = ~self.greedy[window]
            exploratory[:, 0] = False
            included &= np.cumsum(exploratory, axis=1) == 0
        steps_used = included.sum(axis=1)
        powers = gamma ** steps.astype(np.float64)
        returns = (self.rewards[window] * included * powers).sum(axis=1).astype(np.float32)
        terminated = self.terminated[(indices + steps_used - 1) % self.capacity]
        return steps_used, returns, terminated, (indices + steps_used) % self.capacity

    def assemble(self, indices: np.ndarray, next_indices: np.ndarray, returns: np.ndarray, discounts: np.ndarray,
                 steps_used: np.ndarray, clocks: np.ndarray | None = None) -> SampledTransitions:
        """Gather the states of a batch (copies) into :class:`SampledTransitions`."""
        return SampledTransitions(
            indices=indices,
            states={k: v[indices] for k, v in self.states.items()},
            actions=self.actions[indices],
            returns=returns,
            discounts=discounts.astype(np.float32),
            next_states={k: v[next_indices] for k, v in self.states.items()},
            steps_used=steps_used,
            weights=np.ones(len(indices), dtype=np.float32),
            clocks=clocks,
        )

    def gather(self, indices: np.ndarray, gamma: float) -> SampledTransitions:
        """The n-step transitions starting at ``indices`` with discount ``gamma``."""
        steps_used, returns, terminated, next_indices = self.n_step_windows(indices, gamma)
        discounts = np.where(terminated, 0.0, gamma ** steps_used)
        return self.assemble(indices, next_indices, returns, discounts, steps_used)

    def sample(self, batch_size: int, gamma: float) -> SampledTransitions:
        return self.gather(self.sample_indices(batch_size), gamma)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        n = self._size
        return {
            "capacity": self.capacity,
            "cursor": self._cursor,
            "size": n,
            "pending": list(self._pending),
            "transitions_added": self.transitions_added,
            "states": {k: torch.from_numpy(v[:n].copy()) for k, v in self.states.items()},
            **{name: torch.from_numpy(getattr(self, name)[:n].copy())
               for name in _STEP_ARRAYS},
        }

    def load_state_dict(self, state: dict) -> None:
        self._allocate(int(state["capacity"]))
        n = int(state["size"])
        for k, v in state["states"].items():
            self.states[k][:n] = v.numpy()
        for name in _STEP_ARRAYS:
            getattr(self, name)[:n] = state[name].numpy()
        self._size = n
        self._cursor = int(state["cursor"])
        self._pending = deque(int(s) for s in state["pending"])
        self.transitions_added = int(state["transitions_added"])
