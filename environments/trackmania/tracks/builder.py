"""Assemble a :class:`Track` from segments with decorations (surfaces, turbo pads, checkpoints)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from environments.trackmania.backend import SURFACE_DIRT, SURFACE_GRASS, SURFACE_OTHER, SURFACE_TURBO
from environments.trackmania.track import SurfacePatch, Track
from environments.trackmania.tracks.geometry import (
    Segment,
    build_polyline,
    horizontal_to_3d_arc,
    resample,
)

SURFACE_BY_NAME: dict[str, int] = {"grass": SURFACE_GRASS, "dirt": SURFACE_DIRT, "other": SURFACE_OTHER}


@dataclass(frozen=True)
class Piece:
    """A segment plus what lies on it; offsets are metres from the segment's start (horizontal).

    Attributes:
        segment: the road geometry.
        surface: optional (name, start, end, lat_min, lat_max) with name in grass / dirt / other.
        turbo: optional (start, length) of a full-width turbo pad.
        checkpoint: put a real checkpoint at the segment's start.
    """

    segment: Segment
    surface: tuple[str, float, float, float, float] | None = None
    turbo: tuple[float, float] | None = None
    checkpoint: bool = False


@dataclass
class TrackSpec:
    """A named list of pieces."""

    name: str
    pieces: Sequence[Piece]
    road_width: float = 16.0
    runoff_width: float = 6.0
    start_height: float = 10.0
    heading_rad: float = 0.0
    is_loop: bool = False
    extra_patches: list[SurfacePatch] = field(default_factory=list)


def build_track(spec: TrackSpec) -> Track:
    """Sample the pieces into a 0.5 m reference line and place the decorations in track coordinates."""
    dense, seg_start_h = build_polyline(
        [p.segment for p in spec.pieces], start=(0.0, spec.start_height, 0.0), heading_rad=spec.heading_rad
    )
    sh, s3 = horizontal_to_3d_arc(dense)

    def to3d(s_h: float) -> float:
        return float(np.interp(s_h, sh, s3))

    line = resample(dense)
    hw = 0.5 * spec.road_width
    patches: list[SurfacePatch] = list(spec.extra_patches)
    pads: list[SurfacePatch] = []
    cps: list[float] = []
    for piece, s0 in zip(spec.pieces, seg_start_h):
        if piece.surface is not None:
            name, a, b, lo, hi = piece.surface
            patches.append(SurfacePatch(to3d(s0 + a), to3d(s0 + b), max(lo, -hw), min(hi, hw), SURFACE_BY_NAME[name]))
        if piece.turbo is not None:
            a, length = piece.turbo
            pads.append(SurfacePatch(to3d(s0 + a), to3d(s0 + a + length), -hw, hw, SURFACE_TURBO))
        if piece.checkpoint and s0 > 0:
            cps.append(to3d(s0))
    return Track(
        name=spec.name,
        reference_line=line,
        road_width=spec.road_width,
        runoff_width=spec.runoff_width,
        surface_patches=patches,
        turbo_pads=pads,
        checkpoint_s=cps,
        is_loop=spec.is_loop,
    )
