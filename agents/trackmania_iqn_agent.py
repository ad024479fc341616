"""The Linesight IQN agent for TrackMania.

What it adds to :class:`IQNAgent`:

* the network's heads: the conv stack for the ``frame`` (scaled ``(x - 128) / 128``) and the float
  head ``Linear(F, 256), LeakyReLU, Linear(256, 256), LeakyReLU`` with the configured
  normalisation inside it (the memory rewrites the raw mini-race clock at sampling time);
* the mini-race replay (prioritized when ``prio_alpha > 0``) and a held-out test buffer
  (``buffer_test_ratio`` of the episodes) for a test loss;
* the per-sample loss divided by the clamped spread of its target distribution
  (``target_self_loss_clamp_ratio``).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from agents.iqn_agent import IQNAgent
from agents.losses import quantile_huber_loss
from agents.networks.embedders import ImageEmbedder, VectorEmbedder
from environments.trackmania.experiment_parameters import TrackManiaExperimentConfig
from environments.trackmania.layout import FloatLayout
from environments.trackmania.normalization import normalization_from_parameters
from memories.experience_replay import ExperienceReplay
from memories.mini_race_replay import MiniRaceReplay
from memories.prioritized_replay import PrioritizedMiniRaceReplay
from rulka.core_types import Observation, TransitionBatch

FRAME_KEY, FLOATS_KEY = "frame", "floats"
SPREAD_EMA_DECAY = 0.99


class TrackManiaIQNAgent(IQNAgent):
    config: TrackManiaExperimentConfig

    def __init__(self, config: TrackManiaExperimentConfig, observation_space: spaces.Dict,
                 action_space: spaces.Discrete, device: torch.device | str = "cpu", seed: int | None = None) -> None:
        self.layout = FloatLayout.from_parameters(config.environment)
        self.target_spread_ema: float | None = None
        self.episode_rng = np.random.default_rng(None if seed is None else seed + 17)
        self._episode_memory: ExperienceReplay | None = None
        super().__init__(config, observation_space, action_space, device, seed)
        self.test_memory = self.create_test_memory(None if seed is None else seed + 29)

    # ------------------------------------------------------------------ building blocks
    def embedder_factories(self) -> dict:
        mean, std = normalization_from_parameters(self.config.environment)
        hidden = self.config.neural_network.float_hidden_dim
        return {
            FRAME_KEY: lambda space: ImageEmbedder(space.shape),
            FLOATS_KEY: lambda space: VectorEmbedder(space.shape[0], [hidden, hidden],
                                                     torch.as_tensor(mean), torch.as_tensor(std)),
        }

    memory_class = MiniRaceReplay
    prioritized_memory_class = PrioritizedMiniRaceReplay

    def memory_kwargs(self) -> dict[str, Any]:
        env, training = self.config.environment, self.config.training
        return dict(
            clock_key=FLOATS_KEY, clock_index=self.layout.mini_race_clock.start,
            horizon=env.temporal_mini_race_duration_actions,
            oversample_long_term_steps=training.oversample_long_term_steps,
            oversample_maximum_term_steps=training.oversample_maximum_term_steps,
        )

    def create_test_memory(self, seed: int | None) -> ExperienceReplay | None:
        """The held-out buffer, sized for its share of the data (``buffer_test_ratio`` of the capacity)."""
        ratio = self.config.memory.buffer_test_ratio
        if ratio <= 0:
            return None
        capacity = max(int(np.ceil(self.memory_sizes()[0] * ratio)), self.config.training.batch_size * 4)
        return self.create_memory(seed, capacity)

    # ------------------------------------------------------------------ observing
    def observe(self, state: Observation, action: int, was_greedy: bool, reward: float,
                next_state: Observation, terminated: bool, truncated: bool) -> None:
        """Store into the training memory, or the whole episode into the test buffer."""
        if self._episode_memory is None:
            to_test = self.test_memory is not None and self.episode_rng.random() < self.config.memory.buffer_test_ratio
            self._episode_memory = self.test_memory if to_test else self.memory
        if self._episode_memory is self.memory:
            super().observe(state, action, was_greedy, reward, next_state, terminated, truncated)
        else:
            self._episode_memory.add(state, action, reward, next_state, terminated, truncated, was_greedy)
            self.counters.env_steps += 1
        if terminated or truncated:
            self._episode_memory = None

    def abandon_episode(self) -> None:
        """Forget an episode that ended without a final state (a discarded real-game rollout)."""
        for memory in (self.memory, self.test_memory):
            if memory is not None:
                memory.end_episode_without_final_state()
        self._episode_memory = None

    # ------------------------------------------------------------------ learning
    def loss_per_sample(self, predicted: torch.Tensor, targets: torch.Tensor, taus: torch.Tensor,
                        target_taus: torch.Tensor) -> torch.Tensor:
        loss = super().loss_per_sample(predicted, targets, taus, target_taus)
        ratio = self.config.training.target_self_loss_clamp_ratio
        if ratio <= 0:
            return loss
        with torch.no_grad():
            spread = quantile_huber_loss(targets, targets, target_taus, self.config.neural_network.iqn_kappa).sqrt()
            mean_spread = spread.mean().item()
            ema = self.target_spread_ema
            self.target_spread_ema = mean_spread if ema is None else SPREAD_EMA_DECAY * ema + (1 - SPREAD_EMA_DECAY) * mean_spread
            floor = max(self.target_spread_ema / ratio, 1e-6)
            scale = spread.clamp(min=floor)
        return loss / scale

    def after_update(self, batch: TransitionBatch, per_sample_loss: torch.Tensor) -> None:
        update = getattr(self.memory, "update_priorities", None)
        if update is not None:
            update(batch.indices, per_sample_loss.cpu().numpy(), clock=batch.clocks,
                   min_horizon=self.config.min_horizon_to_update_priority_actions)

    def test_loss(self) -> float | None:
        """IQN loss on a batch of the held-out buffer (no gradient), or None if it is too small."""
        if self.test_memory is None or len(self.test_memory) < self.config.training.batch_size:
            return None
        batch = self.to_batch(self.test_memory.sample(self.config.training.batch_size, self.gamma()))
        with torch.no_grad():
            return self.quantile_loss(batch, normalise=False)[0].mean().item()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, include_memory: bool) -> dict[str, Any]:
        state = super().state_dict(include_memory)
        state["target_spread_ema"] = self.target_spread_ema
        if include_memory and self.test_memory is not None:
            state["test_memory"] = self.test_memory.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.target_spread_ema = state.get("target_spread_ema")
        if "test_memory" in state and self.test_memory is not None:
            self.test_memory.load_state_dict(state["test_memory"])
