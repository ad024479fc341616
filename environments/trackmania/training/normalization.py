"""Normalisation of the float observation: built-in defaults, measurement from rollouts, YAML output.

The network sees ``(floats - mean) / std``. Defaults are domain-derived (clock mean 70 std 70,
distance-to-finish mean 700 std 350, flags around their typical frequency, reference-line points
spreading with distance); :func:`measure_float_stats` recomputes them from rollouts and
:func:`write_state_normalization_yaml` writes the ``state_normalization`` section.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np
import yaml

from environments.trackmania.actions import INPUT_NAMES
from environments.trackmania.layout import FloatLayout
from environments.trackmania.parameters import TrackManiaEnvironmentParameters

#: Typical (mean, std) of each previous-action flag.
_FLAG_STATS = {"accelerate": (0.8, 0.4), "brake": (0.1, 0.3), "left": (0.2, 0.4), "right": (0.2, 0.4)}
#: (mean, std) per single-valued or per-wheel group.
_GROUP_STATS = {
    "wheel_is_sliding": (0.1, 0.3),
    "wheel_has_ground_contact": (0.95, 0.2),
    "wheel_damper_absorb": (0.06, 0.03),
    "gearbox_state": (0.1, 0.3),
    "gear": (3.0, 1.5),
    "rpm": (6000.0, 3000.0),
    "gear_change_counter": (0.7, 0.35),
    "is_freewheeling": (0.3, 0.46),
}
#: (mean, std) per car-frame axis (left, up, forward).
_ANGULAR_VELOCITY = ((0.0, 0.0, 0.0), (0.5, 1.0, 0.5))
_LINEAR_VELOCITY = ((0.0, 0.0, 40.0), (3.0, 2.0, 25.0))
_WORLD_UP = ((0.0, 1.0, 0.0), (0.1, 0.05, 0.1))
#: Surface one-hot (mean, std): asphalt-like vs the rest.
_SURFACE_STATS = ((0.85, 0.35), (0.05, 0.2))
#: Smallest std kept by the measurement (constant features keep their default std).
_MIN_STD = 1e-3


def default_normalization(params: TrackManiaEnvironmentParameters) -> tuple[np.ndarray, np.ndarray]:
    """Built-in (mean, std), float32 arrays of length ``float_input_dim``."""
    layout = FloatLayout.from_parameters(params)
    mean = np.zeros(layout.size, dtype=np.float32)
    std = np.ones(layout.size, dtype=np.float32)
    horizon = params.temporal_mini_race_duration_actions
    mean[layout.mini_race_clock] = horizon / 2
    std[layout.mini_race_clock] = horizon / 2
    flags_m = np.array([_FLAG_STATS[n][0] for n in INPUT_NAMES])
    flags_s = np.array([_FLAG_STATS[n][1] for n in INPUT_NAMES])
    mean[layout.previous_actions] = np.tile(flags_m, layout.n_prev_actions)
    std[layout.previous_actions] = np.tile(flags_s, layout.n_prev_actions)
    for name, (m, s) in _GROUP_STATS.items():
        mean[getattr(layout, name)] = m
        std[getattr(layout, name)] = s
    surf_m = np.array([_SURFACE_STATS[0][0]] + [_SURFACE_STATS[1][0]] * (layout.n_surface_groups - 1))
    surf_s = np.array([_SURFACE_STATS[0][1]] + [_SURFACE_STATS[1][1]] * (layout.n_surface_groups - 1))
    mean[layout.wheel_surface_one_hot] = np.tile(surf_m[: layout.n_surface_groups], 4)
    std[layout.wheel_surface_one_hot] = np.tile(surf_s[: layout.n_surface_groups], 4)
    for name, (m, s) in (("angular_velocity", _ANGULAR_VELOCITY), ("linear_velocity", _LINEAR_VELOCITY),
                         ("world_up", _WORLD_UP)):
        mean[getattr(layout, name)] = m
        std[getattr(layout, name)] = s
    # reference-line point k lies ~k * spacing ahead, spreading sideways and up with distance
    spacing = params.one_every_n_zone_centers_in_inputs * params.distance_between_checkpoints
    k = np.arange(layout.n_zone_centers, dtype=np.float64)
    ahead = k * spacing
    zc_mean = np.stack([np.zeros_like(k), np.zeros_like(k), 0.95 * ahead], axis=1)
    zc_std = np.stack([1.0 + 0.35 * ahead, 1.0 + 0.05 * ahead, 1.0 + 0.25 * ahead], axis=1)
    mean[layout.zone_centers] = zc_mean.reshape(-1)
    std[layout.zone_centers] = zc_std.reshape(-1)
    mean[layout.distance_to_finish] = params.margin_to_announce_finish_meters
    std[layout.distance_to_finish] = params.margin_to_announce_finish_meters / 2
    return mean, std


def normalization_from_parameters(params: TrackManiaEnvironmentParameters) -> tuple[np.ndarray, np.ndarray]:
    """``params.float_inputs_mean`` / ``_std`` when given (length-checked), else the defaults."""
    mean, std = default_normalization(params)
    n = len(mean)
    if params.float_inputs_mean is not None:
        if len(params.float_inputs_mean) != n:
            raise ValueError(f"float_inputs_mean has {len(params.float_inputs_mean)} values, expected {n}")
        mean = np.asarray(params.float_inputs_mean, dtype=np.float32)
    if params.float_inputs_std is not None:
        if len(params.float_inputs_std) != n:
            raise ValueError(f"float_inputs_std has {len(params.float_inputs_std)} values, expected {n}")
        std = np.asarray(params.float_inputs_std, dtype=np.float32)
    return mean, std


def stats_from_samples(samples: np.ndarray, params: TrackManiaEnvironmentParameters) -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) of (N, F) float observations. The clock (a placeholder while collecting) keeps its
    domain value; features that never varied keep their default std."""
    layout = FloatLayout.from_parameters(params)
    d_mean, d_std = default_normalization(params)
    mean = np.nanmean(samples, axis=0).astype(np.float32)
    std = np.nanstd(samples, axis=0).astype(np.float32)
    mean[layout.mini_race_clock] = d_mean[layout.mini_race_clock]
    std[layout.mini_race_clock] = d_std[layout.mini_race_clock]
    flat = std < _MIN_STD
    std[flat] = d_std[flat]
    return mean, std


def measure_float_stats(
    track: str = "short",
    episodes: int = 4,
    params: TrackManiaEnvironmentParameters | None = None,
    noise: float = 0.15,
    seed: int = 0,
    max_steps_per_episode: int = 6000,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Roll out the classical driver with ``noise`` probability of a random action; returns (mean, std, n)."""
    from environments.trackmania.tools.baseline import BaselineDriver
    from environments.trackmania.env import TrackManiaEnv

    params = params or TrackManiaEnvironmentParameters()
    env = TrackManiaEnv(params=params, track=track)
    rng = np.random.default_rng(seed)
    rows: list[np.ndarray] = []
    for ep in range(episodes):
        obs, info = env.reset(seed=seed + ep)
        driver = BaselineDriver(env.track)
        for _ in range(max_steps_per_episode):
            rows.append(obs["floats"].copy())
            action = driver.act(env.state) if rng.random() >= noise else int(rng.integers(env.action_space.n))
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
    env.close()
    samples = np.stack(rows)
    mean, std = stats_from_samples(samples, params)
    return mean, std, len(samples)


def write_state_normalization_yaml(path: str | Path, mean: Iterable[float], std: Iterable[float]) -> Path:
    """Write ``{state_normalization: {float_inputs_mean: [...], float_inputs_std: [...]}}`` to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"state_normalization": {
        "float_inputs_mean": [round(float(x), 6) for x in mean],
        "float_inputs_std": [round(float(x), 6) for x in std],
    }}
    path.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))
    return path


def read_state_normalization_yaml(path: str | Path) -> tuple[list[float], list[float]]:
    """Read back the lists written by :func:`write_state_normalization_yaml` (yaml.safe_load)."""
    doc = yaml.safe_load(Path(path).read_text())
    section = doc["state_normalization"]
    return list(section["float_inputs_mean"]), list(section["float_inputs_std"])
