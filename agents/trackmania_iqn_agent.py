"""The Linesight IQN agent for TrackMania.

What it adds to :class:`IQNAgent`:

* the network's heads: the conv stack for the ``frame`` (scaled ``(x - 128) / 128``) and the float
  head ``Linear(F, 256), LeakyReLU, Linear(256, 256), LeakyReLU`` with the configured
  normalisation inside it (the memory rewrites the raw mini-race clock at sampling time);
* the mini-race replay (prioritized when ``prio_alpha > 0``), shaped when the configuration gives
  a shaping potential, and a held-out uniform test buffer (``buffer_test_ratio`` of the episodes);
* Linesight's loss: each sample's loss times ``typical_clamped_self_loss / clamped``, where
  ``clamped`` is the spread of its target distribution (square root of the target's self loss)
  clamped below at ``typical_self_loss / target_self_loss_clamp_ratio``; both "typical" values are
  running means (decay 0.99, initial 0.01) updated before use; the batch's loss is the SUM over
  the batch (importance-weighted), not the mean. The held-out test loss is computed the same way
  (without updating the running means), so both are on one scale.

It imports nothing from ``environments/``: what it needs reaches it through the configuration,
read by name (``TrackManiaExperimentConfig`` provides them):

* ``config.float_normalization``: (mean, std) arrays (F,) of the float normalisation;
* ``config.mini_race_clock_index``: index of the mini-race clock in ``floats``;
* ``config.mini_race_horizon``: mini-race length, actions;
* ``config.min_horizon_to_update_priority_actions``: priorities are updated only below this clock;
* ``config.shaping_potential``: a :class:`memories.shaping.DistancePotential` or None;
* ``config.training.oversample_long_term_steps`` / ``oversample_maximum_term_steps`` /
  ``target_self_loss_clamp_ratio``, ``config.memory.buffer_test_ratio``,
  ``config.neural_network.float_hidden_dim``.

Observation keys: ``frame`` (uint8 (1, H, W)) and ``floats`` (float32 (F,)).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from agents.iqn_agent import IQNAgent
from agents.losses import quantile_huber_loss
from agents.networks.embedders import ImageEmbedder, VectorEmbedder
from memories.replay import Replay
from rulka.core_types import Observation
from rulka.parameters import ExperimentConfig

FRAME_KEY, FLOATS_KEY = "frame", "floats"
#: Decay of Linesight's running typical self losses, and their initial value.
TYPICAL_LOSS_DECAY, TYPICAL_LOSS_INITIAL = 0.99, 0.01


class TrackManiaIQNAgent(IQNAgent):
    def __init__(self, config: ExperimentConfig, observation_space: spaces.Dict, action_space: spaces.Discrete,
                 device: torch.device | str = "cpu", seed: int | None = None) -> None:
        self.typical_self_loss = TYPICAL_LOSS_INITIAL
        self.typical_clamped_self_loss = TYPICAL_LOSS_INITIAL
        self.episode_rng = np.random.default_rng(None if seed is None else seed + 17)
        self._episode_memory: Replay | None = None
        #: The memory each open race goes to, by stream (its chunks arrive as separate stretches).
        self._stream_memory: dict[Any, Replay] = {}
        self._stream: Any = None
        super().__init__(config, observation_space, action_space, device, seed)
        self.test_memory = self.create_test_memory(None if seed is None else seed + 29)

    # ------------------------------------------------------------------ building blocks
    def embedder_factories(self) -> dict:
        mean, std = self.config.float_normalization
        hidden = self.config.neural_network.float_hidden_dim
        return {
            FRAME_KEY: lambda space: ImageEmbedder(space.shape),
            FLOATS_KEY: lambda space: VectorEmbedder(space.shape[0], [hidden, hidden],
                                                     torch.as_tensor(mean), torch.as_tensor(std)),
        }

    def memory_kwargs(self) -> dict[str, Any]:
        training = self.config.training
        return {"mini_race": dict(
            clock_key=FLOATS_KEY, clock_index=self.config.mini_race_clock_index, horizon=self.config.mini_race_horizon,
            oversample_long_term_steps=training.oversample_long_term_steps,
            oversample_maximum_term_steps=training.oversample_maximum_term_steps,
            min_horizon=self.config.min_horizon_to_update_priority_actions,
        )}

    def create_test_memory(self, seed: int | None) -> Replay | None:
        """The held-out uniform buffer, sized for its share (``buffer_test_ratio`` of the capacity)."""
        if self.config.memory.buffer_test_ratio <= 0:
            return None
        return self.create_memory(seed, self.test_capacity(self.memory.capacity), prioritized=False)

    def test_capacity(self, capacity: int) -> int:
        """The held-out buffer's capacity beside a training memory of ``capacity`` (it grows with it)."""
        return max(int(np.ceil(capacity * self.config.memory.buffer_test_ratio)), self.config.training.batch_size * 4)

    # ------------------------------------------------------------------ observing
    def observe(self, state: Observation, action: int, was_greedy: bool, reward: float,
                next_state: Observation, terminated: bool, truncated: bool) -> None:
        """Store into the training memory, or the whole race into the test buffer: drawn once per
        race (``begin_stream``), so all the chunks of a race land on the same side."""
        if self._episode_memory is None:
            memory = self._stream_memory.get(self._stream)
            if memory is None:
                to_test = (self.test_memory is not None
                           and self.episode_rng.random() < self.config.memory.buffer_test_ratio)
                memory = self.test_memory if to_test else self.memory
                if self._stream is not None:
                    self._stream_memory[self._stream] = memory
            self._episode_memory = memory
        if self._episode_memory is self.memory:
            super().observe(state, action, was_greedy, reward, next_state, terminated, truncated)
            if self.test_memory is not None:
                self.test_memory.set_capacity(self.test_capacity(self.memory.capacity))
        else:
            self._episode_memory.add(state, action, reward, next_state, terminated, truncated, was_greedy)
            self.counters.env_steps += 1
        if terminated or truncated:  # the race's end, or the cut at the end of one of its chunks
            self._episode_memory = None

    def begin_stream(self, stream: Any) -> None:
        self._stream = stream
        self._episode_memory = None

    def forget_streams(self, dead: Any) -> None:
        for stream in [s for s in self._stream_memory if dead(s)]:
            del self._stream_memory[stream]

    def handle_episode_ended(self) -> None:
        self._stream_memory.pop(self._stream, None)
        super().handle_episode_ended()

    def abandon_episode(self) -> None:
        """Forget an episode that ended without a final state (a discarded real-game rollout)."""
        for memory in (self.memory, self.test_memory):
            if memory is not None:
                memory.end_episode_without_final_state()
        self._episode_memory = None
        self._stream_memory.pop(self._stream, None)

    # ------------------------------------------------------------------ learning
    def scale_loss(self, loss: torch.Tensor, targets: torch.Tensor, target_taus: torch.Tensor,
                   update_statistics: bool) -> torch.Tensor:
        """Linesight's per-sample scaling (see the module docstring)."""
        ratio = self.config.training.target_self_loss_clamp_ratio
        if ratio <= 0:
            return loss
        with torch.no_grad():
            spread = quantile_huber_loss(targets, targets, target_taus, self.config.neural_network.iqn_kappa).sqrt()
            typical = self.typical_self_loss
            if update_statistics:
                typical = TYPICAL_LOSS_DECAY * typical + (1 - TYPICAL_LOSS_DECAY) * spread.mean().item()
                self.typical_self_loss = typical
            clamped = spread.clamp(min=typical / ratio)
            typical_clamped = self.typical_clamped_self_loss
            if update_statistics:
                typical_clamped = (TYPICAL_LOSS_DECAY * typical_clamped
                                   + (1 - TYPICAL_LOSS_DECAY) * clamped.mean().item())
                self.typical_clamped_self_loss = typical_clamped
            factor = typical_clamped / clamped
        return loss * factor

    def reduce_loss(self, per_sample: torch.Tensor) -> torch.Tensor:
        """Linesight's reduction: the sum over the batch."""
        return per_sample.sum()

    def test_loss(self) -> float | None:
        """The loss of a batch of the held-out buffer (no gradient, same scale as the training
        loss), or None while the buffer is too small."""
        if self.test_memory is None or len(self.test_memory) < self.config.training.batch_size:
            return None
        batch = self.test_memory.sample(self.config.training.batch_size, self.gamma(), self.device)
        with torch.no_grad(), self.precision.autocast():
            return self.batch_loss(batch, update_statistics=False)[0].item()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, include_memory: bool) -> dict[str, Any]:
        state = super().state_dict(include_memory)
        state["typical_self_loss"] = self.typical_self_loss
        state["typical_clamped_self_loss"] = self.typical_clamped_self_loss
        state["episode_rng"] = self.episode_rng.bit_generator.state
        if include_memory and self.test_memory is not None:
            state["test_memory"] = self.test_memory.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.typical_self_loss = state.get("typical_self_loss", TYPICAL_LOSS_INITIAL)
        self.typical_clamped_self_loss = state.get("typical_clamped_self_loss", TYPICAL_LOSS_INITIAL)
        if "episode_rng" in state:
            self.episode_rng.bit_generator.state = state["episode_rng"]
        if "test_memory" in state and self.test_memory is not None:
            self.test_memory.load_state_dict(state["test_memory"])
