"""Seeded procedural tracks: point-to-point chains of straights and arcs, and closed loops."""
from __future__ import annotations

import math

import numpy as np

from environments.trackmania.backend import SURFACE_DIRT, SURFACE_GRASS, SURFACE_OTHER, SURFACE_TURBO
from environments.trackmania.track import SurfacePatch, Track
from environments.trackmania.tracks.builder import Piece, TrackSpec, build_track
from environments.trackmania.tracks.geometry import arc, build_polyline, min_clearance, resample, straight

ROAD_WIDTH_M = 16.0
RUNOFF_M = 6.0
#: Clearance required between two parts of a generated track, m (road + both run-offs + walls + margin).
_CLEARANCE_M = ROAD_WIDTH_M + 2 * RUNOFF_M + 8.0


def _decorate(track: Track, rng: np.random.Generator, checkpoint_every_m: float = 250.0) -> Track:
    """Add surface patches, turbo pads and checkpoints at random places along ``track``."""
    L = track.length_m
    hw = 0.5 * track.road_width
    patches: list[SurfacePatch] = []
    pads: list[SurfacePatch] = []
    s = 60.0
    while s < L - 80.0:
        kind = rng.choice(["none", "surface", "turbo"], p=[0.4, 0.35, 0.25])
        if kind == "surface":
            surf = int(rng.choice([SURFACE_DIRT, SURFACE_GRASS, SURFACE_OTHER], p=[0.5, 0.3, 0.2]))
            length = float(rng.uniform(15.0, 50.0))
            if rng.random() < 0.5:  # whole width
                lo, hi = -hw, hw
            else:  # one side
                lo, hi = (0.0, hw) if rng.random() < 0.5 else (-hw, 0.0)
            patches.append(SurfacePatch(s, s + length, lo, hi, surf))
            s += length
        elif kind == "turbo":
            pads.append(SurfacePatch(s, s + 6.0, -hw, hw, SURFACE_TURBO))
            s += 6.0
        s += float(rng.uniform(40.0, 140.0))
    track.surface_patches = patches
    track.turbo_pads = pads
    n_cp = int(L // checkpoint_every_m)
    track.checkpoint_s = [L * (k + 1) / (n_cp + 1) for k in range(n_cp)]
    track.__dict__.pop("surface_index", None)
    track.__dict__.pop("checkpoint_positions", None)
    return track


def generate_point_to_point(seed: int, target_length_m: float = 1200.0, name: str | None = None) -> Track:
    """A random chain of straights (20-150 m) and arcs (radius 15-120 m, 25-150 degrees) that never
    overlaps itself, with gentle hills, surfaces, turbo pads and checkpoints."""
    rng = np.random.default_rng(seed)
    pieces: list[Piece] = [Piece(straight(60.0))]
    total = 60.0
    attempts = 0
    while total < target_length_m and attempts < 400:
        attempts += 1
        if pieces and pieces[-1].segment.radius > 0 or rng.random() < 0.4:
            seg = straight(float(rng.uniform(20.0, 150.0)), dy=float(rng.choice([0.0, rng.uniform(-6, 6)])))
        else:
            radius = float(np.exp(rng.uniform(math.log(15.0), math.log(120.0))))
            angle = float(rng.uniform(25.0, 150.0)) * (1 if rng.random() < 0.5 else -1)
            seg = arc(radius, angle)
        candidate = pieces + [Piece(seg)]
        dense, _ = build_polyline([p.segment for p in candidate])
        if min_clearance(resample(dense, 1.0), min_arc_separation=2 * _CLEARANCE_M, stride=2) < _CLEARANCE_M:
            continue
        pieces = candidate
        total += seg.horizontal_length
    pieces.append(Piece(straight(40.0)))
    track = build_track(TrackSpec(name=name or f"procedural:{seed}", pieces=pieces, road_width=ROAD_WIDTH_M,
                                  runoff_width=RUNOFF_M))
    return _decorate(track, rng)


def generate_loop(seed: int, target_length_m: float = 1500.0, name: str | None = None) -> Track:
    """A closed circuit: a star-shaped curve r(theta) = R0 (1 + sum a_k cos(k theta + phi_k)) with
    turns of varied radius (minimum radius of curvature >= 18 m), hills, surfaces and turbo pads."""
    rng = np.random.default_rng(seed)
    r0 = target_length_m / (2 * math.pi)
    theta = np.linspace(0.0, 2 * math.pi, 20000)
    for _ in range(200):
        ks = np.arange(2, 6)
        amp = rng.uniform(0.0, 0.18, size=len(ks)) / ks ** 0.5
        phase = rng.uniform(0, 2 * math.pi, size=len(ks))
        r = r0 * (1 + (amp[:, None] * np.cos(ks[:, None] * theta[None, :] + phase[:, None])).sum(0))
        x, z = r * np.cos(theta), r * np.sin(theta)
        dx, dz = np.gradient(x, theta), np.gradient(z, theta)
        ddx, ddz = np.gradient(dx, theta), np.gradient(dz, theta)
        curvature = np.abs(dx * ddz - dz * ddx) / np.maximum((dx * dx + dz * dz) ** 1.5, 1e-9)
        if curvature.max() < 1.0 / 18.0 and r.min() > 0.4 * r0:
            break
    hills = rng.uniform(2.0, 8.0) * np.sin(2 * theta + rng.uniform(0, 2 * math.pi))
    y = 10.0 + hills - hills[0]
    dense = np.stack([x - x[0], y, z - z[0]], axis=1)
    line = resample(dense)
    if min_clearance(line, min_arc_separation=2 * _CLEARANCE_M, closed=True) < _CLEARANCE_M:
        raise RuntimeError(f"loop seed {seed} overlaps itself; pick another seed")
    track = Track(name=name or f"loop:{seed}", reference_line=line, road_width=ROAD_WIDTH_M,
                  runoff_width=RUNOFF_M, is_loop=True)
    return _decorate(track, rng)
