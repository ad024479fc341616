"""Per-point track geometry as Python lists, for the simulator's scalar per-tick code."""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from environments.trackmania.track import Track

#: Half-window of the road-height smoothing, points (~3 m): recorded lines are quantised to 0.1 m,
#: which would otherwise make the car hop at every step.
_HEIGHT_SMOOTHING_HALF_WINDOW = 6
#: Half-window of the slope estimate, points (~2.5 m on a 0.5 m line).
_SLOPE_HALF_WINDOW = 5


@dataclass
class SimTrackGeometry:
    """Raw-line geometry as lists (fast scalar indexing): positions, horizontal tangent / left normal,
    arc length (m), slope dy/ds (dimensionless), plus the road half-width and wall distance (m).

    ``gate_half_width``: :attr:`Track.gate_half_width`, m."""

    x: list[float]
    y: list[float]
    z: list[float]
    tx: list[float]
    tz: list[float]
    nx: list[float]
    nz: list[float]
    s: list[float]
    slope: list[float]
    n: int
    mean_spacing: float
    half_width: float
    wall_distance: float
    finish_s: float
    checkpoint_s: list[float]
    gate_half_width: float


def _smooth(values: np.ndarray, half_window: int, passes: int = 2) -> np.ndarray:
    """Repeated centred moving average (edges padded with the end values)."""
    out = np.asarray(values, dtype=np.float64)
    kernel = np.ones(2 * half_window + 1) / (2 * half_window + 1)
    for _ in range(passes):
        out = np.convolve(np.pad(out, half_window, mode="edge"), kernel, mode="valid")
    return out


_CACHE: "weakref.WeakKeyDictionary[Track, SimTrackGeometry]" = weakref.WeakKeyDictionary()


def sim_geometry(track: Track) -> SimTrackGeometry:
    """The (cached) :class:`SimTrackGeometry` of ``track``."""
    geo = _CACHE.get(track)
    if geo is not None:
        return geo
    line = track.reference_line
    s = track.arc_length
    n = len(line)
    y = _smooth(line[:, 1], _HEIGHT_SMOOTHING_HALF_WINDOW)
    k = _SLOPE_HALF_WINDOW
    hi = np.minimum(np.arange(n) + k, n - 1)
    lo = np.maximum(np.arange(n) - k, 0)
    dh = np.linalg.norm(line[hi][:, [0, 2]] - line[lo][:, [0, 2]], axis=1)
    slope = (y[hi] - y[lo]) / np.maximum(dh, 1e-6)
    t = track.tangent_xz
    nrm = track.left_xz
    geo = SimTrackGeometry(
        x=line[:, 0].tolist(), y=y.tolist(), z=line[:, 2].tolist(),
        tx=t[:, 0].tolist(), tz=t[:, 1].tolist(), nx=nrm[:, 0].tolist(), nz=nrm[:, 1].tolist(),
        s=s.tolist(), slope=slope.tolist(), n=n, mean_spacing=float(s[-1] / (n - 1)),
        half_width=0.5 * track.road_width, wall_distance=track.gate_half_width,
        finish_s=float(s[-1]), checkpoint_s=sorted(float(c) for c in track.checkpoint_s),
        gate_half_width=track.gate_half_width,
    )
    _CACHE[track] = geo
    return geo
