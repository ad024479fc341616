"""A track: reference line, road geometry, surfaces, turbo pads and checkpoints.

The reference line is an (N, 3) float64 array of world positions (x, y up, z) about 0.5 m apart,
from the start (index 0) to the finish (index N - 1), driven near the centre of the road.
Surface patches and turbo pads are given in *track coordinates*: ``s`` metres along the raw line
and ``lateral`` metres to the left of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from environments.trackmania.backend import SURFACE_ASPHALT, SURFACE_TURBO

#: Default physical road width of a track built from a bare reference line, m.
DEFAULT_NPY_ROAD_WIDTH_M = 20.0


@dataclass(frozen=True)
class SurfacePatch:
    """A rectangle of one surface in track coordinates: s in [s_start, s_end), lateral in [lat_min, lat_max] (m)."""

    s_start: float
    s_end: float
    lat_min: float
    lat_max: float
    surface: int


@dataclass(eq=False)
class Track:
    """Everything a backend, the renderer and the driver need to know about a track.

    Attributes:
        name: display name.
        reference_line: (N, 3) float64, world metres, start -> finish, ~0.5 m apart.
        road_width: physical width of the road (not the zone-tracking ``road_width`` parameter), m.
        runoff_width: grass strip beyond each road edge before the wall, m.
        surface_patches: non-asphalt areas of the road (grass, dirt, other).
        turbo_pads: turbo areas (their surface is SURFACE_TURBO).
        checkpoint_s: arc lengths of the real checkpoints along the raw line, m (the finish is not one).
        is_loop: the line ends where it starts (one lap).
        map_path: the game's map (``.Challenge.Gbx``) for the ``tmi`` backend; None for simulator-only tracks.
    """

    name: str
    reference_line: np.ndarray
    road_width: float = 16.0
    runoff_width: float = 6.0
    surface_patches: list[SurfacePatch] = field(default_factory=list)
    turbo_pads: list[SurfacePatch] = field(default_factory=list)
    checkpoint_s: list[float] = field(default_factory=list)
    is_loop: bool = False
    map_path: str | None = None

    def __post_init__(self) -> None:
        line = np.asarray(self.reference_line, dtype=np.float64)
        if line.ndim != 2 or line.shape[1] != 3 or len(line) < 3:
            raise ValueError(f"track {self.name!r}: reference line must be (N >= 3, 3), got {line.shape}")
        self.reference_line = line
        for pad in self.turbo_pads:
            if pad.surface != SURFACE_TURBO:
                raise ValueError(f"track {self.name!r}: a turbo pad must have surface SURFACE_TURBO")

    # ----- geometry derived once -----
    @cached_property
    def arc_length(self) -> np.ndarray:
        """(N,) metres along the raw line from the start (3-D distance)."""
        seg = np.linalg.norm(np.diff(self.reference_line, axis=0), axis=1)
        return np.concatenate([[0.0], np.cumsum(seg)])

    @property
    def length_m(self) -> float:
        """Length of the raw line, m."""
        return float(self.arc_length[-1])

    @cached_property
    def tangent_xz(self) -> np.ndarray:
        """(N, 2) unit horizontal tangents (x, z), smoothed over ~2.5 m to hide the line's quantisation."""
        p = self.reference_line[:, [0, 2]]
        k = 5
        fwd = p[np.minimum(np.arange(len(p)) + k, len(p) - 1)] - p[np.maximum(np.arange(len(p)) - k, 0)]
        return fwd / np.maximum(np.linalg.norm(fwd, axis=1), 1e-9)[:, None]

    @cached_property
    def left_xz(self) -> np.ndarray:
        """(N, 2) unit horizontal left normals (x, z): up x forward = (t_z, -t_x)."""
        t = self.tangent_xz
        return np.stack([t[:, 1], -t[:, 0]], axis=1)

    @cached_property
    def checkpoint_positions(self) -> np.ndarray:
        """(K, 3) world positions of the real checkpoints."""
        if not self.checkpoint_s:
            return np.zeros((0, 3))
        idx = np.searchsorted(self.arc_length, np.asarray(self.checkpoint_s), side="left")
        return self.reference_line[np.clip(idx, 0, len(self.reference_line) - 1)]

    @cached_property
    def surface_index(self) -> tuple[list[int], list[SurfacePatch]]:
        """Per raw-line point, the index of the patch (surface or turbo) covering it, or -1."""
        patches = list(self.surface_patches) + list(self.turbo_pads)
        owner = np.full(len(self.reference_line), -1, dtype=np.int64)
        s = self.arc_length
        for k, patch in enumerate(patches):
            owner[(s >= patch.s_start) & (s < patch.s_end)] = k
        return owner.tolist(), patches

    def surface_at(self, index: int, lateral: float) -> int:
        """The surface (SURFACE_*) at raw-line point ``index`` and ``lateral`` metres left of it (road only)."""
        owners, patches = self.surface_index
        k = owners[index]
        if k >= 0:
            p = patches[k]
            if p.lat_min <= lateral <= p.lat_max:
                return p.surface
        return SURFACE_ASPHALT


def track_from_npy(
    path: str | Path,
    road_width: float = DEFAULT_NPY_ROAD_WIDTH_M,
    name: str | None = None,
    n_checkpoints: int = 0,
) -> Track:
    """A track from a reference-line ``.npy`` (N, 3) and a road width (m); optional evenly spaced checkpoints."""
    path = Path(path)
    line = np.load(path, allow_pickle=False)
    track = Track(name=name or path.stem, reference_line=line, road_width=road_width)
    if n_checkpoints:
        track.checkpoint_s = [track.length_m * (k + 1) / (n_checkpoints + 1) for k in range(n_checkpoints)]
    return track


def track_from_map(
    map_path: str | Path,
    reference_line_path: str | Path,
    road_width: float = DEFAULT_NPY_ROAD_WIDTH_M,
    name: str | None = None,
    checkpoint_s: list[float] | None = None,
) -> Track:
    """A real-game track: the map the game loads plus its reference line ``.npy`` (a map-cycle entry).

    ``checkpoint_s`` are the real checkpoints' arc lengths along the line, m (the finish excluded);
    the game itself decides when the race is finished.
    """
    track = track_from_npy(reference_line_path, road_width=road_width, name=name or Path(map_path).name)
    track.map_path = str(map_path)
    track.checkpoint_s = [float(s) for s in (checkpoint_s or [])]
    return track
