"""Top-down rasterisation of a track into grayscale textures (built once per track, then only gathered).

Every raw-line point paints a small grid of samples across the road, run-off and wall; each sample's
shade comes from its track coordinates (s along, lateral) and the surface there. Markings give motion
cues: dashed centre line, striped kerbs, mowing stripes on the run-off, banded walls, checkered
checkpoints / start / finish, chevrons on turbo pads, per-texel noise.
Overpasses (a line crossing itself in x/z) show whichever part was painted last.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from environments.trackmania.backend import SURFACE_ASPHALT, SURFACE_DIRT, SURFACE_GRASS, SURFACE_OTHER, SURFACE_TURBO
from environments.trackmania.track import Track

#: Base shade and noise amplitude per surface (grayscale 0..255).
SURFACE_SHADE: dict[int, tuple[float, float]] = {
    SURFACE_ASPHALT: (100.0, 6.0),
    SURFACE_GRASS: (75.0, 10.0),
    SURFACE_DIRT: (140.0, 12.0),
    SURFACE_TURBO: (200.0, 4.0),
    SURFACE_OTHER: (190.0, 3.0),
}
BACKGROUND_SHADES = (38.0, 50.0)  # alternating 8 m squares
BACKGROUND_SQUARE_M = 8.0
RUNOFF_SHADES = (62.0, 78.0)  # mowing stripes
RUNOFF_STRIPE_M = 5.0
WALL_SHADES = (200.0, 150.0)
WALL_BAND_M = 4.0
WALL_THICKNESS_M = 1.5
KERB_WIDTH_M = 0.8
KERB_SHADES = (230.0, 30.0)
KERB_STRIPE_M = 2.0
CENTRE_LINE_HALF_WIDTH_M = 0.15
CENTRE_DASH_M = (3.0, 6.0)  # painted length, period
CENTRE_LINE_SHADE = 215.0
CHECKER_SHADES = (250.0, 15.0)
CHECKER_DEPTH_M = 1.5
CHECKER_CELL_M = (0.5, 1.0)  # along, across
TURBO_SHADES = (250.0, 165.0)
TURBO_CHEVRON_M = 2.0


@dataclass
class TrackTexture:
    """A grayscale top-down image of the track: ``shade[iz, ix]`` covers world
    x in [x0 + ix * res, x0 + (ix + 1) * res), z likewise; ``res`` metres per texel."""

    shade: np.ndarray  # (Hz, Wx) uint8
    x0: float
    z0: float
    res: float

    @property
    def flat(self) -> np.ndarray:
        """The texture as a flat (Hz * Wx,) view, for one-call gathers."""
        return self.shade.reshape(-1)

    def downsample(self, factor: int) -> "TrackTexture":
        """A box-filtered texture ``factor`` times coarser (the far-field mip level)."""
        h, w = (self.shade.shape[0] // factor) * factor, (self.shade.shape[1] // factor) * factor
        blocks = self.shade[:h, :w].reshape(h // factor, factor, w // factor, factor).astype(np.float32)
        return TrackTexture(np.ascontiguousarray(blocks.mean(axis=(1, 3)).astype(np.uint8)), self.x0, self.z0,
                            self.res * factor)


def _checker(a: np.ndarray, b: np.ndarray, ca: float, cb: float) -> np.ndarray:
    return ((np.floor(a / ca) + np.floor(b / cb)) % 2).astype(bool)


def rasterize(track: Track, res: float = 0.25, margin_m: float = 60.0) -> TrackTexture:
    """Paint ``track`` at ``res`` metres per texel with ``margin_m`` of background around it."""
    line = track.reference_line
    s_pts = track.arc_length
    t = track.tangent_xz
    nrm = track.left_xz
    hw = 0.5 * track.road_width
    wall_in = hw + track.runoff_width
    outer = wall_in + WALL_THICKNESS_M
    x0 = float(line[:, 0].min() - outer - margin_m)
    z0 = float(line[:, 2].min() - outer - margin_m)
    wx = int(math.ceil((line[:, 0].max() + outer + margin_m - x0) / res))
    hz = int(math.ceil((line[:, 2].max() + outer + margin_m - z0) / res))
    rng = np.random.default_rng(12345)
    noise = rng.standard_normal((hz, wx)).astype(np.float32)
    # background: big checker squares
    gx = (np.arange(wx) * res + x0) // BACKGROUND_SQUARE_M
    gz = (np.arange(hz) * res + z0) // BACKGROUND_SQUARE_M
    bg = ((gz[:, None] + gx[None, :]) % 2).astype(bool)
    shade = np.where(bg, BACKGROUND_SHADES[0], BACKGROUND_SHADES[1]).astype(np.float32) + 3.0 * noise

    owners, patches = track.surface_index
    owner = np.asarray(owners)
    p_lo = np.array([p.lat_min for p in patches] + [0.0])
    p_hi = np.array([p.lat_max for p in patches] + [0.0])
    p_surf = np.array([p.surface for p in patches] + [SURFACE_ASPHALT])
    surf_base = np.array([SURFACE_SHADE[k][0] for k in range(len(SURFACE_SHADE))], dtype=np.float32)
    surf_amp = np.array([SURFACE_SHADE[k][1] for k in range(len(SURFACE_SHADE))], dtype=np.float32)
    marks = [0.0, float(s_pts[-1])] + [float(c) for c in track.checkpoint_s]
    marks_arr = np.asarray(marks)

    spacing = float(s_pts[-1] / max(len(line) - 1, 1))
    step = 0.6 * res
    n_along = max(1, int(math.ceil(spacing / step)))
    along = (np.arange(n_along) * (spacing / n_along)).astype(np.float64)

    def paint(lat_values: np.ndarray, road: bool) -> None:
        chunk = max(1, 2_000_000 // (n_along * len(lat_values)))
        for i0 in range(0, len(line), chunk):
            i1 = min(i0 + chunk, len(line))
            idx = np.arange(i0, i1)
            a = along[None, :, None]
            b = lat_values[None, None, :]
            px = line[idx, 0][:, None, None] + a * t[idx, 0][:, None, None] + b * nrm[idx, 0][:, None, None]
            pz = line[idx, 2][:, None, None] + a * t[idx, 1][:, None, None] + b * nrm[idx, 1][:, None, None]
            s = s_pts[idx][:, None, None] + a + 0.0 * b
            bb = b + 0.0 * s
            ix = ((px - x0) / res).astype(np.int64).ravel()
            iz = ((pz - z0) / res).astype(np.int64).ravel()
            s = s.ravel()
            bb = bb.ravel()
            nz = noise[iz, ix]
            absb = np.abs(bb)
            if not road:
                runoff = absb <= wall_in
                stripe = (np.floor(s / RUNOFF_STRIPE_M) % 2).astype(bool)
                val = np.where(stripe, RUNOFF_SHADES[0], RUNOFF_SHADES[1]) + 5.0 * nz
                band = (np.floor(s / WALL_BAND_M) % 2).astype(bool)
                val = np.where(runoff, val, np.where(band, WALL_SHADES[0], WALL_SHADES[1]))
            else:
                own = np.repeat(owner[idx], n_along * len(lat_values))
                k = np.where(own >= 0, own, len(patches))
                inside = (own >= 0) & (bb >= p_lo[k]) & (bb <= p_hi[k])
                surf = np.where(inside, p_surf[k], SURFACE_ASPHALT)
                val = surf_base[surf] + surf_amp[surf] * nz
                turbo = surf == SURFACE_TURBO
                chevron = (np.floor((s - 0.5 * absb) / (0.5 * TURBO_CHEVRON_M)) % 2).astype(bool)
                val = np.where(turbo, np.where(chevron, TURBO_SHADES[0], TURBO_SHADES[1]), val)
                dash = (absb < CENTRE_LINE_HALF_WIDTH_M) & ((s % CENTRE_DASH_M[1]) < CENTRE_DASH_M[0])
                val = np.where(dash & (surf == SURFACE_ASPHALT), CENTRE_LINE_SHADE, val)
                kerb = absb > hw - KERB_WIDTH_M
                kerb_light = (np.floor(s / KERB_STRIPE_M) % 2).astype(bool)
                val = np.where(kerb, np.where(kerb_light, KERB_SHADES[0], KERB_SHADES[1]), val)
                near = np.abs(s[:, None] - marks_arr[None, :]).min(axis=1) < 0.5 * CHECKER_DEPTH_M
                checker = _checker(s, bb, *CHECKER_CELL_M)
                val = np.where(near, np.where(checker, CHECKER_SHADES[0], CHECKER_SHADES[1]), val)
            shade[iz, ix] = val

    lat_off = np.arange(-outer, outer + step, step)
    paint(lat_off[np.abs(lat_off) > hw], road=False)
    paint(lat_off[np.abs(lat_off) <= hw], road=True)
    return TrackTexture(np.clip(shade, 0, 255).astype(np.uint8), x0, z0, res)


_CACHE: "weakref.WeakKeyDictionary[Track, dict[tuple[float, float], TrackTexture]]" = weakref.WeakKeyDictionary()


def track_texture(track: Track, res: float, margin_m: float) -> TrackTexture:
    """Cached :func:`rasterize`."""
    per_track = _CACHE.setdefault(track, {})
    key = (res, margin_m)
    if key not in per_track:
        per_track[key] = rasterize(track, res, margin_m)
    return per_track[key]
