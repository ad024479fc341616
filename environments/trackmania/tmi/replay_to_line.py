"""Build a reference line ``.npy`` from a ``.Replay.Gbx`` ghost.

A reference line is an ``(N, 3)`` float64 array of world positions (x, y up, z) spaced
``distance_between_checkpoints`` (0.5 m) apart along the driven path. The ghost's samples (one
every 100 ms) are read with ``pygbx``, an optional dependency (``pip install pygbx``), then
resampled by arc length with :func:`resample_polyline`, which needs only numpy.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

#: Ghost records are sampled every 100 ms of race time.
GHOST_SAMPLE_PERIOD_MS = 100


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


def read_ghost_positions(replay_path: str | Path) -> np.ndarray:
    """Positions ``(N, 3)`` of the fastest ghost in ``replay_path`` up to its finish time.

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
    n_keep = round(ghost.race_time / GHOST_SAMPLE_PERIOD_MS) if getattr(ghost, "race_time", 0) else len(ghost.records)
    records = ghost.records[: max(1, n_keep)]
    return np.array([[r.position.x, r.position.y, r.position.z] for r in records], dtype=np.float64)


def replay_to_line(
    replay_path: str | Path, out_path: str | Path | None = None, *, distance_between_checkpoints: float = 0.5
) -> np.ndarray:
    """Reference line from a replay; saved to ``out_path`` (``.npy``) when given."""
    line = resample_polyline(read_ghost_positions(replay_path), distance_between_checkpoints)
    if out_path is not None:
        np.save(Path(out_path), line)
    return line
