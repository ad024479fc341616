"""Real checkpoints of a real map, read from its ``.Challenge.Gbx`` (``sync_virtual_and_real_checkpoints``).

As Linesight's map loader does: the map's blocks are read with the optional package ``pygbx``
(``pip install 'rulka[tmi]'``); every block whose name contains ``Checkpoint`` or ``Line`` (the start
and finish lines) is a real checkpoint, placed at its block's centre: block coordinates times the
Stadium block size 32 x 8 x 32 m, plus 16 m in x and z. Two of Linesight's height corrections are
kept: raised blocks (``High`` in the name) +7 m, and ``StadiumRoadMainCheckpointLeft/Right`` +5 m.
The block size holds for campaign maps, not for every custom map.

The positions are unordered, start and finish included; :meth:`ZoneCenters.from_raw_line` pairs each
with every reference-line point within 12 m of it (one per lap). A map path is read as the game reads
it: relative to ``Tracks/Challenges`` in the game's user folder (``TMI_USER_DATA_PATH``, i.e.
``Documents/TrackMania``), backslashes allowed, surrounding quotes ignored; an absolute path is
read as is.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

#: Stadium block size (x, y, z), m.
BLOCK_SIZE_M = np.array([32.0, 8.0, 32.0])
#: From a block's corner to the centre of its floor, m.
BLOCK_CENTER_OFFSET_M = np.array([16.0, 0.0, 16.0])
#: A block is a real checkpoint if its name contains one of these (``Line``: start and finish lines).
CHECKPOINT_NAME_PARTS = ("Checkpoint", "Line")
#: Raised checkpoint blocks: the gate is this many metres above the block's floor (Linesight, E03).
HIGH_BLOCK_RAISE_M = 7.0
#: Blocks whose gate is raised by :data:`SIDE_CHECKPOINT_RAISE_M` (Linesight).
SIDE_CHECKPOINT_BLOCKS = ("StadiumRoadMainCheckpointRight", "StadiumRoadMainCheckpointLeft")
SIDE_CHECKPOINT_RAISE_M = 5.0

MISSING_PYGBX = (
    "environment.sync_virtual_and_real_checkpoints reads the map's real checkpoints from its .Challenge.Gbx "
    "with the optional package pygbx, which is not installed: pip install 'rulka[tmi]' (or pip install pygbx), "
    "or set environment.sync_virtual_and_real_checkpoints: false"
)


class MapCheckpointsError(ValueError):
    """A map's checkpoints cannot be read; the message names the file and the fix."""


def checkpoint_positions_from_challenge(challenge: Any) -> np.ndarray:
    """World positions ``(K, 3)`` (x, y up, z; m) of the checkpoint, start and finish blocks of a
    pygbx ``CGameChallenge`` (anything with ``blocks``, each with ``name`` and ``position.x/y/z``)."""
    positions = []
    for block in getattr(challenge, "blocks", None) or ():
        name = str(getattr(block, "name", "") or "")
        if not any(part in name for part in CHECKPOINT_NAME_PARTS):
            continue
        p = block.position
        xyz = np.array([float(p.x), float(p.y), float(p.z)]) * BLOCK_SIZE_M + BLOCK_CENTER_OFFSET_M
        if "High" in name:
            xyz[1] += HIGH_BLOCK_RAISE_M
        elif name in SIDE_CHECKPOINT_BLOCKS:
            xyz[1] += SIDE_CHECKPOINT_RAISE_M
        positions.append(xyz)
    return np.array(positions, dtype=np.float64).reshape(-1, 3)


def challenge_file(map_path: str, user_data_path: str | Path | None) -> Path:
    """The ``.Challenge.Gbx`` file that the game loads for ``map_path`` (see the module docstring).

    Raises:
        MapCheckpointsError: a relative path without ``TMI_USER_DATA_PATH``, or no such file.
    """
    cleaned = str(map_path).strip().strip("'\"").replace("\\", "/")
    path = Path(cleaned)
    if not path.is_absolute() and not (len(cleaned) > 1 and cleaned[1] == ":"):
        if not user_data_path:
            raise MapCheckpointsError(
                f"map {map_path!r} is relative to the game's Tracks/Challenges folder, which rulka finds through "
                "TMI_USER_DATA_PATH (the game's user folder, Documents/TrackMania): set it in .env, give an "
                "absolute map path, or set environment.sync_virtual_and_real_checkpoints: false"
            )
        path = Path(user_data_path) / "Tracks" / "Challenges" / cleaned
    if not path.is_file():
        raise MapCheckpointsError(
            f"map file not found: {path} (map_path {map_path!r}). Map paths are relative to "
            "<TMI_USER_DATA_PATH>/Tracks/Challenges (e.g. 'My Challenges/A01.Challenge.Gbx')"
        )
    return path


def read_map_checkpoint_positions(map_path: str, user_data_path: str | Path | None = None) -> np.ndarray:
    """The real checkpoint positions ``(K, 3)`` of ``map_path`` (start and finish lines included).

    Raises:
        ImportError: ``pygbx`` is not installed (the message says how to install it or turn the
            option off).
        MapCheckpointsError: the file cannot be found, or holds no map.
    """
    try:
        from pygbx import Gbx, GbxType  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ImportError(MISSING_PYGBX) from exc
    path = challenge_file(map_path, user_data_path)
    challenges = Gbx(str(path)).get_classes_by_ids([GbxType.CHALLENGE, GbxType.CHALLENGE_OLD])
    if not challenges:
        raise MapCheckpointsError(f"{path} holds no map (no CGameCtnChallenge): is it a .Challenge.Gbx?")
    return checkpoint_positions_from_challenge(challenges[0])


def is_map_file(map_path: str) -> bool:
    """Whether ``map_path`` names a ``.Gbx`` file (whose checkpoints can be read); other map paths,
    e.g. a stand-in game's track names, keep the track's own checkpoints."""
    return str(map_path).strip().strip("'\"").lower().endswith(".gbx")


def check_map_checkpoints(map_path: str, user_data_path: str | Path | None) -> str | None:
    """Before a run: the problem that keeps the checkpoints of ``map_path`` from being read, or None."""
    if not is_map_file(map_path):
        return None
    try:
        read_map_checkpoint_positions(map_path, user_data_path)
    except (ImportError, MapCheckpointsError) as error:
        return str(error)
    return None


__all__ = [
    "check_map_checkpoints",
    "is_map_file",
    "MISSING_PYGBX",
    "MapCheckpointsError",
    "challenge_file",
    "checkpoint_positions_from_challenge",
    "read_map_checkpoint_positions",
]
