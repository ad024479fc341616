"""Build a reference line ``.npy`` from a ``.Replay.Gbx`` ghost.

A reference line is an ``(N, 3)`` float64 array of world positions (x, y up, z) spaced
``distance_between_checkpoints`` (0.5 m) apart along the driven path. The ghost's samples are
read with ``pygbx``, an optional dependency (``pip install pygbx``), then resampled by arc length
with :func:`resample_polyline`, which needs only numpy.

A ghost stores its own sample period (``sample_period``, ms; 100 ms in most TMNF replays, 50 ms in
some): the samples up to the finish are ``race_time // sample_period + 1``. Assuming 100 ms for a
50 ms ghost keeps only the first half of the race. A ghost that respawned jumps back along the
track; its line is refused by nothing but usually wrong, so a warning says so.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: The sample period assumed when a ghost does not state its own (ms of race time).
DEFAULT_GHOST_SAMPLE_PERIOD_MS = 100


class GhostRespawnWarning(UserWarning):
    """The ghost respawned during its race: its path jumps back and the line is likely wrong."""


@dataclass(frozen=True)
class GhostPath:
    """A ghost's positions up to its finish, with what was read about it.

    Attributes:
        positions: ``(N, 3)`` float64 world positions (x, y up, z), m, one per sample.
        sample_period_ms: ms of race time between two samples (the ghost's own, or the default).
        race_time_ms: the ghost's race time, ms (``None`` when the file does not state it).
        respawns: how many times the ghost respawned (0 when the file does not state it).
    """

    positions: np.ndarray
    sample_period_ms: int
    race_time_ms: int | None
    respawns: int


def resample_polyline(points: np.ndarray, spacing: float) -> np.ndarray:
    """Points every ``spacing`` metres of arc length along the polyline ``points`` ``(N, 3)``.

    The first point is kept; points closer than 1 mm to their predecessor are dropped first
    (a ghost standing still at the start repeats its position). Returns ``(M, 3)`` float64 with
    ``M = floor(length / spacing) + 1``.
    """
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 3 or len(pts) == 0:
        raise ValueError(f"points must be (N, 3) with N >= 1, got {pts.shape}")
    if not spacing > 0:
        raise ValueError(f"spacing must be > 0, got {spacing}")
    seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    keep = np.concatenate(([True], seg > 1e-3))
    pts = pts[keep]
    if len(pts) == 1:
        return pts.copy()
    cum = np.concatenate(([0.0], np.cumsum(np.linalg.norm(np.diff(pts, axis=0), axis=1))))
    targets = np.arange(int(np.floor(cum[-1] / spacing + 1e-9)) + 1) * spacing
    return np.stack([np.interp(targets, cum, pts[:, k]) for k in range(3)], axis=1)


def ghost_path(ghost: object) -> GhostPath:
    """The path of one parsed ghost (pygbx's ``CGameCtnGhost``: ``records``, ``sample_period``,
    ``race_time``, ``num_respawns``) up to its finish; warns (:class:`GhostRespawnWarning`) when it
    respawned.

    Raises:
        ValueError: the ghost has no samples or states a sample period that is not positive.
    """
    records = list(getattr(ghost, "records", []) or [])
    if not records:
        raise ValueError("the ghost holds no position samples")
    period = getattr(ghost, "sample_period", None)
    if period is None:
        period = DEFAULT_GHOST_SAMPLE_PERIOD_MS
    if int(period) <= 0:
        raise ValueError(f"the ghost states a sample period of {period} ms; a replay saved by the game has > 0")
    period = int(period)
    race_time = getattr(ghost, "race_time", None) or None
    n_keep = len(records) if race_time is None else min(len(records), int(race_time) // period + 1)
    respawns = int(getattr(ghost, "num_respawns", 0) or 0)
    if respawns > 0:
        warnings.warn(
            f"the ghost respawned {respawns} time(s): its path jumps back to a checkpoint, so the line "
            "likely holds a detour; use a replay of a race without respawns",
            GhostRespawnWarning,
            stacklevel=2,
        )
    positions = np.array([[r.position.x, r.position.y, r.position.z] for r in records[:n_keep]], dtype=np.float64)
    return GhostPath(positions, period, None if race_time is None else int(race_time), respawns)


def read_ghost(replay_path: str | Path) -> GhostPath:
    """The fastest ghost of ``replay_path`` (see :func:`ghost_path`).

    Raises:
        ImportError: ``pygbx`` is not installed (``pip install pygbx``).
        ValueError: the file holds no ghost.
    """
    try:
        from pygbx import Gbx, GbxType  # type: ignore[import-not-found]
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError(
            "reading .Replay.Gbx files needs the optional package pygbx: pip install pygbx"
        ) from exc
    gbx = Gbx(str(replay_path))
    ghosts = gbx.get_classes_by_ids([GbxType.CTN_GHOST, GbxType.CTN_GHOST_OLD])
    if not ghosts:
        raise ValueError(f"no ghost found in {replay_path}")
    ghost = min(ghosts, key=lambda g: g.cp_times[-1] if getattr(g, "cp_times", None) else float("inf"))
    return ghost_path(ghost)


def read_ghost_positions(replay_path: str | Path) -> np.ndarray:
    """Positions ``(N, 3)`` of the fastest ghost in ``replay_path`` up to its finish time."""
    return read_ghost(replay_path).positions


def replay_to_line(
    replay_path: str | Path, out_path: str | Path | None = None, *, distance_between_checkpoints: float = 0.5
) -> np.ndarray:
    """Reference line from a replay; saved to ``out_path`` (``.npy``) when given."""
    line = resample_polyline(read_ghost_positions(replay_path), distance_between_checkpoints)
    if out_path is not None:
        np.save(Path(out_path), line)
    return line
