"""Seeding and device choice."""
from __future__ import annotations

import random

import numpy as np
import torch


def set_global_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def resolve_device(name: str) -> torch.device:
    """``cpu``, ``cuda`` or ``auto`` (cuda when available)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch sees no CUDA device; use --device cpu or auto")
    if name not in ("cpu", "cuda"):
        raise ValueError(f"--device must be cpu, cuda or auto, got {name!r}")
    return torch.device(name)
