"""Per-surface tyre and rolling properties of the simulator."""
from __future__ import annotations

from dataclasses import dataclass

from environments.trackmania.backend import SURFACE_ASPHALT, SURFACE_DIRT, SURFACE_GRASS, SURFACE_OTHER, SURFACE_TURBO


@dataclass(frozen=True)
class SurfaceProperties:
    """How a surface treats a wheel.

    Attributes:
        grip: friction coefficient (lateral and longitudinal acceleration limit / g), dimensionless.
        rolling_drag: extra deceleration while rolling on it, m/s^2 (per car, averaged over wheels).
        boost: triggers the turbo when touched.
    """

    grip: float
    rolling_drag: float
    boost: bool = False


#: Indexed by the SURFACE_* constants.
SURFACES: tuple[SurfaceProperties, ...] = tuple(
    p for _, p in sorted({
        SURFACE_ASPHALT: SurfaceProperties(grip=1.9, rolling_drag=0.0),
        SURFACE_GRASS: SurfaceProperties(grip=0.75, rolling_drag=2.5),
        SURFACE_DIRT: SurfaceProperties(grip=1.05, rolling_drag=0.8),
        SURFACE_TURBO: SurfaceProperties(grip=1.9, rolling_drag=0.0, boost=True),
        SURFACE_OTHER: SurfaceProperties(grip=0.45, rolling_drag=0.2),
    }.items())
)
SURFACE_GRIP: tuple[float, ...] = tuple(p.grip for p in SURFACES)
SURFACE_DRAG: tuple[float, ...] = tuple(p.rolling_drag for p in SURFACES)
SURFACE_BOOST: tuple[bool, ...] = tuple(p.boost for p in SURFACES)
