"""The LevelManager: the proxy between one agent and one environment.

It passes the environment's response through the agent's input filter to ``agent.observe`` and
the agent's action through the output filter to the environment. Agents never see the
environment, and environments never see the agent.
"""
from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from agents.agent import Agent
from filters import InputFilter, OutputFilter
from rulka.core_types import Observation, RunPhase


@dataclass
class StepResult:
    reward: float  # the environment's reward, before reward filters
    terminated: bool
    truncated: bool
    info: dict
    next_observation: Observation  # filtered

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


class LevelManager:
    def __init__(self, agent: Agent, env: gym.Env, input_filter: InputFilter, output_filter: OutputFilter) -> None:
        self.agent = agent
        self.env = env
        self.input_filter = input_filter
        self.output_filter = output_filter
        self.observation: Observation | None = None
        self.episode_return = 0.0
        self.episode_length = 0
        self.last_action: int | None = None

    def reset(self, seed: int | None = None) -> None:
        raw, _ = self.env.reset(seed=seed)
        self.observation = self.input_filter.filter_observation(raw)
        self.episode_return = 0.0
        self.episode_length = 0

    def step(self, phase: RunPhase, store: bool | None = None) -> StepResult:
        """One action in the environment.

        The agent observes it (stores it, counts it) when ``store`` is true; by default unless
        evaluating. Greedy runs that fill the buffer (a map cycle's evaluation entries) pass
        ``phase=EVALUATE, store=True``.
        """
        store = phase is not RunPhase.EVALUATE if store is None else store
        if self.observation is None:
            self.reset()
        state = self.observation
        batched = {k: np.expand_dims(v, 0) for k, v in state.items()}
        info = self.agent.act(batched, phase)
        action = int(info.actions[0])
        raw, reward, terminated, truncated, env_info = self.env.step(self.output_filter.filter(action))
        next_state = self.input_filter.filter_observation(raw)
        self.last_action = action
        # A rollout the environment lost (a hung game: info["discarded"]) ends without a real last
        # transition: the agent forgets the episode's open windows instead of storing a fake step.
        discarded = bool(env_info.get("discarded", False))
        if store and discarded:
            self.agent.abandon_episode()
        elif store:
            self.agent.observe(state, action, bool(info.was_greedy[0]), self.input_filter.filter_reward(reward),
                               next_state, bool(terminated), bool(truncated))
        self.episode_return += float(reward)
        self.episode_length += 1
        self.observation = next_state
        result = StepResult(float(reward), bool(terminated), bool(truncated), env_info, next_state)
        if result.done:
            if store and not discarded:
                self.agent.handle_episode_ended()
            self.observation = None
        return result
