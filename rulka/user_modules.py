"""Preset files loaded by path, so that collector processes and Ray actors can load them too.

A preset loaded from a file (``rulka -p my_preset.py``) is imported under a made-up module name
(``rulka_user_preset_<stem>``); an agent or environment class defined in it is pickled by that name
when a collector is started, and a fresh process cannot import it. Collectors therefore receive a
:class:`UserModules` before anything else: unpickling it imports the same files under the same names.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

_FILES: dict[str, str] = {}  # module name -> absolute path, in the order they were loaded


def import_file(module_name: str, path: Path) -> ModuleType:
    """Import the Python file ``path`` as ``module_name`` and remember it for collectors."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    _FILES[module_name] = str(path)
    return module


class UserModules:
    """The preset files this process imported by path; unpickling it imports them (once) there."""

    def __init__(self, files: dict[str, str] | None = None) -> None:
        self.files = dict(_FILES if files is None else files)

    def __reduce__(self) -> tuple:
        return _restore, (self.files,)


def _restore(files: dict[str, str]) -> UserModules:
    for name, path in files.items():
        if name not in sys.modules:
            import_file(name, Path(path))
    return UserModules(files)
