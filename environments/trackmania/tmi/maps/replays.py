"""Hide the personal-record ghost of a map before loading it, as Linesight does.

TMNF shows the player's best run on a map as a ghost car, read from the autosaved replay
``<user data>/Tracks/Replays/Autosaves/<account>_<map name>.Replay.Gbx``. The ghost would appear in
the agent's frames, so the replay is renamed to ``... .Replay.Gbx.bak`` before the map loads (the
game then finds no personal record). Renaming it back restores it.

``<user data>`` is the game's folder in the user's documents (``Documents/TrackMania``; setting
``TMI_USER_DATA_PATH``). The map name is taken from the file name (``A01-Race.Challenge.Gbx`` ->
``A01-Race``); a map whose internal name differs from its file name keeps its ghost.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path, PureWindowsPath

log = logging.getLogger(__name__)


def map_name_from_path(map_path: str) -> str:
    """``"Campaign\\A01-Race.Challenge.Gbx"`` -> ``"A01-Race"`` (Windows or POSIX separators)."""
    name = PureWindowsPath(str(map_path).strip("'\"")).name
    return re.sub(r"(\.Challenge)?\.Gbx$", "", name, flags=re.IGNORECASE)


def hide_personal_record_replays(user_data_path: str | Path, map_path: str) -> list[Path]:
    """Rename every autosaved personal record of ``map_path``'s map to ``*.bak``; returns the new paths."""
    folder = Path(user_data_path) / "Tracks" / "Replays" / "Autosaves"
    if not folder.is_dir():
        return []
    suffix = f"_{map_name_from_path(map_path)}.replay.gbx".lower()
    hidden = []
    for path in folder.iterdir():
        if path.is_file() and path.name.lower().endswith(suffix):
            target = path.with_name(path.name + ".bak")
            path.replace(target)
            hidden.append(target)
            log.info("hid the personal-record ghost %s", path.name)
    return hidden


__all__ = ["hide_personal_record_replays", "map_name_from_path"]
