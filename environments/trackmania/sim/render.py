"""Grayscale H x W camera view of a rasterised track, in pure vectorised numpy.

Every pixel's ray is intersected once, at construction, with the ground plane of the car
(flat ground at the car's height; hills ahead are not drawn as slopes). The hit point is stored in
the car frame as a complex number ``P = (-right + i * forward) / texel_size``. A frame is then:
``texel = c + exp(-i psi) * P`` (one complex multiply-add for all pixels), two casts to int, one flat
index and one ``np.take`` from the texture, per mip band of rows (near rows read the 0.25 m
texture, far rows 4x / 16x box-filtered copies to avoid shimmering). Sky rows and the car's own
silhouette (cameras 1 and 3) are fixed pixels painted once.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from environments.trackmania.sim.texture import BACKGROUND_SHADES, BACKGROUND_SQUARE_M, TrackTexture, track_texture
from environments.trackmania.track import Track

#: Texel size of the finest texture, m.
FINE_RES_M = 0.25
#: Box-filter factors of the mip levels.
MIP_FACTORS: tuple[int, ...] = (1, 4, 16)
#: A row uses the next mip level when one pixel covers more than this many texels of the current one.
MIP_SWITCH_TEXELS = 2.0
#: Rays are cut at this ground distance, m.
MAX_VIEW_DISTANCE_M = 250.0
SKY_TOP, SKY_HORIZON = 205.0, 165.0
CAR_BODY_SHADE, CAR_GLASS_SHADE = 28, 70
#: The car's body box in the car frame: half width, rear, front, height (m).
CAR_BOX = (1.0, -2.2, 2.2, 1.2)


@dataclass(frozen=True)
class CameraSpec:
    """A camera rigidly attached to the car.

    Attributes:
        height: above the ground, m.
        back: behind the car's centre (negative = ahead), m.
        pitch_deg: looking down by this angle, degrees.
        fov_deg: horizontal field of view, degrees.
        draw_car: paint the car's silhouette.
    """

    height: float
    back: float
    pitch_deg: float
    fov_deg: float
    draw_car: bool


#: game_camera_number -> camera: 1 behind the car, 2 first person, 3 top view.
CAMERAS: dict[int, CameraSpec] = {
    1: CameraSpec(height=2.4, back=5.5, pitch_deg=12.0, fov_deg=80.0, draw_car=True),
    2: CameraSpec(height=1.5, back=-0.3, pitch_deg=3.0, fov_deg=90.0, draw_car=False),
    3: CameraSpec(height=40.0, back=-10.0, pitch_deg=90.0, fov_deg=70.0, draw_car=True),
}


def _mip_textures(track: Track, far_margin: float) -> list[TrackTexture]:
    """The fine texture and its box-filtered copies, the coarse ones padded to ``far_margin``."""
    fine = track_texture(track, FINE_RES_M, margin_m=40.0)
    out = [fine]
    for factor in MIP_FACTORS[1:]:
        small = fine.downsample(factor)
        res = small.res
        pad = int(math.ceil(far_margin / res))
        h, w = small.shade.shape
        x0, z0 = small.x0 - pad * res, small.z0 - pad * res
        gx = (np.arange(w + 2 * pad) * res + x0 + 0.5 * res) // BACKGROUND_SQUARE_M
        gz = (np.arange(h + 2 * pad) * res + z0 + 0.5 * res) // BACKGROUND_SQUARE_M
        bg_dark = ((gz[:, None] + gx[None, :]) % 2).astype(bool)
        mean_bg = 0.5 * (BACKGROUND_SHADES[0] + BACKGROUND_SHADES[1])
        canvas = np.where(bg_dark, BACKGROUND_SHADES[0], BACKGROUND_SHADES[1]) if res < BACKGROUND_SQUARE_M \
            else np.full(bg_dark.shape, mean_bg)
        canvas = canvas.astype(np.uint8)
        canvas[pad:pad + h, pad:pad + w] = small.shade
        out.append(TrackTexture(canvas, x0, z0, res))
    return out


_MIP_CACHE: "weakref.WeakKeyDictionary[Track, list[TrackTexture]]" = weakref.WeakKeyDictionary()


@dataclass
class _Band:
    rows: slice
    texture: TrackTexture
    flat_texture: np.ndarray
    p: np.ndarray  # (n,) complex64, ground offsets in texels of this band's texture
    w: np.ndarray  # (n,) complex64 scratch
    ix: np.ndarray  # (n,) int64 scratch
    iz: np.ndarray  # (n,) int64 scratch
    out: np.ndarray  # (n,) uint8 view into the frame


class Renderer:
    """Renders ``(H, W)`` uint8 frames of one track from one camera; reuses one frame buffer."""

    def __init__(self, track: Track, height: int = 120, width: int = 160, camera: int = 2) -> None:
        if camera not in CAMERAS:
            raise ValueError(f"game_camera_number must be one of {sorted(CAMERAS)}, got {camera}")
        self.track = track
        self.height, self.width = height, width
        self.spec = spec = CAMERAS[camera]
        if track not in _MIP_CACHE:
            _MIP_CACHE[track] = _mip_textures(track, far_margin=MAX_VIEW_DISTANCE_M + 20.0)
        mips = _MIP_CACHE[track]
        self.frame = np.empty((height, width), dtype=np.uint8)
        flat = self.frame.reshape(-1)

        # --- per-pixel rays in the car frame (forward, up, right)
        tan_half = math.tan(math.radians(spec.fov_deg) / 2)
        x_ndc = ((np.arange(width) + 0.5) - width / 2) / (width / 2) * tan_half
        y_ndc = (height / 2 - (np.arange(height) + 0.5)) / (width / 2) * tan_half
        phi = math.radians(spec.pitch_deg)
        ray_f = math.cos(phi) + y_ndc[:, None] * math.sin(phi) + 0.0 * x_ndc[None, :]
        ray_u = -math.sin(phi) + y_ndc[:, None] * math.cos(phi) + 0.0 * x_ndc[None, :]
        ray_r = x_ndc[None, :] + 0.0 * y_ndc[:, None]
        ground = ray_u < -1e-6
        t = np.where(ground, spec.height / np.where(ground, -ray_u, 1.0), np.inf)
        horiz = np.hypot(ray_f, ray_r)
        t = np.minimum(t, MAX_VIEW_DISTANCE_M / np.maximum(horiz, 1e-9))
        fwd = -spec.back + t * ray_f
        right = t * ray_r
        ground_rows = np.flatnonzero(ground.all(axis=1))
        first = int(ground_rows[0]) if len(ground_rows) else height
        # sky
        for v in range(first):
            k = v / max(first - 1, 1)
            self.frame[v, :] = int(SKY_TOP + (SKY_HORIZON - SKY_TOP) * k)

        # --- mip level per row from the pixel footprint (metres between neighbouring pixels)
        foot = np.zeros(height)
        if first < height:
            dfw = np.abs(np.diff(fwd[first:], axis=0, prepend=fwd[first:first + 1]))
            drt = np.abs(np.diff(right[first:], axis=1, prepend=right[first:, :1]))
            f = np.maximum(dfw, drt).max(axis=1)
            if len(f) > 1:
                f[0] = f[1]
            foot[first:] = f
        level = np.zeros(height, dtype=np.int64)
        for lv in range(1, len(mips)):
            level[foot > MIP_SWITCH_TEXELS * mips[lv - 1].res] = lv
        # rows are monotone in distance, so each level is a contiguous row range; make it so regardless
        level[first:] = np.maximum.accumulate(level[first:][::-1])[::-1]

        self.bands: list[_Band] = []
        v = first
        while v < height:
            lv = int(level[v])
            v_end = v
            while v_end < height and level[v_end] == lv:
                v_end += 1
            tex = mips[lv]
            p = ((-right[v:v_end] + 1j * fwd[v:v_end]) / tex.res).astype(np.complex64).ravel()
            n = p.size
            self.bands.append(_Band(
                rows=slice(v, v_end), texture=tex, flat_texture=tex.flat, p=p,
                w=np.empty(n, np.complex64), ix=np.empty(n, np.int64), iz=np.empty(n, np.int64),
                out=flat[v * width: v_end * width],
            ))
            v = v_end

        # --- the car's silhouette: pixels whose ray crosses the car's box (slab test)
        self.car_pixels = np.zeros(0, dtype=np.int64)
        self.car_shades = np.zeros(0, dtype=np.uint8)
        if spec.draw_car:
            hw, rear, front, top = CAR_BOX
            origin = np.array([-spec.back, spec.height, 0.0])  # forward, up, right
            dirs = np.stack([ray_f, ray_u, ray_r], axis=-1)
            lo = np.array([rear, 0.0, -hw])
            hi = np.array([front, top, hw])
            with np.errstate(divide="ignore", invalid="ignore"):
                t1 = (lo - origin) / dirs
                t2 = (hi - origin) / dirs
            tmin = np.nanmax(np.minimum(t1, t2), axis=-1)
            tmax = np.nanmin(np.maximum(t1, t2), axis=-1)
            hit = (tmax >= np.maximum(tmin, 0.0))
            hit_f = origin[0] + tmin * ray_f
            glass = hit & (hit_f > 0.2) & (hit_f < 1.2)
            self.car_pixels = np.flatnonzero(hit)
            self.car_shades = np.where(glass.reshape(-1)[self.car_pixels], CAR_GLASS_SHADE, CAR_BODY_SHADE).astype(
                np.uint8)

    def render(self, x: float, z: float, psi: float) -> np.ndarray:
        """The view from the car at world (x, z) with heading ``psi`` (rad). Returns the renderer's own
        ``(H, W)`` uint8 buffer, overwritten by the next call: copy it to keep it."""
        rot = complex(math.cos(psi), -math.sin(psi))
        for band in self.bands:
            tex = band.texture
            c = complex((x - tex.x0) / tex.res, (z - tex.z0) / tex.res)
            np.multiply(band.p, rot, out=band.w)
            np.add(band.w, c, out=band.w)
            np.copyto(band.ix, band.w.real, casting="unsafe")
            np.copyto(band.iz, band.w.imag, casting="unsafe")
            np.multiply(band.iz, tex.shade.shape[1], out=band.iz)
            np.add(band.iz, band.ix, out=band.iz)
            np.take(band.flat_texture, band.iz, out=band.out, mode="clip")
        if self.car_pixels.size:
            self.frame.reshape(-1)[self.car_pixels] = self.car_shades
        return self.frame
