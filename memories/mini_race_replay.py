"""Linesight's mini-race replay: every sampled transition is re-read as part of a 7-second race.

Storage is :class:`ExperienceReplay`'s: each frame is stored once as uint8 and the next state of a
slot is the following slot, so a transition costs about one frame plus its floats. At sampling time
(the "collate"), each transition gets its own clock ``t`` in actions:

* draw ``t`` in ``[-oversample_long_term_steps + oversample_maximum_term_steps, horizon + oversample_maximum_term_steps)``,
  take ``|t|``, subtract ``oversample_maximum_term_steps``, clip at 0: ``t`` in ``[0, horizon - 1]``,
  with the clocks 1..35 (at defaults) about twice as likely as the others;
* write ``t`` into the state's clock float and ``t + n'`` into the next state's, where the n-step
  window is cut at the mini-race end: ``n' = min(n, horizon - t)`` (and earlier at an episode end
  or a non-greedy action, as in the base class);
* the transition is terminal when the race finished inside the window or ``t + n' >= horizon``;
  then the discount is 0, otherwise ``gamma ** n'``.

Q therefore means "reward over the rest of the mini-race", which is why gamma can reach 1.
"""
from __future__ import annotations

import numpy as np
from gymnasium import spaces

from memories.experience_replay import ExperienceReplay, SampledTransitions


class MiniRaceReplay(ExperienceReplay):
    """Args (beyond :class:`ExperienceReplay`'s):
        clock_key / clock_index: where the mini-race clock float lives in the state dict.
        horizon: mini-race length in actions (``temporal_mini_race_duration_actions``, 140).
        oversample_long_term_steps / oversample_maximum_term_steps: the clock distribution (40, 5).
    """

    def __init__(self, observation_space: spaces.Dict, capacity: int, n_steps: int,
                 discard_non_greedy_actions_in_nsteps: bool, seed: int | None, *, clock_key: str = "floats",
                 clock_index: int = 0, horizon: int = 140, oversample_long_term_steps: int = 40,
                 oversample_maximum_term_steps: int = 5) -> None:
        super().__init__(observation_space, capacity, n_steps, discard_non_greedy_actions_in_nsteps, seed)
        if horizon <= n_steps:
            raise ValueError(f"the mini-race horizon ({horizon} actions) must exceed n_steps ({n_steps})")
        self.clock_key = clock_key
        self.clock_index = clock_index
        self.horizon = horizon
        self.clock_low = -oversample_long_term_steps + oversample_maximum_term_steps
        self.clock_high = horizon + oversample_maximum_term_steps
        self.clock_shift = oversample_maximum_term_steps

    def sample_clocks(self, count: int) -> np.ndarray:
        """Mini-race clocks (count,) int64 in [0, horizon - 1], small values oversampled."""
        draws = self.rng.integers(self.clock_low, self.clock_high, size=count)
        return np.clip(np.abs(draws) - self.clock_shift, 0, self.horizon - 1)

    def gather(self, indices: np.ndarray, gamma: float, clocks: np.ndarray | None = None) -> SampledTransitions:
        """Mini-race transitions at ``indices``; ``clocks`` (B,) are drawn when not given."""
        if clocks is None:
            clocks = self.sample_clocks(len(indices))
        steps_used, returns, terminated, next_indices = self.n_step_windows(indices, gamma, self.horizon - clocks)
        terminal = terminated | (clocks + steps_used >= self.horizon)
        discounts = np.where(terminal, 0.0, gamma ** steps_used)
        batch = self.assemble(indices, next_indices, returns, discounts, steps_used, clocks)
        batch.states[self.clock_key][:, self.clock_index] = clocks
        batch.next_states[self.clock_key][:, self.clock_index] = clocks + steps_used
        return batch
