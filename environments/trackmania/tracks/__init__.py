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

from environments.trackmania.track import DEFAULT_NPY_ROAD_WIDTH_M, Track, track_from_npy
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


@lru_cache(maxsize=32)
def get_track(name: str = DEFAULT_TRACK) -> Track:
    """The track called ``name`` (see the module docstring). Cached: do not mutate the result."""
    if name in BUILTIN_SPECS:
        return build_track(BUILTIN_SPECS[name])
    if name.startswith("procedural:"):
        return generate_point_to_point(int(name.split(":", 1)[1]))
    if name.startswith("loop:"):
        return generate_loop(int(name.split(":", 1)[1]))
    if name.lower() == "hockolicious":
        if not HOCKOLICIOUS_PATH.exists():
            raise FileNotFoundError(f"the Hockolicious line is not at {HOCKOLICIOUS_PATH}")
        return track_from_npy(HOCKOLICIOUS_PATH, road_width=HOCKOLICIOUS_ROAD_WIDTH_M, name="hockolicious",
                              n_checkpoints=6)
    path, _, width = name.partition("@")
    if path.endswith(".npy"):
        return track_from_npy(path, road_width=float(width) if width else DEFAULT_NPY_ROAD_WIDTH_M)
    raise KeyError(f"unknown track {name!r}; built-in: {', '.join(BUILTIN_TRACK_NAMES)}, "
                   "or procedural:SEED, loop:SEED, hockolicious, PATH.npy[@WIDTH]")


def resolve_track(track: "Track | str | None") -> Track:
    """A Track from a Track, a name or None (the default track)."""
    if track is None:
        return get_track(DEFAULT_TRACK)
    if isinstance(track, Track):
        return track
    return get_track(str(track))


__all__ = ["get_track", "resolve_track", "DEFAULT_TRACK", "BUILTIN_TRACK_NAMES", "HOCKOLICIOUS_PATH",
           "generate_loop", "generate_point_to_point"]
