"""A replay memory composed of a storage, a sampler and an assembler (as Dopamine composes its replay).

* storage (:class:`~memories.storage.StepStorage`): the ring buffer that stores each state once;
* sampler (:mod:`memories.samplers`): which ready slots a batch draws, and their importance weights;
* assembler (:mod:`memories.assemblers`): how a slot becomes a transition (n-step, mini-race,
  shaping), returned as a :class:`~rulka.core_types.TransitionBatch` already on the learner's device.

:func:`make_replay` builds the usual combinations.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from memories.assemblers import MiniRaceAssembler, NStepAssembler
from memories.samplers import PrioritizedSampler, UniformSampler
from memories.shaping import DistancePotential
from memories.storage import StepStorage
from rulka.core_types import TransitionBatch

#: Slot changes a prioritized sampler lets accumulate before it catches up (a long heat-up).
_MAX_UNSYNCED = 4096


class Replay:
    """Storage + sampler + assembler.

    Args:
        storage, sampler, assembler: the three parts (the sampler and the assembler hold no data
            of their own beyond the priorities).
        rng: the generator of the sampler and the assembler (saved in checkpoints as ``memory.rng``).
    """

    def __init__(self, storage: StepStorage, sampler: UniformSampler | PrioritizedSampler,
                 assembler: NStepAssembler, rng: np.random.Generator) -> None:
        if assembler.n_steps != storage.n_steps:
            raise ValueError(f"the assembler's n_steps ({assembler.n_steps}) differs from the storage's "
                             f"({storage.n_steps})")
        self.storage, self.sampler, self.assembler, self.rng = storage, sampler, assembler, rng
        storage.track_changes = sampler.prioritized

    # ------------------------------------------------------------------ what the agent uses
    @property
    def prioritized(self) -> bool:
        return self.sampler.prioritized

    @property
    def capacity(self) -> int:
        return self.storage.capacity

    @property
    def transitions_added(self) -> int:
        return self.storage.transitions_added

    def __len__(self) -> int:
        """Number of transitions that can be sampled."""
        return len(self.storage)

    def add(self, state: dict[str, np.ndarray], action: int, reward: float, next_state: dict[str, np.ndarray],
            terminated: bool, truncated: bool, was_greedy: bool = True) -> None:
        """Store one step (see :meth:`StepStorage.add`)."""
        self.storage.add(state, action, reward, next_state, terminated, truncated, was_greedy)
        if self.storage.changes_pending >= _MAX_UNSYNCED:
            self.sampler.sync(self.storage)

    def end_episode_without_final_state(self) -> None:
        self.storage.end_episode_without_final_state()

    def set_capacity(self, capacity: int) -> None:
        if capacity == self.storage.capacity:
            return
        self.sampler.sync(self.storage)
        keep = self.storage.set_capacity(capacity)
        self.sampler.resize(capacity, keep)

    def sample(self, batch_size: int, gamma: float, device: torch.device | str = "cpu") -> TransitionBatch:
        """A batch of ``batch_size`` transitions with discount ``gamma``, on ``device``."""
        indices, weights = self.sampler.sample(self.storage, batch_size)
        return self.assembler.assemble(self.storage, indices, weights, gamma, self.rng, torch.device(device))

    def gather(self, indices: np.ndarray, gamma: float, device: torch.device | str = "cpu", **kwargs: Any
               ) -> TransitionBatch:
        """The transitions starting at the given slots (weights 1); ``kwargs`` go to the assembler."""
        return self.assembler.assemble(self.storage, np.asarray(indices, dtype=np.int64), None, gamma, self.rng,
                                       torch.device(device), **kwargs)

    def update_priorities(self, batch: TransitionBatch, errors: torch.Tensor | np.ndarray) -> int:
        """Set the priorities of ``batch``'s slots from ``errors`` (B,), where its ``priority_mask``
        allows; returns the number written (0 for a uniform memory)."""
        if not self.sampler.prioritized:
            return 0
        indices = batch.indices
        if isinstance(errors, torch.Tensor):
            errors = errors.detach().to("cpu", torch.float64).numpy()
        if batch.priority_mask is not None:
            indices, errors = indices[batch.priority_mask], np.asarray(errors)[batch.priority_mask]
        return self.sampler.update(self.storage, indices, errors)

    @property
    def priorities(self) -> np.ndarray:
        """(capacity,) float64 priority of every slot (0: cannot be sampled). Prioritized memories only."""
        if not self.sampler.prioritized:
            raise AttributeError("a uniform memory has no priorities")
        self.sampler.sync(self.storage)
        return self.sampler.priorities

    # storage views, for figures and tests
    @property
    def states(self) -> dict[str, np.ndarray]:
        return self.storage.states

    @property
    def ready(self) -> np.ndarray:
        return self.storage.ready

    @property
    def num_slots_used(self) -> int:
        return self.storage.size

    def nbytes(self) -> int:
        return self.storage.nbytes()

    def bytes_per_transition(self) -> float:
        """Memory held per slot, bytes (all arrays / capacity)."""
        return self.storage.nbytes() / self.storage.capacity

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        return {**self.storage.state_dict(), **self.sampler.state_dict(self.storage)}

    def load_state_dict(self, state: dict) -> None:
        self.storage.load_state_dict(state)
        self.sampler.load_state_dict(state, self.storage)


def make_replay(observation_space: spaces.Dict, capacity: int, n_steps: int = 1,
                discard_non_greedy_actions_in_nsteps: bool = False, seed: int | None = None, *,
                prio_alpha: float = 0.0, prio_epsilon: float = 2e-3, prio_beta: float = 1.0,
                mini_race: dict[str, Any] | None = None, potential: DistancePotential | None = None) -> Replay:
    """A replay: prioritized when ``prio_alpha > 0``, mini-race when ``mini_race`` gives
    :class:`MiniRaceAssembler`'s keyword arguments, shaped when ``potential`` is given."""
    rng = np.random.default_rng(seed)
    storage = StepStorage(observation_space, capacity, n_steps)
    sampler = (PrioritizedSampler(capacity, rng, prio_alpha, prio_epsilon, prio_beta) if prio_alpha > 0
               else UniformSampler(rng))
    if mini_race is not None:
        assembler: NStepAssembler = MiniRaceAssembler(n_steps, discard_non_greedy_actions_in_nsteps, potential,
                                                      **mini_race)
    else:
        assembler = NStepAssembler(n_steps, discard_non_greedy_actions_in_nsteps, potential)
    return Replay(storage, sampler, assembler, rng)
