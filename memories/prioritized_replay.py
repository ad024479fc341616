"""Prioritized experience replay (Schaul et al. 2015) on top of :class:`ExperienceReplay`.

Each slot of the ring has a priority kept in a :class:`~memories.sum_tree.SumTree`; slots that
are not ready (open n-step window, final states, overwritten or empty slots) have priority 0 and
are never sampled. A slot gets the largest priority currently in the memory when it becomes ready
(1 while the memory holds none), so it is sampled soon; after it has been learnt from, its
priority is ``(|td_error| + prio_epsilon) ** prio_alpha`` (:meth:`update_priorities`).

Sampling is proportional and stratified: ``[0, total)`` is cut into ``batch_size`` equal segments
and one value is drawn uniformly in each. Importance-sampling weights ``(N * P(i)) ** -beta``, with
``N`` the number of ready slots and ``P(i) = p_i / total``, are divided by their batch maximum and
returned in :attr:`SampledTransitions.weights`. With ``prio_alpha == 0`` every ready slot has
priority exactly 1: sampling is uniform and every weight is 1.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from memories.experience_replay import ExperienceReplay, SampledTransitions
from memories.mini_race_replay import MiniRaceReplay
from memories.sum_tree import SumTree

_MAX_UNFLUSHED = 4096


class PrioritizedExperienceReplay(ExperienceReplay):
    """:class:`ExperienceReplay` with proportional prioritized sampling and importance weights.

    Args:
        observation_space, capacity, n_steps, discard_non_greedy_actions_in_nsteps, seed: as
            :class:`ExperienceReplay`.
        alpha: priority exponent, ``memory.prio_alpha`` (0: uniform sampling).
        epsilon: ``memory.prio_epsilon``, added to ``|td_error|`` so every ready slot keeps a
            chance to be sampled.
        beta: importance-sampling exponent, ``memory.prio_beta`` (0: no correction, 1: full
            correction); the attribute ``beta`` may be changed at any time (annealing).
        kwargs: passed on to the next class of the MRO (see :class:`PrioritizedMiniRaceReplay`).

    The class only extends :class:`ExperienceReplay` through ``super()``, so it composes with a
    subclass of it placed after it in the bases (``class X(PrioritizedExperienceReplay, Other)``).
    """

    def __init__(
        self,
        observation_space: spaces.Dict,
        capacity: int,
        n_steps: int = 1,
        discard_non_greedy_actions_in_nsteps: bool = False,
        seed: int | None = None,
        alpha: float = 0.6,
        epsilon: float = 2e-3,
        beta: float = 1.0,
        **kwargs: Any,
    ) -> None:
        if alpha < 0:
            raise ValueError(f"the priority exponent alpha must be non-negative, got {alpha}")
        if epsilon <= 0 and alpha > 0:
            raise ValueError(f"the priority offset epsilon must be positive, got {epsilon}")
        self.alpha = float(alpha)
        self.epsilon = float(epsilon)
        self.beta = float(beta)
        super().__init__(observation_space, capacity, n_steps, discard_non_greedy_actions_in_nsteps, seed, **kwargs)
        self._tree = SumTree(self.capacity)
        self._touched: list[int] = []  # slots written or closed by `add` since the last `_flush`

    # ------------------------------------------------------------------ priorities
    @property
    def tree(self) -> SumTree:
        """The sum tree of the priorities, up to date."""
        self._flush()
        return self._tree

    @property
    def priorities(self) -> np.ndarray:
        """(capacity,) float64 priority of every slot (0 for slots that cannot be sampled)."""
        return self.tree.leaves

    def new_priority(self) -> float:
        """Priority given to a slot when it becomes ready: the current maximum, or 1 on an empty tree."""
        highest = self._tree.max
        return highest if highest > 0.0 else 1.0

    def priority_of(self, td_errors: np.ndarray) -> np.ndarray:
        """(B,) priorities ``(|td_errors| + prio_epsilon) ** prio_alpha`` of (B,) TD errors."""
        return (np.abs(np.asarray(td_errors, dtype=np.float64)) + self.epsilon) ** self.alpha

    def update_priorities(
        self,
        indices: np.ndarray,
        td_errors: np.ndarray | torch.Tensor,
        clock: np.ndarray | torch.Tensor | None = None,
        min_horizon: float | None = None,
    ) -> int:
        """Set the priorities of sampled slots from their TD errors.

        Args:
            indices: (B,) slots, as returned in :attr:`SampledTransitions.indices`.
            td_errors: (B,) per-sample errors (numpy or torch, any device; only their magnitude is used).
            clock: (B,) mini-race clock of each sample's state, in actions. With ``min_horizon``,
                only samples with ``clock < min_horizon`` are updated (Linesight's
                ``min_horizon_to_update_priority_actions``: errors close to the end of a mini-race
                are noisy).
            min_horizon: see ``clock``; ignored when either is None.

        Slots that stopped being ready since they were sampled are left alone. With repeated
        indices the last error wins.

        Returns:
            The number of samples whose priority was written.
        """
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        errors = _to_numpy(td_errors).astype(np.float64).reshape(-1)
        if errors.shape != indices.shape:
            raise ValueError(f"got {errors.size} TD errors for {indices.size} indices")
        if not np.all(np.isfinite(errors)):
            raise ValueError("TD errors must be finite to be used as priorities")
        mask = self.ready[indices]
        if clock is not None and min_horizon is not None:
            clock = _to_numpy(clock).reshape(-1)
            if clock.shape != indices.shape:
                raise ValueError(f"got {clock.size} clock values for {indices.size} indices")
            mask &= clock < min_horizon
        self.tree.update(indices[mask], self.priority_of(errors[mask]))
        return int(mask.sum())

    # ------------------------------------------------------------------ storage
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
        """Store one step (see :meth:`ExperienceReplay.add`) and keep priorities in step with ``ready``.

        The slots written now get priority 0 (they are not ready, except the action slot of an
        episode's last step); slots whose window closed now get :meth:`new_priority` (applied
        lazily, see :meth:`_flush`).
        """
        first = self._cursor
        self._touched.extend(self._pending)  # the only slots whose `ready` can change now
        super().add(state, action, reward, next_state, terminated, truncated, was_greedy)
        self._touched.append(first)
        if terminated or truncated:
            self._touched.append((first + 1) % self.capacity)
        if len(self._touched) >= _MAX_UNFLUSHED:  # bounded bookkeeping during a long heat-up
            self._flush()

    def _flush(self) -> None:
        """Bring the tree in step with ``ready`` for the slots :meth:`add` touched since the last flush.

        :meth:`add` runs once per environment step, so it only records slots; the tree is updated
        here, vectorised over every step since the last read (a sample, a priority update, ...).
        """
        if not self._touched:
            return
        touched = np.unique(np.fromiter(self._touched, dtype=np.int64, count=len(self._touched)))
        self._touched.clear()
        self._tree.update(touched, 0.0)
        now_ready = touched[self.ready[touched]]
        self._tree.update(now_ready, self.new_priority())

    def set_capacity(self, capacity: int) -> None:
        """Grow (or shrink) the ring as :meth:`ExperienceReplay.set_capacity`, priorities moving with their slots."""
        if capacity == self.capacity:
            return
        order = (np.arange(self._size) + (self._cursor - self._size)) % self.capacity  # oldest first
        keep = order[-capacity:] if self._size > capacity else order
        self._flush()
        super().set_capacity(capacity)
        self._tree.resize(capacity, keep)

    # ------------------------------------------------------------------ sampling
    def sample_indices(self, batch_size: int) -> np.ndarray:
        """(batch_size,) slots drawn with probability ``p_i / total``, one per stratum of ``[0, total)``."""
        total = self.tree.total
        if total <= 0.0 or len(self) == 0:
            raise ValueError("cannot sample from a memory with no complete transition")
        segment = total / batch_size
        values = (np.arange(batch_size) + self.rng.random(batch_size)) * segment
        return self.tree.find(np.minimum(values, np.nextafter(total, 0.0)))

    def importance_weights(self, indices: np.ndarray) -> np.ndarray:
        """(B,) float32 weights ``(N * P(i)) ** -beta`` of slots ``indices`` (B,), divided by their maximum."""
        probabilities = self.tree[indices] / self.tree.total
        with np.errstate(divide="ignore"):
            weights = (len(self) * probabilities) ** -self.beta
        weights = np.where(np.isfinite(weights), weights, 0.0)  # a slot of priority 0 is never sampled
        highest = weights.max(initial=0.0)
        return (weights / highest if highest > 0 else np.ones_like(weights)).astype(np.float32)

    def gather(self, indices: np.ndarray, gamma: float, *args: Any, **kwargs: Any) -> SampledTransitions:
        """The next class's ``gather`` (extra arguments passed on) with the importance-sampling weights filled in."""
        sampled = super().gather(indices, gamma, *args, **kwargs)
        sampled.weights = self.importance_weights(indices)
        return sampled

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """:meth:`ExperienceReplay.state_dict` plus ``priorities``, a float64 tensor of the used slots."""
        state = super().state_dict()
        state["priorities"] = torch.from_numpy(self.priorities[: self._size].copy())
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore a checkpoint; one from a uniform memory gives every ready slot priority 1."""
        super().load_state_dict(state)
        self._tree = SumTree(self.capacity)
        self._touched.clear()
        n = self._size
        if "priorities" in state:
            priorities = state["priorities"].numpy().astype(np.float64)
        else:
            priorities = np.ones(n, dtype=np.float64)
        self._tree.rebuild(np.where(self.ready[:n], priorities, 0.0))


class PrioritizedMiniRaceReplay(PrioritizedExperienceReplay, MiniRaceReplay):
    """Linesight's TrackMania replay with prioritized sampling: :class:`MiniRaceReplay`'s clocks,
    :class:`PrioritizedExperienceReplay`'s priorities and weights.

    Arguments: those of :class:`PrioritizedExperienceReplay`, then :class:`MiniRaceReplay`'s
    keyword-only ones (``clock_key``, ``horizon``, ...). ``sample`` returns the mini-race
    ``clocks``: pass them to :meth:`update_priorities` with ``min_horizon``.
    """


def _to_numpy(values: np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().to("cpu").numpy()
    return np.asarray(values)
