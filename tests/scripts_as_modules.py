"""Loading a bench/ or scripts/ file as a module for a test: they are scripts, run by path (their folder
on sys.path), not packages, so a test imports one from its file."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(path: Path) -> ModuleType:
    """The module of the script at ``path`` (e.g. ``ROOT / "bench" / "race_curves.py"``), named after its
    file and registered in ``sys.modules`` under that name (dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
