"""Track catalogue: built-in names, procedural seeds, reference-line files.

``get_track(name)`` accepts:
  * ``short`` (default), ``medium``, ``technical``: built-in layouts;
  * ``procedural:SEED`` / ``loop:SEED``: generated point-to-point / closed tracks;
  * ``hockolicious``: the real ESL-Hockolicious line from ``../shared/tracks`` (when present);
  * a path to an (N, 3) ``.npy`` reference line, optionally ``PATH@ROAD_WIDTH_M``.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from environments.trackmania.track import DEFAULT_NPY_ROAD_WIDTH_M, Track, TrackFileError, load_reference_line, track_from_npy
from environments.trackmania.tracks.builder import build_track
from environments.trackmania.tracks.builtin import BUILTIN_SPECS
from environments.trackmania.tracks.generator import generate_loop, generate_point_to_point

DEFAULT_TRACK = "short"
BUILTIN_TRACK_NAMES: tuple[str, ...] = tuple(BUILTIN_SPECS)

#: The shared data folder beside the repository (``<repo>/../shared``).
SHARED_DIR: Path = Path(__file__).resolve().parents[3] / ".." / "shared"
HOCKOLICIOUS_PATH: Path = SHARED_DIR / "tracks" / "ESL-Hockolicious_0.5m_cl2.npy"
#: Road width given to the Hockolicious line (TrackMania roads are ~16-32 m), m.
HOCKOLICIOUS_ROAD_WIDTH_M = 24.0


class UnknownTrackError(TrackFileError, KeyError):
    """A track name that is neither built-in, generated nor a reference-line file (also a KeyError)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


_NAMES_HELP = (f"built-in: {', '.join(BUILTIN_TRACK_NAMES)}, or procedural:SEED, loop:SEED, hockolicious, "
               "PATH.npy[@WIDTH]")


def _seed(name: str) -> int:
    try:
        return int(name.split(":", 1)[1])
    except ValueError:
        raise UnknownTrackError(f"track {name!r}: the seed after ':' must be a whole number, e.g. "
                                f"{name.split(':', 1)[0]}:3") from None


@lru_cache(maxsize=32)
def get_track(name: str = DEFAULT_TRACK) -> Track:
    """The track called ``name`` (see the module docstring). Cached: do not mutate the result."""
    if name in BUILTIN_SPECS:
        return build_track(BUILTIN_SPECS[name])
    if name.startswith("procedural:"):
        return generate_point_to_point(_seed(name))
    if name.startswith("loop:"):
        return generate_loop(_seed(name))
    if name.lower() == "hockolicious":
        if not HOCKOLICIOUS_PATH.exists():
            raise FileNotFoundError(f"the Hockolicious line is not at {HOCKOLICIOUS_PATH}")
        return track_from_npy(HOCKOLICIOUS_PATH, road_width=HOCKOLICIOUS_ROAD_WIDTH_M, name="hockolicious",
                              n_checkpoints=6)
    path, _, width = name.partition("@")
    if path.endswith(".npy"):
        return track_from_npy(path, road_width=_road_width(name, width))
    raise UnknownTrackError(f"unknown track {name!r}; {_NAMES_HELP}")


def _road_width(name: str, width: str) -> float:
    """The road width of ``PATH.npy@WIDTH``, m (the default without ``@``)."""
    if not width:
        return DEFAULT_NPY_ROAD_WIDTH_M
    try:
        value = float(width)
    except ValueError:
        value = float("nan")
    if not np.isfinite(value) or value <= 0:
        raise UnknownTrackError(f"track {name!r}: the road width after '@' must be a positive number of metres, "
                                f"got {width!r}")
    return value


def check_track_name(name: str) -> None:
    """Raise :class:`TrackFileError` if :func:`get_track` would refuse ``name`` (without building a
    generated track; a reference-line file is loaded and validated)."""
    if name in BUILTIN_SPECS:
        return
    if name.startswith(("procedural:", "loop:")):
        _seed(name)
        return
    if name.lower() == "hockolicious":
        if not HOCKOLICIOUS_PATH.exists():
            raise TrackFileError(f"the Hockolicious line is not at {HOCKOLICIOUS_PATH}")
        return
    path, _, width = name.partition("@")
    if path.endswith(".npy"):
        _road_width(name, width)
        load_reference_line(path)
        return
    raise UnknownTrackError(f"unknown track {name!r}; {_NAMES_HELP}")


def resolve_track(track: "Track | str | None") -> Track:
    """A Track from a Track, a name or None (the default track)."""
    if track is None:
        return get_track(DEFAULT_TRACK)
    if isinstance(track, Track):
        return track
    return get_track(str(track))


__all__ = ["get_track", "check_track_name", "UnknownTrackError", "resolve_track", "DEFAULT_TRACK", "BUILTIN_TRACK_NAMES", "HOCKOLICIOUS_PATH",
           "generate_loop", "generate_point_to_point"]
