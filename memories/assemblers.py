"""How sampled slots of a :class:`~memories.storage.StepStorage` become a :class:`TransitionBatch`.

* :class:`NStepAssembler`: n-step returns assembled at sampling time, vectorised over the batch
  (the window is cut at an episode end, and with ``discard_non_greedy_actions_in_nsteps`` before
  the first non-greedy action after the first).
* :class:`MiniRaceAssembler`: Linesight's mini-races. Each sampled transition gets its own clock
  ``t`` in actions: draw ``t`` in ``[-oversample_long_term_steps + oversample_maximum_term_steps,
  horizon + oversample_maximum_term_steps)``, take ``|t|``, subtract ``oversample_maximum_term_steps``,
  clip at 0 (so ``t`` in ``[0, horizon - 1]``, clocks 1..35 about twice as likely as the others at
  defaults); ``t`` is written into the state's clock float and ``t + n'`` into the next state's,
  with ``n' = min(n, horizon - t)``; the transition is terminal when the episode terminated inside
  the window or ``t + n' >= horizon``. Q then means "reward over the rest of the mini-race", which
  is why gamma can reach 1. Only samples with ``t < min_horizon`` may have their priority updated
  (Linesight's ``min_horizon_to_update_priority_actions``: values close to the end are noisy).

Both add potential-based shaping when given a potential (:mod:`memories.shaping`):
``returns + discounts * phi(s') - phi(s)``, the discount being 0 for terminal transitions.
"""
from __future__ import annotations

import numpy as np
import torch

from memories.shaping import DistancePotential
from memories.storage import StepStorage
from rulka.core_types import TransitionBatch


class NStepAssembler:
    """Args:
        n_steps: horizon of the returns.
        discard_non_greedy_actions_in_nsteps: cut the window before the first non-greedy action
            after the first one (the first action may be exploratory: it is the one evaluated).
        potential: shaping potential, or None.
    """

    def __init__(self, n_steps: int = 1, discard_non_greedy_actions_in_nsteps: bool = False,
                 potential: DistancePotential | None = None) -> None:
        if n_steps < 1:
            raise ValueError(f"n_steps must be at least 1, got {n_steps}")
        self.n_steps = n_steps
        self.discard_non_greedy = discard_non_greedy_actions_in_nsteps
        self.potential = potential
        self._steps = np.arange(n_steps)
        self._gamma: float | None = None
        self._powers = np.empty(0, dtype=np.float32)

    def windows(self, storage: StepStorage, indices: np.ndarray, gamma: float, max_steps: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The n-step windows starting at ``indices`` (B,), each at most ``max_steps`` (B,) long.

        Returns ``(steps_used, returns, terminated, next_indices)``, each (B,): how many steps the
        window kept, their discounted reward sum, whether the episode terminated inside the window,
        and the slot of the state that follows the window.
        """
        steps, capacity = self._steps, storage.capacity
        window = indices[:, None] + steps
        window %= capacity  # (B, n) slots
        # a window keeps its steps up to its first episode end (that step included), or all n
        ended = storage.ended[window]
        ended[:, -1] = True
        steps_used = ended.argmax(axis=1) + 1
        if max_steps is not None:
            np.minimum(steps_used, max_steps, out=steps_used)
        if self.discard_non_greedy:  # cut before the first exploratory action after the first
            exploratory = ~storage.greedy[window]
            exploratory[:, 0] = False
            cut = np.where(exploratory.any(axis=1), exploratory.argmax(axis=1), self.n_steps)
            np.minimum(steps_used, cut, out=steps_used)
        returns = (storage.rewards[window] * (steps < steps_used[:, None])) @ self.powers(gamma)
        last = indices + steps_used - 1
        last %= capacity
        next_indices = last + 1
        next_indices %= capacity
        return steps_used, returns.astype(np.float32, copy=False), storage.terminated[last], next_indices

    def powers(self, gamma: float) -> np.ndarray:
        """(n,) float32 ``gamma ** k`` for k = 0..n-1 (kept for the last gamma asked)."""
        if gamma != self._gamma:
            self._gamma, self._powers = gamma, (gamma ** self._steps).astype(np.float32)
        return self._powers

    def assemble(self, storage: StepStorage, indices: np.ndarray, weights: np.ndarray | None, gamma: float,
                 rng: np.random.Generator, device: torch.device) -> TransitionBatch:
        """The batch of the transitions starting at ``indices`` (B,)."""
        steps_used, returns, terminal, next_indices = self.windows(storage, indices, gamma)
        discounts = np.where(terminal, 0.0, gamma ** steps_used).astype(np.float32)
        return self.finish(storage, indices, next_indices, returns, discounts, steps_used, weights, device)

    def finish(self, storage: StepStorage, indices: np.ndarray, next_indices: np.ndarray, returns: np.ndarray,
               discounts: np.ndarray, steps_used: np.ndarray, weights: np.ndarray | None, device: torch.device,
               priority_mask: np.ndarray | None = None, edit_states=None) -> TransitionBatch:
        """Gather the states (copies), let ``edit_states(states, next_states)`` rewrite them, shape the
        returns, and move everything to ``device`` once."""
        states = {k: v[indices] for k, v in storage.states.items()}
        next_states = {k: v[next_indices] for k, v in storage.states.items()}
        if edit_states is not None:
            edit_states(states, next_states)
        if self.potential is not None:
            returns = returns + discounts * self.potential(next_states) - self.potential(states)
        if weights is None:
            weights = np.ones(len(indices), dtype=np.float32)
        if device.type == "cpu":
            move = torch.from_numpy  # shares the (fresh) arrays: no copy
        else:
            move = lambda a: torch.from_numpy(a).to(device, non_blocking=True)  # noqa: E731
        return TransitionBatch(
            states={k: move(v) for k, v in states.items()},
            actions=move(storage.actions[indices]),
            returns=move(np.ascontiguousarray(returns, dtype=np.float32)),
            discounts=move(discounts),
            next_states={k: move(v) for k, v in next_states.items()},
            weights=move(weights),
            indices=indices,
            steps_used=steps_used,
            priority_mask=priority_mask,
        )


class MiniRaceAssembler(NStepAssembler):
    """Args (beyond :class:`NStepAssembler`'s):
        clock_key / clock_index: where the mini-race clock float lives in the state dict.
        horizon: mini-race length in actions (``temporal_mini_race_duration_actions``, 140).
        oversample_long_term_steps / oversample_maximum_term_steps: the clock distribution (40, 5).
        min_horizon: only samples with a clock below it may have their priority updated (None: all).
    """

    def __init__(self, n_steps: int, discard_non_greedy_actions_in_nsteps: bool = False,
                 potential: DistancePotential | None = None, *, clock_key: str = "floats", clock_index: int = 0,
                 horizon: int = 140, oversample_long_term_steps: int = 40, oversample_maximum_term_steps: int = 5,
                 min_horizon: int | None = None) -> None:
        super().__init__(n_steps, discard_non_greedy_actions_in_nsteps, potential)
        if horizon <= n_steps:
            raise ValueError(f"the mini-race horizon ({horizon} actions) must exceed n_steps ({n_steps})")
        self.clock_key, self.clock_index, self.horizon = clock_key, clock_index, horizon
        self.clock_low = -oversample_long_term_steps + oversample_maximum_term_steps
        self.clock_high = horizon + oversample_maximum_term_steps
        self.clock_shift = oversample_maximum_term_steps
        self.min_horizon = min_horizon

    def sample_clocks(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """Mini-race clocks (count,) int64 in [0, horizon - 1], small values oversampled."""
        draws = rng.integers(self.clock_low, self.clock_high, size=count)
        return np.clip(np.abs(draws) - self.clock_shift, 0, self.horizon - 1)

    def assemble(self, storage: StepStorage, indices: np.ndarray, weights: np.ndarray | None, gamma: float,
                 rng: np.random.Generator, device: torch.device, clocks: np.ndarray | None = None) -> TransitionBatch:
        """Mini-race transitions at ``indices``; ``clocks`` (B,) are drawn when not given."""
        if clocks is None:
            clocks = self.sample_clocks(rng, len(indices))
        steps_used, returns, terminated, next_indices = self.windows(storage, indices, gamma, self.horizon - clocks)
        terminal = terminated | (clocks + steps_used >= self.horizon)
        discounts = np.where(terminal, 0.0, gamma ** steps_used).astype(np.float32)

        def write_clocks(states: dict[str, np.ndarray], next_states: dict[str, np.ndarray]) -> None:
            states[self.clock_key][:, self.clock_index] = clocks
            next_states[self.clock_key][:, self.clock_index] = clocks + steps_used

        mask = None if self.min_horizon is None else clocks < self.min_horizon
        return self.finish(storage, indices, next_indices, returns, discounts, steps_used, weights, device,
                           mask, write_clocks)
