"""Seeing an episode: an animated GIF of the agent's frames with a speed / action overlay, and a
top-down PNG of the driven trajectory over the track (Pillow); and the pictures of a race
(:func:`write_race_pictures`), drawn for a saved best run by :func:`record_best_run`."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from environments.trackmania.actions import ACTION_TABLE, INPUT_NAMES
from environments.trackmania.tools.race_gaps import SectorGap, sector_gaps
from environments.trackmania.track import Track

Policy = Callable[[dict[str, np.ndarray]], int]

#: GIF frames are upscaled by this factor for viewing.
GIF_SCALE = 2
#: Longest GIF written; longer episodes keep every k-th frame, frames.
MAX_GIF_FRAMES = 1200
_INPUT_GLYPHS = {"accelerate": "^", "brake": "v", "left": "<", "right": ">"}


@dataclass
class RecordResult:
    """What :func:`record_episode` wrote and how the episode ended."""

    gif_path: Path
    png_path: Path
    steps: int
    total_reward: float
    info: dict[str, Any]


#: The GIF's palette: 255 grays (the frames, 254 = white) and the overlay's yellow at index 255.
_GIF_TEXT_INDEX = 255
_GIF_PALETTE = [v for g in range(255) for v in (g, g, g)] + [255, 255, 0]


def _overlay(frame: np.ndarray, speed_kmh: float, action: int | None, race_time_ms: int) -> Image.Image:
    """One GIF frame in palette mode (no quantisation needed): the frame upscaled, a black strip with
    speed, race time and the action's keys in yellow."""
    small = np.minimum(frame, _GIF_TEXT_INDEX - 1)
    img = Image.fromarray(small).resize((frame.shape[1] * GIF_SCALE, frame.shape[0] * GIF_SCALE), Image.NEAREST)
    img = img.convert("P")
    img.putpalette(_GIF_PALETTE)
    draw = ImageDraw.Draw(img)
    keys = ""
    if action is not None:
        keys = "".join(_INPUT_GLYPHS[n] for n, on in zip(INPUT_NAMES, ACTION_TABLE[action]) if on) or "-"
    text = f"{speed_kmh:5.0f} km/h  {race_time_ms / 1000:6.2f} s  a={action if action is not None else '-'} {keys}"
    draw.rectangle([0, 0, img.width, 14], fill=0)
    draw.text((3, 2), text, fill=_GIF_TEXT_INDEX, font=_overlay_font())
    return img


@functools.cache
def _overlay_font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=10)


def draw_trajectory_png(track: Track, positions: np.ndarray, speeds_kmh: np.ndarray, path: str | Path) -> Path:
    """Top-down PNG of ``track`` with ``positions`` (T, 3) coloured by ``speeds_kmh`` (T,) and a km/h
    colour bar (:func:`~environments.trackmania.tools.race_pictures.draw_race_map`)."""
    from environments.trackmania.tools.race_pictures import draw_race_map
    from environments.trackmania.tools.trajectory import Trajectory

    n = len(positions)
    trajectory = Trajectory(positions=np.asarray(positions, np.float64).reshape(n, 3),
                            headings=np.zeros(n), speeds_kmh=np.asarray(speeds_kmh, np.float32),
                            race_time_ms=np.zeros(n, np.int32), progress_m=np.zeros(n, np.float32),
                            actions=np.zeros(max(n - 1, 0), np.int8), finished=False, end_reason="",
                            track=track.name)
    return draw_race_map(track, trajectory, path, agent_label=f"{track.length_m:.0f} m")


def write_gif(frames: list[np.ndarray], overlays: list[tuple[float, int | None, int]], path: str | Path,
              ms_per_frame: int) -> Path:
    """An animated GIF of (H, W) uint8 frames, each with its (speed km/h, action, race time ms) overlay.

    Episodes longer than MAX_GIF_FRAMES keep every k-th frame (and play at the same speed).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    stride = max(1, int(np.ceil(len(frames) / MAX_GIF_FRAMES)))
    images = [_overlay(frames[k], *overlays[k]) for k in range(0, len(frames), stride)]
    images[0].save(path, save_all=True, append_images=images[1:], duration=ms_per_frame * stride, loop=0,
                   optimize=False)
    return path


def record_episode(env, policy: Policy, out_dir: str | Path, seed: int | None = 0, name: str = "episode",
                   max_steps: int | None = None) -> RecordResult:
    """Run ``policy`` (obs -> action) in ``env`` (a TrackManiaEnv) for one episode and write
    ``<name>.gif`` and ``<name>.png`` in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base = env.unwrapped
    obs, info = env.reset(seed=seed)
    frames: list[np.ndarray] = [obs["frame"][0].copy()]
    overlays: list[tuple[float, int | None, int]] = [(info["speed_kmh"], None, info["race_time_ms"])]
    positions = [base.state.position.copy()]
    speeds = [info["speed_kmh"]]
    total = 0.0
    steps = 0
    limit = max_steps or 10 ** 9
    while steps < limit:
        action = int(policy(obs))
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        steps += 1
        frames.append(obs["frame"][0].copy())
        overlays.append((info["speed_kmh"], action, info["race_time_ms"]))
        positions.append(base.state.position.copy())
        speeds.append(info["speed_kmh"])
        if terminated or truncated:
            break
    gif_path = write_gif(frames, overlays, out / f"{name}.gif", env.unwrapped.params.ms_per_action)
    png_path = draw_trajectory_png(base.track, np.asarray(positions), np.asarray(speeds), out / f"{name}.png")
    return RecordResult(gif_path=gif_path, png_path=png_path, steps=steps, total_reward=total, info=info)


def baseline_policy(env, margins: Any = None) -> Policy:
    """The classical driver as an ``obs -> action`` policy bound to ``env`` (it reads the car state),
    reset at each race start; ``margins``: its tuned margins (None: the shipped ones)."""
    from environments.trackmania.tools.baseline import BaselineDriver

    base = env.unwrapped
    driver = BaselineDriver(base.track, margins=margins)

    def policy(obs: dict[str, np.ndarray]) -> int:
        if base.state.race_time_ms == 0:
            driver.reset()
        return driver.act(base.state)

    return policy


def random_policy(env, seed: int = 0) -> Policy:
    """Uniformly random actions."""
    rng = np.random.default_rng(seed)
    n = env.action_space.n
    return lambda obs: int(rng.integers(n))


# ---------------------------------------------------------------------- pictures of a race
#: First-person view of the animations (larger than the network's input), pixels.
CAMERA_WIDTH, CAMERA_HEIGHT = 480, 360
#: The animations keep one sample in this many (2: 10 frames/s at 50 ms per action).
ANIMATION_STRIDE = 2


@dataclass
class RacePictures:
    """What :func:`write_race_pictures` wrote (None: not drawn) and how long it took, s."""

    map_png: Path
    speed_png: Path | None
    animation: Path | None
    seconds: float


def write_race_pictures(track: Track, agent, out_dir: str | Path, stem: str, agent_label: str,
                        driver=None, driver_label: str = "classical driver", camera_frames: list | None = None,
                        ms_per_action: int = 50, animation_suffix: str = ".webp",
                        stride: int = ANIMATION_STRIDE) -> RacePictures:
    """Write ``<stem>_map.png`` (trajectory coloured by speed, reference line, driver's line),
    ``<stem>_speed.png`` (speed along the track, agent and driver; needs ``driver``) and, with
    ``camera_frames`` (one per sample of ``agent``), ``<stem>_race<suffix>`` (first-person view | live map).

    ``agent`` and ``driver`` are :class:`~environments.trackmania.tools.trajectory.Trajectory`; labels go in
    the legends (put race times in them).
    """
    import time

    from environments.trackmania.tools.race_pictures import (
        animation_frames,
        animation_stride,
        draw_race_map,
        draw_speed_comparison,
        write_animation,
    )

    start = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    map_png = draw_race_map(track, agent, out / f"{stem}_map.png", driver=driver, agent_label=agent_label,
                            driver_label=driver_label)
    speed_png = None
    if driver is not None:
        speed_png = draw_speed_comparison([(agent, agent_label), (driver, driver_label)], out / f"{stem}_speed.png",
                                          track.length_m, title=f"{track.name}: speed along the track")
    animation = None
    if camera_frames:
        stride = animation_stride(len(camera_frames), stride)
        images = animation_frames(track, agent, camera_frames, stride, label=agent_label)
        animation = write_animation(images, out / f"{stem}_race{animation_suffix}", ms_per_action * stride)
    return RacePictures(map_png, speed_png, animation, time.perf_counter() - start)


def camera_renderer(track: Track, camera: int, width: int = CAMERA_WIDTH, height: int = CAMERA_HEIGHT):
    """A simulator renderer of ``track`` at ``width`` x ``height`` (any size: the network's is separate)."""
    from environments.trackmania.sim.render import Renderer

    return Renderer(track, height=height, width=width, camera=camera)


@dataclass
class BestRunPictures:
    """What :func:`record_best_run` replayed and wrote."""

    pictures: RacePictures
    trajectory_npz: Path
    race_time_s: float
    driver_time_s: float | None
    driver_label: str
    reset_seed: int
    replay_s: float
    sectors: list[SectorGap] = field(default_factory=list)


def record_best_run(best_run: str | Path, out_dir: str | Path | None = None, driver: str = "shipped",
                    run_seed: int = 0, animation_suffix: str = ".webp", stride: int = ANIMATION_STRIDE,
                    camera_size: tuple[int, int] = (CAMERA_WIDTH, CAMERA_HEIGHT),
                    sector_m: float = 100.0) -> BestRunPictures:
    """Replay a saved best run in the simulator (checked against its race time) and draw its pictures
    next to the classical driver's race (``driver``: "shipped" margins, "tuned" = ``tune_baseline``,
    about a minute, or "none").

    ``best_run``: ``RUN_DIR/best_runs/<map>`` (its fastest run) or one ``.json``; ``out_dir``
    defaults to the best run's folder. Writes ``<stem>.npz`` (the trajectory) and the pictures; with a
    driver, ``sectors`` holds the run against the driver in sectors of ``sector_m`` metres.
    """
    import time

    from environments.trackmania.tools.race_replay import driver_trajectory, load_best_run, replay_best_run, run_environment

    best = load_best_run(best_run)
    params, track = run_environment(best)
    out = Path(out_dir) if out_dir is not None else best.json_path.parent
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    renderer = camera_renderer(track, params.game_camera_number, *camera_size)
    agent, frames, seed = replay_best_run(best, params, track, run_seed, renderer)
    replay_s = time.perf_counter() - start
    driver_run, driver_label = None, ""
    if driver != "none":
        margins = None
        if driver == "tuned":
            from environments.trackmania.tools.baseline import tune_baseline

            margins = tune_baseline(track).margins
        elif driver != "shipped":
            raise ValueError(f"driver must be shipped, tuned or none, got {driver!r}")
        driver_run = driver_trajectory(track, params, margins=margins)
        kind = f"tuned driver ({margins})" if margins is not None else "classical driver (shipped margins)"
        driver_label = (f"{kind}: {driver_run.race_time_s:.2f} s" if driver_run.finished
                        else f"{kind}: did not finish")
    kind = "exploring" if best.exploration else "greedy"
    agent_label = f"agent best run ({kind}): {best.race_time_s:.2f} s"
    npz = agent.save(out / f"{best.stem}.npz")
    pictures = write_race_pictures(track, agent, out, best.stem, agent_label, driver_run, driver_label, frames,
                                   params.ms_per_action, animation_suffix, stride)
    sectors = sector_gaps(track, agent, driver_run, sector_m) if driver_run is not None else []
    return BestRunPictures(pictures, npz, best.race_time_s,
                           driver_run.race_time_s if driver_run is not None and driver_run.finished else None,
                           driver_label, seed, replay_s, sectors)
