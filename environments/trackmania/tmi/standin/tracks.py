"""Reference-line files of simulator tracks, so the ``tmi`` backend races them through a stand-in game.

A map-cycle entry of the real game names the map the game loads and its reference line ``.npy``.
For a stand-in the map is a simulator track name (``short``, ``procedural:3``, a line ``.npy``) and
:func:`write_track_files` writes that track's line and checkpoints (``<name>.npy`` and
``<name>.checkpoints.npy``, read by :func:`~environments.trackmania.track.track_from_map`), so the
environment measures progress, zones and checkpoints as on the simulator backend. The files for
``short`` and ``medium`` ship in ``lines/``.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from environments.trackmania.track import checkpoints_sidecar
from environments.trackmania.tracks import get_track

LINES_DIR = Path(__file__).resolve().parent / "lines"


def line_file_name(track_name: str) -> str:
    """A file name for ``track_name`` (``procedural:3`` -> ``procedural_3.npy``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", Path(track_name).stem if track_name.endswith(".npy") else track_name) + ".npy"


def write_track_files(track_name: str, folder: str | Path = LINES_DIR) -> tuple[Path, Path]:
    """Write ``track_name``'s reference line and checkpoint arc lengths into ``folder``; returns both paths."""
    track = get_track(track_name)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    line_path = folder / line_file_name(track_name)
    np.save(line_path, np.asarray(track.reference_line, dtype=np.float64), allow_pickle=False)
    cps_path = checkpoints_sidecar(line_path)
    np.save(cps_path, np.asarray(track.checkpoint_s, dtype=np.float64), allow_pickle=False)
    return line_path, cps_path
