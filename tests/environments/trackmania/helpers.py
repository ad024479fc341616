"""Shared helpers for the TrackMania tests: hand-made tracks and the shared-data location."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from environments.trackmania.track import SurfacePatch, Track

#: ``<repo>/../shared``, resolved from this file (tests/environments/trackmania/helpers.py).
SHARED_DIR = Path(__file__).resolve().parents[3] / ".." / "shared"
HOCKOLICIOUS = SHARED_DIR / "tracks" / "ESL-Hockolicious_0.5m_cl2.npy"


def require_hockolicious() -> Path:
    """The Hockolicious line, or skip the test when ../shared is absent."""
    if not HOCKOLICIOUS.exists():
        pytest.skip(f"the shared reference line {HOCKOLICIOUS} is absent (../shared not checked out)")
    return HOCKOLICIOUS


def straight_line(length_m: float, spacing: float = 0.5, y: float = 10.0) -> np.ndarray:
    """An (N, 3) reference line along +z from the origin."""
    z = np.arange(0.0, length_m + 1e-9, spacing)
    return np.stack([np.zeros_like(z), np.full_like(z, y), z], axis=1)


def straight_track(length_m: float = 1500.0, surface: int | None = None, road_width: float = 16.0,
                   name: str = "straight") -> Track:
    """A flat straight track, optionally covered entirely by one surface after the first 5 m."""
    patches = [] if surface is None else [SurfacePatch(5.0, length_m, -road_width / 2, road_width / 2, surface)]
    return Track(name=name, reference_line=straight_line(length_m), road_width=road_width,
                 surface_patches=patches)
