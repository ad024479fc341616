"""The race pictures: colours that follow speed, the driver's line, the speed chart's curves and the
side-by-side animation's frames (synthetic trajectories on the ``short`` track: exact and fast)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

from environments.trackmania.tools.race_pictures import (
    AGENT_CHART_COLOR,
    ANIM_MAP_PX,
    ANIM_STRIP_PX,
    DRIVER_CHART_COLOR,
    DRIVER_COLOR,
    LEGEND_PX,
    animation_frames,
    draw_speed_comparison,
    race_map_image,
    speed_colors,
    write_animation,
)
from environments.trackmania.tools.trajectory import Trajectory
from environments.trackmania.tracks import resolve_track

TRACK = resolve_track("short")


def along_line(speeds_kmh: np.ndarray, lateral_m: float = 0.0) -> Trajectory:
    """A trajectory on the reference line (shifted ``lateral_m`` to the left), one sample per speed."""
    line = TRACK.reference_line
    idx = np.linspace(0, len(line) - 1, len(speeds_kmh)).round().astype(int)
    t = TRACK.tangent_xz[idx]
    normal = np.stack([t[:, 1], np.zeros(len(idx)), -t[:, 0]], axis=1)
    positions = (line[idx] + lateral_m * normal).astype(np.float32)
    n = len(speeds_kmh)
    return Trajectory(positions=positions, headings=np.arctan2(t[:, 0], t[:, 1]).astype(np.float32),
                      speeds_kmh=np.asarray(speeds_kmh, np.float32),
                      race_time_ms=(np.arange(n) * 50).astype(np.int32),
                      progress_m=TRACK.arc_length[idx].astype(np.float32), actions=np.zeros(n - 1, np.int8),
                      finished=True, end_reason="", track=TRACK.name)


N = 400
SLOW, FAST = N // 4, 3 * N // 4
#: 10 km/h at a quarter of the track, 150 km/h at three quarters.
SPEEDS = 80.0 - 70.0 * np.cos(2 * np.pi * (np.arange(N) / N - 0.25))


def _pixel(img: Image.Image, xy: tuple[float, float]) -> np.ndarray:
    return np.asarray(img.getpixel((round(xy[0]), round(xy[1]))), dtype=int)


def _near(img: Image.Image, xy: tuple[float, float], color) -> bool:
    """Some pixel within 1 px of ``xy`` has ``color`` (lines of 2 px fall between rounded positions)."""
    x, y = round(xy[0]), round(xy[1])
    patch = np.asarray(img.crop((x - 1, y - 1, x + 2, y + 2)).convert("RGB"), dtype=int)
    return bool((np.abs(patch - np.asarray(color)).max(axis=-1) < 40).any())


def test_the_trajectory_is_coloured_by_speed_with_a_km_h_scale():
    """On the map the fastest point is drawn in the scale's fast colour, the slowest in its slow one."""
    agent = along_line(SPEEDS)
    img, view = race_map_image(TRACK, agent)
    (fast_xy,), (slow_xy,) = view.px(agent.positions[FAST, [0, 2]]), view.px(agent.positions[SLOW, [0, 2]])
    fast, slow = _pixel(img, fast_xy), _pixel(img, slow_xy)
    assert np.abs(fast - speed_colors([150.0], 150.0)[0]).max() < 30  # red
    assert np.abs(slow - speed_colors([10.0], 150.0)[0]).max() < 30  # blue
    assert np.abs(fast - slow).max() > 150


def test_the_driver_line_is_drawn_where_the_driver_went():
    """The driver's line (6 m beside the agent's) is on the map with a driver, and absent without one."""
    agent, driver = along_line(SPEEDS), along_line(np.full(N, 100.0), lateral_m=6.0)
    with_driver, view = race_map_image(TRACK, agent, driver)
    without, view_alone = race_map_image(TRACK, agent)
    points = view.px(driver.positions[50:350:25][:, [0, 2]])
    assert all(_near(with_driver, p, DRIVER_COLOR) for p in points)
    alone = view_alone.px(driver.positions[50:350:25][:, [0, 2]])
    assert not any(_near(without, p, DRIVER_COLOR) for p in alone)


def test_the_map_fits_the_track_shape_with_its_colour_bar_and_legend():
    """short is taller than wide: its map is the asked height, and at least 720 px wide (the legend's
    room), plus the colour bar (110 px) on the right and the legend on top."""
    img, _ = race_map_image(TRACK, along_line(SPEEDS), size_px=1000)
    assert img.size[1] - LEGEND_PX == 1000 and 720 <= img.size[0] - 110 < 1000


def test_the_speed_chart_draws_each_race_at_its_speed(tmp_path):
    """Two curves in their colours; the agent's curve passes at its speed where it is fastest."""
    agent, driver = along_line(SPEEDS), along_line(np.full(N, 100.0))
    path = draw_speed_comparison([(agent, "agent 20.00 s"), (driver, "driver 21.00 s")], tmp_path / "s.png",
                                 TRACK.length_m)
    img = np.asarray(Image.open(path).convert("RGB")).astype(int)
    assert img.shape == (460, 1000, 3)

    def rows_of(color, column):
        return np.flatnonzero(np.abs(img[:, column] - color).max(axis=1) < 30)

    left, top, pw, ph, top_kmh = 70, 70, 1000 - 90, 460 - 120, 150.0
    column = round(left + pw * float(agent.progress_m[FAST]) / TRACK.length_m)
    rows = rows_of(AGENT_CHART_COLOR, column)
    assert len(rows) and abs(rows.mean() - (top + ph * (1 - 150.0 / top_kmh))) < 4
    rows = rows_of(DRIVER_CHART_COLOR, column)
    assert len(rows) and abs(rows.mean() - (top + ph * (1 - 100.0 / top_kmh))) < 4


def test_the_animation_shows_camera_and_a_moving_car_on_the_map(tmp_path):
    """Every stride-th sample is a frame: camera left (as given), map right with the car where it is."""
    agent = along_line(SPEEDS[:60] + 50)
    rng = np.random.default_rng(0)
    camera = [rng.integers(0, 255, (72, 96), dtype=np.uint8) for _ in range(60)]
    images = animation_frames(TRACK, agent, camera, stride=3)
    assert len(images) == 20 and images[0].size == (96 + ANIM_MAP_PX, 72 + ANIM_STRIP_PX)
    assert np.array_equal(np.asarray(images[5])[:72, :96, 0], camera[15])
    assert not np.array_equal(np.asarray(images[0])[:72, 96:], np.asarray(images[-1])[:72, 96:])  # the car moved
    for suffix in (".gif", ".webp"):
        path = write_animation(images, tmp_path / f"a{suffix}", 150)
        saved = Image.open(path)
        assert saved.n_frames == 20 and saved.size == images[0].size
    with pytest.raises(ValueError, match="gif or .webp"):
        write_animation(images, tmp_path / "a.mp4", 150)


def test_speed_colours_run_from_blue_to_red():
    """0 is the slow end (blue), the top of the scale the fast end (red), clipped beyond."""
    c = speed_colors([0.0, 75.0, 150.0, 300.0], 150.0).astype(int)
    assert c[0][2] > 200 and c[0][0] < 60 and c[2][0] > 200 and c[2][2] < 60
    assert np.array_equal(c[2], c[3]) and math.isclose(float(c[1][1]), 210, abs_tol=1)
