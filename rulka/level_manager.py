"""The LevelManager: the proxy between one agent and one environment.

It passes the environment's response through the agent's input filter and the agent's action
through the output filter. Agents never see the environment, and environments never see the agent.
A :class:`~rulka.collection.collector.Collector` holds one LevelManager per environment and chooses
the actions of all of them in one forward pass; :meth:`LevelManager.step` acts for one environment
alone (evaluation, tests).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from agents.agent import Agent
from filters import InputFilter, OutputFilter
from rulka.core_types import Observation, RunPhase
from rulka.phased_steps import Phases
from rulka.validation import check_finite_step


@dataclass
class StepResult:
    reward: float  # the environment's reward, before reward filters
    filtered_reward: float
    terminated: bool
    truncated: bool
    info: dict
    next_observation: Observation  # filtered

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def discarded(self) -> bool:
        """The environment lost the episode (a hung game): the step never happened."""
        return bool(self.info.get("discarded", False))


class LevelManager:
    def __init__(self, agent: Agent | None, env: gym.Env, input_filter: InputFilter, output_filter: OutputFilter) -> None:
        self.agent = agent
        self.env = env
        self.input_filter = input_filter
        self.output_filter = output_filter
        self.env_name = getattr(getattr(env, "spec", None), "id", None) or type(getattr(env, "unwrapped", env)).__name__
        self.observation: Observation | None = None
        self.episode_return = 0.0
        self.episode_length = 0
        self.last_action: int | None = None

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Observation:
        raw, _ = self.env.reset(seed=seed, options=options)
        check_finite_step(raw, 0.0, self.env_name, 0)
        self.observation = self.input_filter.filter_observation(raw)
        self.episode_return = 0.0
        self.episode_length = 0
        return self.observation

    def apply(self, action: int) -> StepResult:
        """Send ``action`` (the agent's) to the environment and filter its response."""
        return self._filtered_result(action, *self.env.step(self.output_filter.filter(action)))

    def apply_phases(self, action: int) -> Phases[StepResult]:
        """:meth:`apply` through the environment's ``step_phases`` (see
        :mod:`rulka.phased_steps`): yields while the environment waits on another process."""
        response = yield from self.env.step_phases(self.output_filter.filter(action))
        return self._filtered_result(action, *response)

    def _filtered_result(self, action: int, raw: Observation, reward: float, terminated: bool, truncated: bool,
                 info: dict) -> StepResult:
        check_finite_step(raw, reward, self.env_name, self.episode_length + 1)
        next_state = self.input_filter.filter_observation(raw)
        self.last_action = action
        self.episode_return += float(reward)
        self.episode_length += 1
        self.observation = next_state
        result = StepResult(float(reward), float(self.input_filter.filter_reward(reward)), bool(terminated),
                            bool(truncated), info, next_state)
        if result.done:
            self.observation = None
        return result

    def step(self, phase: RunPhase) -> StepResult:
        """Act for this environment alone (one forward pass for one observation) and step it."""
        if self.observation is None:
            self.reset()
        batched = {k: np.expand_dims(v, 0) for k, v in self.observation.items()}
        info = self.agent.act(batched, phase)
        return self.apply(int(info.actions[0]))
