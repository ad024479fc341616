"""TrackMania for rulka: the gymnasium env, its track model, and the built-in simulator.

Importing this package registers ``rulka/TrackManiaSim-v0`` with gymnasium.
"""
from __future__ import annotations

import gymnasium as gym

from environments.trackmania.parameters import TrackManiaEnvironmentParameters

ENV_ID = "rulka/TrackManiaSim-v0"

if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="environments.trackmania.env:TrackManiaEnv")


def __getattr__(name: str):
    # heavy modules load on first use
    if name == "TrackManiaEnv":
        from environments.trackmania.env import TrackManiaEnv

        return TrackManiaEnv
    raise AttributeError(name)


__all__ = ["ENV_ID", "TrackManiaEnv", "TrackManiaEnvironmentParameters"]
