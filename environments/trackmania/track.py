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
from rulka.config import ConfigError

#: Default physical road width of a track built from a bare reference line, m.
DEFAULT_NPY_ROAD_WIDTH_M = 20.0
#: Fewest points of a reference line (twice the zone smoothing window of 2 x 5 points).
MIN_REFERENCE_LINE_POINTS = 20
#: Shortest reference line, m: below this the car crosses the finish within its first second.
MIN_REFERENCE_LINE_LENGTH_M = 20.0
#: Consecutive points closer than this are the same point repeated, m.
REPEATED_POINT_TOLERANCE_M = 1e-6
_LINE_HOWTO = ("a reference line is an (N, 3) array of x, y (up), z positions in metres from the start to the "
               "finish, about 0.5 m apart (environments/trackmania/tmi/maps/replay_to_line.py makes one from a replay)")


class TrackFileError(ConfigError):
    """A reference line (or track file) that cannot be raced; the message names the file and the fix."""


def reference_line_problem(line: object) -> str | None:
    """What is wrong with ``line`` as a reference line (None: nothing); the text says how to fix it."""
    array = np.asarray(line) if not isinstance(line, np.ndarray) else line
    if array.dtype.kind not in "iuf":
        return f"holds {array.dtype} values, not numbers; {_LINE_HOWTO}"
    if array.ndim != 2 or array.shape[1] != 3:
        fix = _LINE_HOWTO
        if array.ndim == 2 and array.shape[1] == 2:
            fix = ("it has 2 columns: add the height (y, up) as the middle column, e.g. "
                   "np.insert(line, 1, HEIGHT_M, axis=1), and save it again")
        elif array.ndim == 2 and array.shape[0] == 3:
            fix = "it looks transposed: save line.T"
        return f"has shape {array.shape}, expected (N, 3): {fix}"
    bad = ~np.isfinite(array).all(axis=1)
    if bad.any():
        rows = np.flatnonzero(bad)
        return (f"{len(rows)} point(s) hold NaN or infinity (first at row {rows[0]}: {array[rows[0]].tolist()}); "
                f"remove or interpolate them and save the line again")
    if len(array) < MIN_REFERENCE_LINE_POINTS:
        return f"has {len(array)} points, at least {MIN_REFERENCE_LINE_POINTS} are needed; {_LINE_HOWTO}"
    steps = np.linalg.norm(np.diff(array.astype(np.float64), axis=0), axis=1)
    repeated = np.flatnonzero(steps <= REPEATED_POINT_TOLERANCE_M)
    if len(repeated):
        return (f"{len(repeated)} point(s) repeat the point before them (first: rows {repeated[0]} and "
                f"{repeated[0] + 1}); drop them, e.g. line = line[np.r_[True, np.linalg.norm(np.diff(line, axis=0), "
                f"axis=1) > 0]], and save the line again")
    length = float(steps.sum())
    if length < MIN_REFERENCE_LINE_LENGTH_M:
        return f"is {length:.1f} m long, at least {MIN_REFERENCE_LINE_LENGTH_M:g} m is needed; {_LINE_HOWTO}"
    return None


def validate_reference_line(line: object, source: str) -> np.ndarray:
    """``line`` as an (N, 3) float64 array, or :class:`TrackFileError` naming ``source`` and the fix."""
    problem = reference_line_problem(line)
    if problem:
        raise TrackFileError(f"{source}: reference line {problem}")
    return np.asarray(line, dtype=np.float64)


def load_reference_line(path: str | Path) -> np.ndarray:
    """The validated (N, 3) reference line stored in the ``.npy`` file ``path``."""
    path = Path(path)
    if not path.is_file():
        raise TrackFileError(f"{path}: reference line file not found; give the path of an (N, 3) .npy file")
    try:
        line = np.load(path, allow_pickle=False)
    except ValueError as error:  # pickled objects, or not a .npy file at all
        raise TrackFileError(f"{path}: not a reference line .npy file ({error}); {_LINE_HOWTO}, saved with "
                             f"np.save") from None
    except OSError as error:
        raise TrackFileError(f"{path}: cannot read the reference line ({error})") from None
    if not isinstance(line, np.ndarray):  # an .npz archive
        raise TrackFileError(f"{path}: holds an archive of several arrays, not one reference line; {_LINE_HOWTO}")
    return validate_reference_line(line, str(path))


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
        self.reference_line = validate_reference_line(self.reference_line, f"track {self.name!r}")
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

    @property
    def gate_half_width(self) -> float:
        """A checkpoint or finish gate counts a car that crosses it at most this far from the line, m:
        the road and its run-off up to the walls, as a game's checkpoint block triggers across its
        whole width between the barriers."""
        return 0.5 * self.road_width + self.runoff_width

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
    line = load_reference_line(path)
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
    the game itself decides when the race is finished. When not given, they are read from
    ``<line>.checkpoints.npy`` beside the line if it exists (a 1-D array, m); without them the zones
    are not synced to the real checkpoints and a race held at one ends as ``no_progress``.
    """
    track = track_from_npy(reference_line_path, road_width=road_width, name=name or Path(map_path).name)
    track.map_path = str(map_path)
    if checkpoint_s is None:
        sidecar = checkpoints_sidecar(reference_line_path)
        if sidecar.is_file():
            checkpoint_s = np.load(sidecar, allow_pickle=False).reshape(-1).tolist()
    track.checkpoint_s = [float(s) for s in (checkpoint_s or [])]
    return track


def checkpoints_sidecar(reference_line_path: str | Path) -> Path:
    """``<line>.checkpoints.npy``: the real checkpoints' arc lengths (m) beside a reference line."""
    path = Path(reference_line_path)
    return path.with_name(path.stem + ".checkpoints.npy")
