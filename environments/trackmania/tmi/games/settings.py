"""User settings for the real game, read from a ``.env`` file or passed in.

The ``.env`` format is the simple one: ``KEY=VALUE`` per line, ``#`` comments, blank lines,
optional ``export`` prefix, optional single or double quotes around the value. Nothing is
evaluated or expanded.

Keys (all prefixed ``TMI_``):

==========================  =========================================================================
key                         meaning
==========================  =========================================================================
TMI_ACCOUNT_NAME            TMNF online account name (console ``set autologin <name>``)
TMI_TMLOADER_PATH           TMLoader.exe (Windows)
TMI_TMLOADER_PROFILE        TMLoader profile that loads TMInterface 2 (Windows)
TMI_LINUX_LAUNCH_SCRIPT     script run as ``<script> <port>`` that starts the game under Wine (Linux)
TMI_BASE_PORT               port of instance 0; instance i listens on base + i (default 8478)
TMI_USER_DATA_PATH          the game's user folder (``Documents/TrackMania``): map paths are relative to
                            its ``Tracks/Challenges``, where rulka reads a map's checkpoints
                            (``sync_virtual_and_real_checkpoints``); personal-record ghosts are hidden
                            there before a map loads
TMI_START_TIMEOUT_S         seconds allowed for the plugin to accept after a launch, and for menus,
                            map load and countdown before a race (default 600)
TMI_GAME_PROCESS_NAME       name of the game's process, found after the launcher exits (default TmForever)
==========================  =========================================================================

``TMI_GAME_PATH`` (the game's install folder) was never used and is no longer read: the game loads
maps relative to ``Tracks/Challenges`` of the *user* folder, ``TMI_USER_DATA_PATH``. Setting it logs
a warning that says so.
"""
from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path

DEFAULT_BASE_PORT = 8478
#: Keys rulka no longer reads, with what to do instead (a warning names them).
_RETIRED_KEYS = {
    "TMI_GAME_PATH": "map paths are relative to <TMI_USER_DATA_PATH>/Tracks/Challenges (the game's user folder, "
                     "Documents/TrackMania); remove TMI_GAME_PATH and set TMI_USER_DATA_PATH",
}

log = logging.getLogger(__name__)

_KEYS = {
    "account_name": "TMI_ACCOUNT_NAME",
    "tmloader_path": "TMI_TMLOADER_PATH",
    "tmloader_profile": "TMI_TMLOADER_PROFILE",
    "linux_launch_script": "TMI_LINUX_LAUNCH_SCRIPT",
    "base_port": "TMI_BASE_PORT",
    "user_data_path": "TMI_USER_DATA_PATH",
    "start_timeout_s": "TMI_START_TIMEOUT_S",
    "game_process_name": "TMI_GAME_PROCESS_NAME",
}


class SettingsError(ValueError):
    """A setting is missing or invalid; the message names the ``.env`` key(s)."""


def parse_env_file(path: str | Path) -> dict[str, str]:
    """Parse a ``.env`` file into a dict (no evaluation, no variable expansion)."""
    out: dict[str, str] = {}
    for lineno, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        if "=" not in line:
            raise SettingsError(f"{path}:{lineno}: expected KEY=VALUE, got {raw!r}")
        key, value = line.split("=", 1)
        key, value = key.strip(), value.strip()
        if not key.replace("_", "").isalnum():
            raise SettingsError(f"{path}:{lineno}: invalid key {key!r}")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        out[key] = value
    return out


@dataclass
class TMISettings:
    """Where the game is and who plays it. Fields left ``None`` are not needed on every OS."""

    account_name: str | None = None
    tmloader_path: str | None = None
    tmloader_profile: str | None = None
    linux_launch_script: str | None = None
    base_port: int = DEFAULT_BASE_PORT
    user_data_path: str | None = None
    start_timeout_s: float | None = None  # None: the manager's default (600 s)
    game_process_name: str = "TmForever"

    def port(self, instance: int) -> int:
        """The TCP port of game instance ``instance`` (base + i)."""
        return self.base_port + int(instance)

    def require(self, *names: str) -> None:
        """Raise :class:`SettingsError` naming every missing setting among ``names``."""
        missing = [n for n in names if getattr(self, n) in (None, "")]
        if missing:
            keys = ", ".join(_KEYS[n] for n in missing)
            raise SettingsError(
                f"missing TMInterface setting(s): {keys}. Put them in a .env file (KEY=VALUE lines) "
                "or pass them to TMISettings(...)."
            )

    def require_for_launch(self, platform: str | None = None) -> None:
        """Check the settings that launching the game needs on ``platform`` (default: this OS)."""
        platform = platform or sys.platform
        if platform.startswith("win"):
            self.require("account_name", "tmloader_path", "tmloader_profile")
        else:
            self.require("account_name", "linux_launch_script")


def load_settings(env_file: str | Path | None = ".env", **overrides: object) -> TMISettings:
    """Settings from ``env_file`` (if it exists), then ``TMI_*`` environment variables, then
    ``overrides`` (keyword names of :class:`TMISettings`), each overriding the previous.
    """
    values: dict[str, object] = {}
    file_values = parse_env_file(env_file) if env_file is not None and Path(env_file).is_file() else {}
    for name, key in _KEYS.items():
        if key in file_values:
            values[name] = file_values[key]
        if key in os.environ:
            values[name] = os.environ[key]
    for key, instead in _RETIRED_KEYS.items():
        if key in file_values or key in os.environ:
            log.warning("%s is not read by rulka: %s", key, instead)
    valid = {f.name for f in fields(TMISettings)}
    for name, value in overrides.items():
        if name not in valid:
            raise SettingsError(f"unknown setting {name!r}; valid: {', '.join(sorted(valid))}")
        if value is not None:
            values[name] = value
    if "base_port" in values:
        try:
            port = int(values["base_port"])  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise SettingsError(f"TMI_BASE_PORT must be an integer, got {values['base_port']!r}") from exc
        if not 1 <= port <= 65535:
            raise SettingsError(f"TMI_BASE_PORT must be in 1..65535, got {port}")
        values["base_port"] = port
    if values.get("start_timeout_s") is not None:
        try:
            timeout = float(values["start_timeout_s"])  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise SettingsError(f"TMI_START_TIMEOUT_S must be a number of seconds, got {values['start_timeout_s']!r}") from exc
        if not timeout > 0:
            raise SettingsError(f"TMI_START_TIMEOUT_S must be > 0 seconds, got {timeout}")
        values["start_timeout_s"] = timeout
    return TMISettings(**values)  # type: ignore[arg-type]
