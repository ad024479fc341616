"""Pictures of a race (Pillow only): a top-down map with the trajectory coloured by speed, a speed-along-
the-track chart comparing two races, and a side-by-side animation (first-person view | live map).

Maps are drawn in the simulator's top-down orientation: image columns follow world x and rows world z,
so a turn to the car's right in the first-person view is a turn to its right on the map.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from environments.trackmania.actions import ACTION_TABLE
from environments.trackmania.track import Track
from environments.trackmania.tools.trajectory import Trajectory

#: Speed colour map anchors (fraction of the top of the scale -> RGB): blue, cyan, green, yellow, red.
SPEED_COLORS = ((0.0, (40, 60, 230)), (0.25, (0, 200, 230)), (0.5, (40, 210, 60)), (0.75, (250, 220, 0)),
                (1.0, (230, 30, 20)))
DRIVER_COLOR = (255, 255, 255)
REFERENCE_COLOR = (150, 150, 150)
AGENT_CHART_COLOR = (230, 80, 0)
DRIVER_CHART_COLOR = (30, 80, 220)
#: Ground margin around the drawn area, m.
MAP_MARGIN_M = 12.0
#: Height of the map's legend (title, then two rows), pixels.
LEGEND_PX = 98
#: Speed scales are rounded up to a multiple of this, km/h.
SPEED_SCALE_STEP_KMH = 50.0


def font(size: int) -> ImageFont.ImageFont:
    """Pillow's built-in scalable font at ``size`` pixels."""
    return ImageFont.load_default(size=size)


def speed_scale_kmh(*speeds: np.ndarray) -> float:
    """Top of the speed scale: the highest speed rounded up to SPEED_SCALE_STEP_KMH, km/h."""
    top = max([float(np.max(s)) for s in speeds if len(s)] + [1.0])
    return SPEED_SCALE_STEP_KMH * math.ceil(top / SPEED_SCALE_STEP_KMH)


def speed_colors(speeds_kmh: np.ndarray, top_kmh: float) -> np.ndarray:
    """(N, 3) uint8 colours of ``speeds_kmh`` on the scale 0..top_kmh (blue slow, red fast)."""
    t = np.clip(np.asarray(speeds_kmh, np.float64) / max(top_kmh, 1e-9), 0.0, 1.0)
    stops = np.array([s for s, _ in SPEED_COLORS])
    rgb = np.array([c for _, c in SPEED_COLORS], np.float64)
    return np.stack([np.interp(t, stops, rgb[:, k]) for k in range(3)], axis=-1).round().astype(np.uint8)


# ---------------------------------------------------------------------- the map
@dataclass
class MapView:
    """A top-down view of a track: ``background`` (RGB) and the world -> pixel transform.

    Pixel (u, v) of world (x, z) is ``((x - x_lo) * scale + ox, (z - z_lo) * scale + oy)``.
    """

    track: Track
    x_lo: float
    z_lo: float
    scale: float  # pixels per metre
    ox: float
    oy: float
    background: Image.Image

    def px(self, xz: np.ndarray) -> list[tuple[float, float]]:
        """Pixel coordinates of (N, 2) world (x, z) points."""
        xz = np.asarray(xz, np.float64).reshape(-1, 2)
        u = (xz[:, 0] - self.x_lo) * self.scale + self.ox
        v = (xz[:, 1] - self.z_lo) * self.scale + self.oy
        return list(zip(u.tolist(), v.tolist()))


def map_view(track: Track, width: int, height: int, extra_xz: Sequence[np.ndarray] = ()) -> MapView:
    """The track (the simulator's own top-down texture, dimmed) fitted into ``width`` x ``height``
    pixels, with room for the ``extra_xz`` (N, 2) point sets (trajectories that leave the road)."""
    from environments.trackmania.sim.render import FINE_RES_M
    from environments.trackmania.sim.texture import BACKGROUND_SHADES, track_texture

    pts = np.concatenate([track.reference_line[:, [0, 2]]] + [np.asarray(e).reshape(-1, 2) for e in extra_xz])
    lo = pts.min(axis=0) - (track.road_width / 2 + MAP_MARGIN_M)
    hi = pts.max(axis=0) + (track.road_width / 2 + MAP_MARGIN_M)
    scale = min(width / (hi[0] - lo[0]), height / (hi[1] - lo[1]))
    ox = (width - (hi[0] - lo[0]) * scale) / 2
    oy = (height - (hi[1] - lo[1]) * scale) / 2
    # the world window the image covers, cut out of the texture (padded with background where it ends)
    x_lo, z_lo = lo[0] - ox / scale, lo[1] - oy / scale
    tex = track_texture(track, FINE_RES_M, margin_m=40.0)
    ix0, iz0 = int(math.floor((x_lo - tex.x0) / tex.res)), int(math.floor((z_lo - tex.z0) / tex.res))
    nx, nz = int(math.ceil(width / scale / tex.res)) + 1, int(math.ceil(height / scale / tex.res)) + 1
    canvas = np.full((nz, nx), int(np.mean(BACKGROUND_SHADES)), np.uint8)
    sz0, sx0 = max(iz0, 0), max(ix0, 0)
    sz1, sx1 = min(iz0 + nz, tex.shade.shape[0]), min(ix0 + nx, tex.shade.shape[1])
    if sz1 > sz0 and sx1 > sx0:
        canvas[sz0 - iz0:sz1 - iz0, sx0 - ix0:sx1 - ix0] = tex.shade[sz0:sz1, sx0:sx1]
    gray = Image.fromarray(canvas).resize((round(nx * tex.res * scale), round(nz * tex.res * scale)), Image.BOX)
    gray = gray.crop((0, 0, width, height)).point(lambda g: int(g * 0.75))
    return MapView(track, float(x_lo), float(z_lo), float(scale), 0.0, 0.0, gray.convert("RGB"))


def _dashed(draw: ImageDraw.ImageDraw, points: list[tuple[float, float]], fill, width: int, dash: int = 6) -> None:
    """A polyline drawn as dashes of ``dash`` points with gaps as long."""
    for k in range(0, len(points) - 1, 2 * dash):
        draw.line(points[k:k + dash + 1], fill=fill, width=width)


def draw_speed_trail(draw: ImageDraw.ImageDraw, view: MapView, trajectory: Trajectory, top_kmh: float,
                     width: int) -> None:
    """The trajectory as segments coloured by speed (each segment by its mean speed)."""
    p = view.px(trajectory.positions[:, [0, 2]])
    v = trajectory.speeds_kmh.astype(np.float64)
    colors = speed_colors(0.5 * (v[:-1] + v[1:]), top_kmh)
    for k in range(len(p) - 1):
        draw.line([p[k], p[k + 1]], fill=tuple(int(c) for c in colors[k]), width=width)


def _start_finish(draw: ImageDraw.ImageDraw, view: MapView, radius: float) -> None:
    line = view.track.reference_line
    for point, color in ((line[0], (0, 230, 0)), (line[-1], (255, 40, 40))):
        (cx, cy), = view.px(point[[0, 2]])
        draw.ellipse([cx - radius, cy - radius, cx + radius, cy + radius], outline=color, width=3)


def draw_colorbar(img: Image.Image, box: tuple[int, int, int, int], top_kmh: float, title: str = "speed, km/h") -> None:
    """A vertical colour bar in ``box`` (left, top, right, bottom) with ticks every 50 km/h (slow at the bottom)."""
    left, top, right, bottom = box
    draw = ImageDraw.Draw(img)
    n = bottom - top
    colors = speed_colors(np.linspace(top_kmh, 0.0, n), top_kmh)
    for k in range(n):
        draw.line([(left, top + k), (right, top + k)], fill=tuple(int(c) for c in colors[k]))
    draw.rectangle(box, outline=(255, 255, 255))
    f = font(14)
    step = SPEED_SCALE_STEP_KMH if top_kmh <= 400 else 2 * SPEED_SCALE_STEP_KMH
    for value in np.arange(0.0, top_kmh + 1e-6, step):
        y = bottom - value / top_kmh * n
        draw.line([(right, y), (right + 5, y)], fill=(255, 255, 255), width=1)
        draw.text((right + 8, y - 8), f"{value:.0f}", fill=(255, 255, 255), font=f)
    draw.text((left - 10, top - 24), title, fill=(255, 255, 255), font=f)


def draw_race_map(track: Track, agent: Trajectory, path: str | Path, driver: Trajectory | None = None,
                  agent_label: str = "agent", driver_label: str = "classical driver", size_px: int = 900) -> Path:
    """PNG: the track from above with ``agent``'s trajectory coloured by speed (colour bar in km/h), the
    reference line (dashed grey) and, when given, ``driver``'s line (thin white, on top)."""
    img, _ = race_map_image(track, agent, driver, agent_label, driver_label, size_px)
    path = Path(path)
    img.save(path)
    return path


def race_map_image(track: Track, agent: Trajectory, driver: Trajectory | None = None, agent_label: str = "agent",
                   driver_label: str = "classical driver", size_px: int = 900) -> tuple[Image.Image, MapView]:
    """The picture of :func:`draw_race_map` and its world -> pixel transform. The longer side of the
    map is ``size_px``; a colour bar (110 px) is on the right and the legend (LEGEND_PX) on top."""
    extra = [agent.positions[:, [0, 2]]] + ([driver.positions[:, [0, 2]]] if driver is not None else [])
    pts = np.concatenate([track.reference_line[:, [0, 2]]] + extra)
    span = pts.max(axis=0) - pts.min(axis=0) + track.road_width + 2 * MAP_MARGIN_M
    # the longer side gets size_px; the other follows the track's shape (at least room for the legend)
    map_w = max(int(size_px * span[0] / span.max()), 720)
    map_h = int(size_px * span[1] / span.max())
    view = map_view(track, map_w, map_h, extra)
    bar_w, legend_h = 110, LEGEND_PX
    img = Image.new("RGB", (map_w + bar_w, map_h + legend_h), (20, 20, 20))
    img.paste(view.background, (0, legend_h))
    view.oy += legend_h
    draw = ImageDraw.Draw(img)
    top = speed_scale_kmh(agent.speeds_kmh)
    _dashed(draw, view.px(track.reference_line[::2, [0, 2]]), REFERENCE_COLOR, 1)
    draw_speed_trail(draw, view, agent, top, width=8)
    if driver is not None:  # thin, on top of the agent's wider trail: both stay visible where they meet
        draw.line(view.px(driver.positions[:, [0, 2]]), fill=DRIVER_COLOR, width=2, joint="curve")
    _start_finish(draw, view, 9)
    draw_colorbar(img, (map_w + 20, legend_h + 40, map_w + 42, legend_h + map_h - 40), top)
    f = font(18)
    draw.text((10, 6), f"{track.name}: {agent_label}", fill=(255, 255, 255), font=f)
    y = 32
    draw.line([(12, y + 9), (52, y + 9)], fill=(250, 220, 0), width=5)
    draw.text((60, y), "trajectory, coloured by speed", fill=(255, 255, 255), font=font(15))
    _dashed(draw, [(300 + 4 * k, y + 9) for k in range(11)], REFERENCE_COLOR, 1, dash=2)
    draw.text((350, y), "reference line", fill=(255, 255, 255), font=font(15))
    if driver is not None:
        y += 24
        draw.line([(12, y + 9), (52, y + 9)], fill=DRIVER_COLOR, width=2)
        draw.text((60, y), driver_label, fill=(255, 255, 255), font=font(15))
    return img, view


# ---------------------------------------------------------------------- speed along the track
def draw_speed_comparison(races: Sequence[tuple[Trajectory, str]], path: str | Path, track_length_m: float,
                          title: str = "speed along the track", size: tuple[int, int] = (1000, 460)) -> Path:
    """PNG chart: speed (km/h) against distance along the reference line (m), one curve per race
    (label -> legend; put the race time in it). The first race is orange, the second blue."""
    width, height = size
    left, right, top, bottom = 70, 20, 70, 50
    img = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(img)
    top_kmh = speed_scale_kmh(*[t.speeds_kmh for t, _ in races])
    x_max = max([track_length_m] + [float(t.progress_m.max()) for t, _ in races])
    x_step = 50.0 if x_max <= 600 else 100.0 if x_max <= 1500 else 250.0
    pw, ph = width - left - right, height - top - bottom

    def xy(s: np.ndarray, v: np.ndarray) -> list[tuple[float, float]]:
        return list(zip((left + pw * np.asarray(s) / x_max).tolist(),
                        (top + ph * (1 - np.asarray(v) / top_kmh)).tolist()))

    f = font(14)
    for value in np.arange(0.0, top_kmh + 1e-6, SPEED_SCALE_STEP_KMH):
        (_, y), = xy([0.0], [value])
        draw.line([(left, y), (left + pw, y)], fill=(225, 225, 225))
        draw.text((left - 36, y - 8), f"{value:.0f}", fill="black", font=f)
    for value in np.arange(0.0, x_max + 1e-6, x_step):
        (x, _), = xy([value], [0.0])
        draw.line([(x, top), (x, top + ph)], fill=(235, 235, 235))
        draw.text((x - 12, top + ph + 6), f"{value:.0f}", fill="black", font=f)
    draw.rectangle([left, top, left + pw, top + ph], outline="black")
    draw.text((left + pw // 2 - 140, height - 22), "distance along the reference line, m", fill="black", font=f)
    draw.text((6, top - 22), "km/h", fill="black", font=f)
    draw.text((left, 8), title, fill="black", font=font(18))
    colors = (AGENT_CHART_COLOR, DRIVER_CHART_COLOR, (0, 150, 0), (120, 120, 120))
    for k, (trajectory, label) in enumerate(races):
        color = colors[k % len(colors)]
        draw.line(xy(trajectory.progress_m, trajectory.speeds_kmh), fill=color, width=3 if k == 0 else 2,
                  joint="curve")
        lx = left + 10 + 420 * k
        draw.line([(lx, 46), (lx + 36, 46)], fill=color, width=3)
        draw.text((lx + 44, 38), label, fill="black", font=font(15))
    path = Path(path)
    img.save(path)
    return path


# ---------------------------------------------------------------------- the animation
#: Camera panel, map panel and bottom strip sizes of the animation, pixels.
ANIM_MAP_PX = 360
ANIM_STRIP_PX = 64
#: Colours of the animation's palette, shared by every frame.
ANIM_COLORS = 128
#: Longest animation; longer races keep fewer samples (a larger stride), frames.
MAX_ANIMATION_FRAMES = 240


def _keys_panel(draw: ImageDraw.ImageDraw, x: int, y: int, action: int | None) -> None:
    """Four arrow keys (up = accelerate, down = brake, left, right), lit when held."""
    held = ACTION_TABLE[action] if action is not None else (0, 0, 0, 0)
    size = 22
    boxes = {0: (x + size + 2, y), 1: (x + size + 2, y + size + 2), 2: (x, y + size + 2),
             3: (x + 2 * (size + 2), y + size + 2)}
    glyphs = {0: "^", 1: "v", 2: "<", 3: ">"}
    lit = {0: (60, 210, 60), 1: (230, 50, 40), 2: (250, 200, 0), 3: (250, 200, 0)}
    for k, (bx, by) in boxes.items():
        on = bool(held[k])
        draw.rectangle([bx, by, bx + size, by + size], fill=lit[k] if on else (55, 55, 55), outline=(160, 160, 160))
        draw.text((bx + 7, by + 2), glyphs[k], fill=(0, 0, 0) if on else (150, 150, 150), font=font(15))


def animation_frames(track: Track, trajectory: Trajectory, camera_frames: Sequence[np.ndarray], stride: int,
                     label: str = "") -> list[Image.Image]:
    """RGB frames of the side-by-side view, every ``stride``-th sample: the first-person camera (as
    given) | a live map (speed-coloured trail so far, the car with its heading), with a strip
    below: race time, speed bar and the held keys."""
    cam_h, cam_w = camera_frames[0].shape
    view = map_view(track, ANIM_MAP_PX, cam_h, [trajectory.positions[:, [0, 2]]])
    top = speed_scale_kmh(trajectory.speeds_kmh)
    width, height = cam_w + ANIM_MAP_PX, cam_h + ANIM_STRIP_PX
    base = Image.new("RGB", (width, height), (20, 20, 20))
    base.paste(view.background, (cam_w, 0))
    view.ox += cam_w
    draw = ImageDraw.Draw(base)
    _dashed(draw, view.px(track.reference_line[::2, [0, 2]]), REFERENCE_COLOR, 1)
    _start_finish(draw, view, 6)
    p = view.px(trajectory.positions[:, [0, 2]])
    v = trajectory.speeds_kmh.astype(np.float64)
    colors = [tuple(int(c) for c in rgb) for rgb in speed_colors(0.5 * (v[:-1] + v[1:]), top)]
    big, small = font(22), font(14)
    images = []
    trail = base.copy()
    trail_draw = ImageDraw.Draw(trail)
    drawn = 0
    for k in range(0, len(camera_frames), stride):
        while drawn < k:  # the trail grows on its own image; each frame copies it
            trail_draw.line([p[drawn], p[drawn + 1]], fill=colors[drawn], width=4)
            drawn += 1
        img = trail.copy()
        img.paste(Image.fromarray(camera_frames[k]).convert("RGB"), (0, 0))
        d = ImageDraw.Draw(img)
        cx, cy = p[k]
        psi = float(trajectory.headings[k])
        hx, hz = math.sin(psi), math.cos(psi)  # heading in world (x, z) = pixel (u, v) directions
        d.line([(cx, cy), (cx + 16 * hx, cy + 16 * hz)], fill=(255, 255, 255), width=3)
        d.ellipse([cx - 6, cy - 6, cx + 6, cy + 6], fill=(255, 255, 255), outline=(0, 0, 0), width=2)
        y0 = cam_h + 6
        speed = float(trajectory.speeds_kmh[k])
        d.text((10, y0 + 2), f"{trajectory.race_time_ms[k] / 1000:6.2f} s", fill=(255, 255, 255), font=big)
        d.text((140, y0 + 2), f"{speed:4.0f} km/h", fill=(255, 255, 255), font=big)
        bar_l, bar_r = 140, 320
        d.rectangle([bar_l, y0 + 34, bar_r, y0 + 48], outline=(160, 160, 160))
        fill = int((bar_r - bar_l) * min(speed / top, 1.0))
        if fill > 0:
            color = tuple(int(c) for c in speed_colors([speed], top)[0])
            d.rectangle([bar_l, y0 + 34, bar_l + fill, y0 + 48], fill=color)
        action = int(trajectory.actions[k - 1]) if k > 0 else None
        _keys_panel(d, 340, cam_h + 6, action)
        text_x = max(cam_w, 420) + 8
        if label:
            d.text((text_x, cam_h + 8), label, fill=(255, 255, 255), font=small)
        d.text((text_x, cam_h + 30), f"{float(trajectory.progress_m[k]):5.0f} m along the line", fill=(200, 200, 200),
               font=small)
        images.append(img)
    return images


def animation_stride(samples: int, stride: int) -> int:
    """``stride``, or larger so that ``samples`` give at most MAX_ANIMATION_FRAMES frames."""
    return max(int(stride), math.ceil(samples / MAX_ANIMATION_FRAMES))


def write_animation(images: Sequence[Image.Image], path: str | Path, frame_ms: int, quality: int = 60) -> Path:
    """An animated GIF (``.gif``: one shared palette of ANIM_COLORS colours, no dithering) or WebP
    (``.webp``: lossy at ``quality``) of ``images``, each shown ``frame_ms`` ms; loops."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    if suffix == ".webp":
        images[0].save(path, save_all=True, append_images=list(images[1:]), duration=frame_ms, loop=0,
                       quality=quality, method=4)
    elif suffix == ".gif":
        # one palette from a strip of sampled frames keeps colours steady and encoding fast
        sample = [images[k] for k in np.linspace(0, len(images) - 1, min(6, len(images))).astype(int)]
        strip = Image.new("RGB", (sample[0].width, sample[0].height * len(sample)))
        for k, im in enumerate(sample):
            strip.paste(im, (0, k * im.height))
        palette = strip.quantize(ANIM_COLORS, method=Image.Quantize.MEDIANCUT)
        frames = [im.quantize(palette=palette, dither=Image.Dither.NONE) for im in images]
        frames[0].save(path, save_all=True, append_images=frames[1:], duration=frame_ms, loop=0, optimize=False)
    else:
        raise ValueError(f"animation {path}: use a .gif or .webp file name")
    return path
