"""Zone tracking, extrapolation, smoothing and progress against hand-made reference lines."""
from __future__ import annotations

import math

import numpy as np

from environments.trackmania.zones import (REAL_CHECKPOINT_RADIUS_M, ZoneCenters, ZoneTracker, checkpoint_radius_for_gate,
                                          extrapolate_and_smooth)
from tests.environments.trackmania.helpers import straight_line


def _drive(tracker: ZoneTracker, x: float, z_from: float, z_to: float, step: float = 1.0) -> int:
    """Move the car in small steps along z at lateral x (the tracker runs once per action)."""
    zone = tracker.current
    for z in np.arange(z_from, z_to + (step if z_to >= z_from else -step) * 1e-6, step if z_to >= z_from else -step):
        zone = tracker.update(np.array([x, 10.0, z]))
    return zone


def _zones(line: np.ndarray, n_before: int = 20, n_after: int = 100, cps=None) -> ZoneCenters:
    return ZoneCenters.from_raw_line(line, n_before, n_after, real_checkpoints=cps)


def test_extrapolation_extends_first_and_last_segments_and_keeps_straight_lines():
    """Extrapolated points continue the end segments; smoothing leaves a straight line unchanged."""
    line = straight_line(50.0)
    z = extrapolate_and_smooth(line, 20, 30)
    assert z.shape == (20 + len(line) + 30, 3)
    np.testing.assert_allclose(z[:, 2], np.arange(-20, len(line) + 30) * 0.5, atol=1e-9)
    np.testing.assert_allclose(z[:, 0], 0.0, atol=1e-12)


def test_smoothing_averages_points_five_before_and_after():
    """Interior points become the mean of the points 5 before and 5 after (ends untouched)."""
    rng = np.random.default_rng(0)
    line = np.cumsum(rng.normal(size=(60, 3)), axis=0)
    raw = np.concatenate([line[0] + (line[0] - line[1]) * np.arange(2, 0, -1)[:, None], line,
                          line[-1] + (line[-1] - line[-2]) * np.arange(1, 3)[:, None]])
    z = extrapolate_and_smooth(line, 2, 2)
    np.testing.assert_allclose(z[5:-5], 0.5 * (raw[:-10] + raw[10:]))
    np.testing.assert_allclose(z[:5], raw[:5])


def test_forward_tracking_advances_and_progress_is_metres():
    """Driving along a straight line advances one zone per 0.5 m and progress grows by the distance driven."""
    zones = _zones(straight_line(100.0))
    tracker = ZoneTracker(zones, road_width=90)
    start = zones.progress_m(tracker.update(np.array([0.0, 10.0, 0.0])), np.array([0.0, 10.0, 0.0]))
    for z in (5.0, 20.0, 60.0):
        pos = np.array([0.3, 10.0, z])
        _drive(tracker, 0.3, max(z - 4.0, 0.0), z)
        zone = tracker.update(pos)
        assert abs(zones.centers[zone][2] - z) <= 0.25 + 1e-9
        assert math.isclose(zones.progress_m(zone, pos) - start, z, abs_tol=1e-6)


def test_backward_tracking_goes_back_when_previous_point_is_closer():
    """Reversing moves the current zone back."""
    zones = _zones(straight_line(100.0))
    tracker = ZoneTracker(zones, road_width=90)
    high = _drive(tracker, 0.0, 0.0, 60.0)
    low = _drive(tracker, 0.0, 60.0, 30.0)
    assert low < high
    assert abs(zones.centers[low][2] - 30.0) <= 0.25 + 1e-9


def test_no_advance_beyond_road_width_limit():
    """A car farther than sqrt(0.25^2 + (road_width/2)^2) from the next point does not advance onto it."""
    zones = _zones(straight_line(200.0))
    narrow = ZoneTracker(zones, road_width=90)  # limit ~45 m
    assert _drive(narrow, 60.0, 0.0, 100.0) == zones.first_real  # 60 m to the side
    wide = ZoneTracker(zones, road_width=200)  # limit ~100 m
    assert zones.centers[_drive(wide, 60.0, 0.0, 100.0)][2] > 90.0


def test_hairpin_does_not_skip_to_the_other_leg():
    """On a hairpin the tracker follows the line instead of jumping to the nearby return leg."""
    up = straight_line(100.0)
    theta = np.linspace(0, math.pi, 63)[1:-1]
    turn = np.stack([10 - 10 * np.cos(theta), np.full_like(theta, 10.0), 100 + 10 * np.sin(theta)], axis=1)
    down = straight_line(100.0)[::-1] + np.array([20.0, 0.0, 0.0])
    zones = _zones(np.concatenate([up, turn, down]))
    tracker = ZoneTracker(zones, road_width=90)
    zone = _drive(tracker, 0.0, 0.0, 80.0)
    assert zones.centers[zone][0] < 1.0  # still on the first leg, although the return leg is only 20 m away


def test_never_enters_the_final_extrapolated_zone():
    """Far past the finish the current zone stops at the finish point."""
    zones = _zones(straight_line(50.0), n_after=100)
    tracker = ZoneTracker(zones, road_width=90)
    for z in np.arange(0.0, 120.0, 2.0):
        zone = tracker.update(np.array([0.0, 10.0, z]))
        assert zone <= zones.finish
    assert zone == zones.finish == len(zones.centers) - 1 - 100


def test_real_checkpoint_pairing_requires_the_car_within_12_m():
    """A point paired with a real checkpoint is only entered when the car is within 12 m of the checkpoint."""
    line = straight_line(100.0)
    cp = np.array([0.0, 10.0, 50.0])
    zones = _zones(line, cps=cp[None])
    paired = int(np.argmin(np.linalg.norm(zones.centers - cp, axis=1)))
    blocked = ZoneTracker(zones, road_width=90, use_real_checkpoints=True)
    assert _drive(blocked, 20.0, 0.0, 70.0) == paired - 1  # 20 m to the side: stops before it
    blocked.reset()
    assert _drive(blocked, 5.0, 0.0, 70.0) > paired  # passes 5 m beside it
    free = ZoneTracker(zones, road_width=90, use_real_checkpoints=False)
    assert _drive(free, 20.0, 0.0, 70.0) > paired


def test_a_gate_crossed_near_its_wall_lets_the_progress_through():
    """Protects the simulator's zone radius: a car that crosses a 14 m gate 13 m beside the line (along
    the wall, where the gate counts it) advances past the checkpoint; with Linesight's 12 m it was held
    there until the no-progress cut-off (``far_from_checkpoint``)."""
    line = straight_line(100.0)
    cp = np.array([0.0, 10.0, 50.0])
    gate = ZoneCenters.from_raw_line(line, 20, 100, real_checkpoints=cp[None],
                                     checkpoint_radius_m=checkpoint_radius_for_gate(14.0))
    paired = int(np.argmin(np.linalg.norm(gate.centers - cp, axis=1)))
    assert _drive(ZoneTracker(gate, road_width=90), 13.0, 0.0, 70.0, step=5.0) > paired  # 5 m per action
    linesight = _zones(line, cps=cp[None])
    assert _drive(ZoneTracker(linesight, road_width=90), 13.0, 0.0, 70.0, step=5.0) == paired - 1


def test_simulator_tracks_pair_their_checkpoints_with_their_gate_radius():
    """The environment gives the simulator's own checkpoints the radius of their gates (road and run-off),
    and keeps 12 m only for checkpoints read from a real map."""
    from environments.trackmania.env import TrackManiaEnv
    from environments.trackmania.tracks import get_track

    env = TrackManiaEnv(track="short")
    radius = env.zones.checkpoint_radius[np.isfinite(env.zones.checkpoint_radius)]
    assert len(radius) == len(get_track("short").checkpoint_positions) > 0
    assert np.allclose(radius, checkpoint_radius_for_gate(get_track("short").gate_half_width))
    assert radius[0] > REAL_CHECKPOINT_RADIUS_M
    env.close()
