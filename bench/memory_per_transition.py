"""Bytes per stored transition of the TrackMania replay at 120 x 160, next to two raw frames.

    python bench/memory_per_transition.py

Goal: at most 0.55 of two raw frames (each frame stored once; next states reference slots).
The memory is filled with real simulator transitions, then its arrays are measured.
"""
from __future__ import annotations

import numpy as np

from agents.trackmania_iqn_agent import TrackManiaIQNAgent
from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig
from rulka.config import apply_overrides
from rulka.core_types import RunPhase

CAPACITY = 20_000


def main() -> None:
    config = apply_overrides(TrackManiaExperimentConfig(), overrides=[
        f"memory.memory_size_schedule=[[0, [{CAPACITY}, {CAPACITY}]]]", "memory.buffer_test_ratio=0"])
    env = TrackManiaEnv(config.environment)
    agent = TrackManiaIQNAgent(config, env.observation_space, env.action_space, "cpu", seed=0)
    obs, _ = env.reset(seed=0)
    for _ in range(CAPACITY):
        action = int(agent.act({k: v[None] for k, v in obs.items()}, RunPhase.HEATUP).actions[0])
        nxt, reward, terminated, truncated, _ = env.step(action)
        agent.observe(obs, action, False, reward, nxt, terminated, truncated)
        obs = nxt if not (terminated or truncated) else env.reset()[0]
    memory = agent.memory
    per_transition = memory.bytes_per_transition()
    raw_pair = 2 * int(np.prod(env.observation_space["frame"].shape))
    print(f"{memory.capacity} slots filled with simulator steps (an episode's final state takes a slot too)")
    print(f"bytes per stored transition: {per_transition:.0f}")
    print(f"two raw 120x160 frames:      {raw_pair}")
    print(f"ratio: {per_transition / raw_pair:.3f} (goal <= 0.55)")


if __name__ == "__main__":
    main()
