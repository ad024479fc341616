"""``rulka tmi install``: copy the rulka_link plugin into TMInterface's Plugins folder."""
from __future__ import annotations

import shutil
from pathlib import Path

#: The plugin source shipped with rulka.
PLUGIN_SOURCE = Path(__file__).parents[1] / "plugin" / "rulka_link.as"


def default_plugins_dir() -> Path:
    """``~/Documents/TMInterface/Plugins`` (TMInterface 2's plugin folder; under Wine, the prefix's
    ``drive_c/users/<user>/Documents/TMInterface/Plugins`` must be passed explicitly)."""
    return Path.home() / "Documents" / "TMInterface" / "Plugins"


def install_plugin(plugins_dir: str | Path | None = None) -> Path:
    """Copy ``rulka_link.as`` into ``plugins_dir`` (created if missing); returns the new file.

    TMInterface loads every ``.as`` file of that folder at startup (or on ``reload_plugins``).
    """
    target_dir = Path(plugins_dir) if plugins_dir is not None else default_plugins_dir()
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / PLUGIN_SOURCE.name
    shutil.copyfile(PLUGIN_SOURCE, target)
    return target
