"""Collection inside the learner's process (``gpu_collectors_count: 0``): the same Collector, the
learner's own agent and network, so acting and learning alternate step by step."""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from agents.agent import Agent
from rulka.collection.interface import Collection
from rulka.collection.rollout import Rollout
from rulka.collection.collector_setup import CollectorSetup


class InProcessCollection(Collection):
    """``envs_per_collector`` environments stepped by the learner between its updates.

    With one environment each step reaches the learner at once (a chunk of one action that the
    memory continues), which is what exact resume and the golden runs rely on.
    """

    def __init__(self, setup: CollectorSetup, agent: Agent, first_env: gym.Env | None = None) -> None:
        instances = setup.instances(0)
        envs = [first_env if (i == 0 and first_env is not None) else setup.env_factory(setup.config.environment, n)
                for i, n in enumerate(instances)]
        self.collector = setup.make_collector(agent, 0, 0, instances, continues=True, envs=envs)
        self.agent = agent

    def start(self, agent: Agent, heatup: bool) -> None:
        """Nothing to start: the learner steps the environments itself."""

    def poll(self, heatup: bool, timeout: float = 0.0) -> list[Rollout]:
        """One action in every environment; the chunks it completed."""
        return self.collector.step(heatup)

    @property
    def at_episode_boundary(self) -> bool:
        """No episode is under way (a checkpoint here resumes exactly)."""
        return all(slot.level.observation is None for slot in self.collector.slots)

    def publish(self, agent: Agent) -> None:
        """The collector acts with the learner's own network: nothing to publish."""

    def publish_counters(self, agent: Agent, heatup: bool) -> None:
        """The collector reads the learner's own counters: nothing to publish."""

    def health(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {"episodes_started": [slot.episodes_started for slot in self.collector.slots],
                "plans": [getattr(slot.plan, "state_dict", dict)() for slot in self.collector.slots]}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        if not state:
            return
        if "episodes_started" not in state:  # saved by collector processes / Ray actors: continue their counts
            counts = state.get("episodes_started_per_instance", {})
            for slot in self.collector.slots:
                started = int(counts.get(str(slot.instance), 0))
                slot.episodes_started = started
                slot.plan.advance(started)
            return
        for slot, started, plan_state in zip(self.collector.slots, state["episodes_started"], state["plans"]):
            slot.episodes_started = int(started)
            if hasattr(slot.plan, "load_state_dict"):
                slot.plan.load_state_dict(plan_state)

    def stop(self, timeout_s: float = 0.0) -> None:
        """Nothing runs on its own; the environments stay open for the next ``improve`` (``close`` ends them)."""

    def close(self) -> None:
        self.collector.close()
