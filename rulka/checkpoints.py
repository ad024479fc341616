"""Checkpoints written atomically (temporary file, fsync, rename) and read with weights_only=True."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

LAST = "last.pt"
BEST = "best.pt"


def save_atomic(state: dict[str, Any], path: str | Path) -> None:
    """Write ``state`` so that ``path`` holds either the old or the new checkpoint, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    return torch.load(path, map_location=map_location, weights_only=True)
