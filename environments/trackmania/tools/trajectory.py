"""A race as data: where the car was, how fast, and which inputs it held, at every action.

:func:`drive` runs one race in a :class:`TrackManiaEnv` (any backend) from a policy or a fixed list of
actions and returns a :class:`Trajectory`; with a :class:`~environments.trackmania.sim.render.Renderer`
it also renders each step from the car's own state at any resolution (the pictures' first-person view,
larger than the network's input). Trajectories round-trip through a small ``.npz``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from environments.trackmania.backend import CarState

#: ``choose(step)`` -> action (0..11) for the action number ``step`` (0-based).
ActionSource = Callable[[int], int]


@dataclass
class Trajectory:
    """One race, sampled at the start and after every action (T actions, T + 1 samples).

    Attributes:
        positions: (T + 1, 3) float64 world x, y, z, m.
        headings: (T + 1,) float64 yaw, rad (0 = +z, the renderer's convention).
        speeds_kmh: (T + 1,) float32 speed, km/h.
        race_time_ms: (T + 1,) int32 race time, ms.
        progress_m: (T + 1,) float32 distance driven along the reference line since the start, m.
        actions: (T,) int8 action index held before each sample from the second on.
        finished: the car crossed the finish line.
        end_reason: the environment's reason the race ended ("" when it finished or was cut by us).
        track: the track's name.
    """

    positions: np.ndarray
    headings: np.ndarray
    speeds_kmh: np.ndarray
    race_time_ms: np.ndarray
    progress_m: np.ndarray
    actions: np.ndarray
    finished: bool
    end_reason: str
    track: str

    @property
    def steps(self) -> int:
        """Actions played, T."""
        return int(len(self.actions))

    @property
    def race_time_s(self) -> float:
        """Race time at the last sample, s."""
        return float(self.race_time_ms[-1]) / 1000.0

    def save(self, path: str | Path) -> Path:
        """Write an ``.npz`` (a few kB per race)."""
        path = Path(path)
        np.savez_compressed(path, positions=self.positions, headings=self.headings, speeds_kmh=self.speeds_kmh,
                            race_time_ms=self.race_time_ms, progress_m=self.progress_m, actions=self.actions,
                            finished=np.asarray(self.finished), end_reason=np.asarray(self.end_reason),
                            track=np.asarray(self.track))
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Trajectory":
        """Read what :meth:`save` wrote (no pickles)."""
        with np.load(path, allow_pickle=False) as data:
            return cls(positions=data["positions"], headings=data["headings"], speeds_kmh=data["speeds_kmh"],
                       race_time_ms=data["race_time_ms"], progress_m=data["progress_m"], actions=data["actions"],
                       finished=bool(data["finished"]), end_reason=str(data["end_reason"]), track=str(data["track"]))


def heading_of(state: CarState) -> float:
    """The car's yaw from its rotation (forward axis = column 2), rad; 0 looks along +z."""
    return math.atan2(float(state.rotation[0, 2]), float(state.rotation[2, 2]))


def drive(env, choose: ActionSource | Sequence[int], seed: int | None, reset_options: dict | None = None,
          max_steps: int | None = None, renderer=None) -> tuple[Trajectory, list[np.ndarray]]:
    """Race once in ``env`` (a TrackManiaEnv) from ``env.reset(seed=seed, options=reset_options)``.

    ``choose`` is either ``step -> action`` or a sequence of actions (the race stops when it runs
    out). With ``renderer`` (a sim Renderer), each sample is also rendered from the car's position and
    heading: the list holds (H, W) uint8 copies, one per sample; otherwise it is empty.
    """
    base = env.unwrapped
    _, info = env.reset(seed=seed, options=reset_options)
    fixed = None if callable(choose) else [int(a) for a in choose]
    limit = len(fixed) if fixed is not None else (max_steps if max_steps is not None else 10 ** 9)
    if max_steps is not None:
        limit = min(limit, max_steps)
    positions, headings, speeds, times, progress, actions, frames = [], [], [], [], [], [], []

    def sample(info: dict) -> None:
        state = base.state
        positions.append(np.asarray(state.position, dtype=np.float64))
        headings.append(heading_of(state))
        speeds.append(info["speed_kmh"])
        times.append(info["race_time_ms"])
        progress.append(info["progress_m"])
        if renderer is not None:
            frames.append(renderer.render(float(state.position[0]), float(state.position[2]), headings[-1]).copy())

    sample(info)
    terminated = truncated = False
    step = 0
    while step < limit:
        action = fixed[step] if fixed is not None else int(choose(step))
        _, _, terminated, truncated, info = env.step(action)
        actions.append(action)
        step += 1
        sample(info)
        if terminated or truncated:
            break
    trajectory = Trajectory(
        positions=np.stack(positions), headings=np.asarray(headings, np.float64),
        speeds_kmh=np.asarray(speeds, np.float32), race_time_ms=np.asarray(times, np.int32),
        progress_m=np.asarray(progress, np.float32), actions=np.asarray(actions, np.int8),
        finished=bool(info["finished"]), end_reason=str(info["end_reason"]), track=str(info["track"]))
    return trajectory, frames
