"""Finding and loading presets: ``presets/NAME.py`` or any path to a preset file.

A preset is a plain Python module that ends by building a module-level ``graph_manager``.
Loading it runs that module, exactly as ``python preset.py`` would: presets are code the user
chose to run, never text from a configuration file.
"""
from __future__ import annotations

import difflib
import importlib
import pkgutil
import sys
from pathlib import Path
from types import ModuleType

import presets as presets_package
from rulka.config import ConfigError
from rulka.graph_manager import GraphManager
from rulka.user_modules import import_file


class PresetError(ConfigError):
    """A preset that cannot be found or does not build a graph manager."""


def available_presets() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(presets_package.__path__) if not m.name.startswith("_"))


def load_preset_module(name_or_path: str) -> ModuleType:
    if name_or_path.endswith(".py") or "/" in name_or_path or "\\" in name_or_path:
        path = Path(name_or_path).expanduser().resolve()
        if not path.is_file():
            raise PresetError(f"preset file not found: {path}")
        return import_file(f"rulka_user_preset_{path.stem}", path)
    names = available_presets()
    if name_or_path not in names:
        close = difflib.get_close_matches(name_or_path, names, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f"; available: {', '.join(names)}"
        raise PresetError(f"no preset named '{name_or_path}'{hint} (rulka -l lists them)")
    module_name = f"presets.{name_or_path}"
    if module_name in sys.modules:  # a fresh graph manager each time
        return importlib.reload(sys.modules[module_name])
    return importlib.import_module(module_name)


def load_graph_manager(name_or_path: str) -> GraphManager:
    module = load_preset_module(name_or_path)
    graph_manager = getattr(module, "graph_manager", None)
    if not isinstance(graph_manager, GraphManager):
        raise PresetError(f"preset '{name_or_path}' must define a module-level 'graph_manager' (a GraphManager)")
    return graph_manager
