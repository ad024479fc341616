"""Everything a collector needs to build its agent, environments and plans, in a picklable form.

A collector process receives a :class:`CollectorSetup` (started with ``spawn``, so every field
must pickle: classes and functions defined at module level, dataclass parameters, filters).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import gymnasium as gym
from gymnasium import spaces

from agents.agent import Agent
from filters import InputFilter, OutputFilter
from rulka.collection.collector import Collector
from rulka.collection.rollout import EpisodePlan
from rulka.level_manager import LevelManager
from rulka.parameters import EnvironmentParameters, ExperimentConfig

#: ``env_factory(environment_parameters, instance)``: environment number ``instance`` (a game instance).
EnvFactory = Callable[[EnvironmentParameters, int], gym.Env]
#: ``plan_factory(config, instance)``: the episode plan of environment number ``instance``.
PlanFactory = Callable[[ExperimentConfig, int], EpisodePlan]


def default_plan(config: ExperimentConfig, instance: int) -> EpisodePlan:
    """Explore and store every episode."""
    return EpisodePlan()


@dataclass
class CollectorSetup:
    agent_class: type[Agent]
    config: ExperimentConfig
    observation_space: spaces.Dict  # filtered
    action_space: spaces.Discrete  # filtered
    env_factory: EnvFactory
    plan_factory: PlanFactory
    input_filter: InputFilter
    output_filter: OutputFilter
    info_keys: tuple[str, ...] = ()
    seed: int = 0

    @property
    def envs_per_collector(self) -> int:
        return self.config.performance.envs_per_collector

    def instances(self, collector_id: int) -> list[int]:
        """Global numbers of collector ``collector_id``'s environments (a game instance each)."""
        k = self.envs_per_collector
        return list(range(collector_id * k, (collector_id + 1) * k))

    def make_agent(self, device: Any, seed: int) -> Agent:
        return self.agent_class(self.config, self.observation_space, self.action_space, device, seed)

    def make_collector(self, agent: Agent, collector_id: int, incarnation: int, instances: Sequence[int],
                       continues: bool, envs: Sequence[gym.Env] | None = None,
                       before_acting: Callable[[bool], int] | None = None,
                       episodes_started: Sequence[int] | None = None,
                       on_reset: Callable[[bool], None] | None = None) -> Collector:
        """A collector over fresh environments for ``instances`` (or the given ``envs``), whose
        plans and reset seeds continue after ``episodes_started`` episodes per environment."""
        envs = list(envs) if envs is not None else [self.env_factory(self.config.environment, i) for i in instances]
        levels = [LevelManager(agent, env, self.input_filter, self.output_filter) for env in envs]
        plans = [self.plan_factory(self.config, i) for i in instances]
        chunk = 1 if continues and len(envs) == 1 else self.config.performance.rollout_chunk_actions
        return Collector(agent, levels, plans, (collector_id, incarnation), self.seed, instances, chunk, continues,
                         self.info_keys, True, before_acting, episodes_started, on_reset,
                         concurrent=self.config.performance.concurrent_env_steps)
