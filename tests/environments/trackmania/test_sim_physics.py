"""Simulator physics: speeds, gears, surfaces, brakes and reverse, turbo, walls, elevation and flight."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from environments.trackmania.backend import SURFACE_ASPHALT, SURFACE_DIRT, SURFACE_GRASS, SURFACE_OTHER, SURFACE_TURBO
from environments.trackmania.sim.car import GEARBOX_SHIFT_UP, CarPhysics
from environments.trackmania.sim.geometry import sim_geometry
from environments.trackmania.track import SurfacePatch, Track
from tests.environments.trackmania.helpers import straight_line, straight_track


def _car(track: Track) -> CarPhysics:
    car = CarPhysics(track, sim_geometry(track))
    car.reset(0, 0.0, 0.0)
    return car


def _speed_after(track: Track, seconds: float) -> float:
    car = _car(track)
    car.run(True, False, 0, int(seconds * 100))
    return car.u * 3.6


def test_trackmania_like_acceleration_and_top_speed_on_asphalt():
    """0-100 km/h in 2-3 s and a top speed of 250-300 km/h on a long asphalt straight."""
    car = _car(straight_track(3000.0))
    ticks = 0
    while car.u * 3.6 < 100.0:
        car.run(True, False, 0, 1)
        ticks += 1
    assert 2.0 <= ticks / 100 <= 3.0
    car.run(True, False, 0, 3000)
    assert 250.0 <= car.u * 3.6 <= 300.0


def test_gears_shift_up_with_speed_and_rpm_drops_at_each_shift():
    """Accelerating runs through gears 1..5; each upshift is flagged and drops the rpm."""
    car = _car(straight_track(3000.0))
    gears, drops, flagged = [car.gear], 0, False
    for _ in range(2000):
        rpm_before, gear_before = car.rpm, car.gear
        car.run(True, False, 0, 1)
        if car.gear > gear_before:
            gears.append(car.gear)
            drops += car.rpm < rpm_before
            flagged |= car.gearbox_state == GEARBOX_SHIFT_UP
    assert gears == [1, 2, 3, 4, 5]
    assert drops == 4 and flagged
    while car.u > 1.0:  # braking to a stop shifts back down
        car.run(False, True, 0, 1)
    assert car.gear == 1


def test_surfaces_change_grip_and_drag():
    """Grass and dirt are slower than asphalt; grip (cornering) is lower on grass and 'other'."""
    v_asphalt = _speed_after(straight_track(), 8.0)
    v_dirt = _speed_after(straight_track(surface=SURFACE_DIRT), 8.0)
    v_grass = _speed_after(straight_track(surface=SURFACE_GRASS), 8.0)
    assert v_asphalt > v_dirt + 5 > v_grass + 10

    def yaw_rate_at_40kmh(surface):
        car = _car(straight_track(surface=surface, road_width=200.0))
        while car.u < 40 / 3.6:
            car.run(True, False, 0, 1)
        car.run(False, False, 1, 60)  # coast at full left lock
        return abs(car.r), car.sliding

    r_asphalt, slide_asphalt = yaw_rate_at_40kmh(None)
    r_grass, slide_grass = yaw_rate_at_40kmh(SURFACE_GRASS)
    r_other, slide_other = yaw_rate_at_40kmh(SURFACE_OTHER)
    assert r_asphalt > r_grass > r_other
    assert any(slide_other) and not any(slide_asphalt)


def test_surface_under_each_wheel_is_reported():
    """A patch under the left half of the road is reported for the left wheels only."""
    track = Track("half", straight_line(300.0), road_width=16.0,
                  surface_patches=[SurfacePatch(0.0, 300.0, 0.0, 8.0, SURFACE_DIRT)])
    car = CarPhysics(track, sim_geometry(track))
    car.reset(20, 0.0, 0.0)  # centred: left wheels on dirt (lateral > 0 is left)
    assert car.surfaces == [SURFACE_DIRT, SURFACE_ASPHALT, SURFACE_DIRT, SURFACE_ASPHALT]
    car.reset(20, -5.0, 0.0)
    assert car.surfaces == [SURFACE_ASPHALT] * 4
    car.reset(20, 10.0, 0.0)  # on the run-off
    assert car.surfaces == [SURFACE_GRASS] * 4


def test_turbo_pad_boosts():
    """Crossing a turbo pad accelerates the car more than plain asphalt."""
    plain = straight_track(800.0)
    turbo = Track("turbo", plain.reference_line, road_width=16.0,
                  turbo_pads=[SurfacePatch(30.0, 36.0, -8.0, 8.0, SURFACE_TURBO)])
    assert _speed_after(turbo, 5.0) > _speed_after(plain, 5.0) + 5.0


def test_brakes_stop_and_reverse_drives_backwards():
    """Braking stops the car quickly; holding brake at a standstill reverses."""
    car = _car(straight_track(2000.0))
    car.run(True, False, 0, 400)
    v0 = car.u
    s0 = car.s
    ticks = 0
    while car.u > 0.5:
        car.run(False, True, 0, 1)
        ticks += 1
    stopping = car.s - s0
    assert ticks / 100 < v0 / 10.0  # average deceleration above 10 m/s^2
    assert stopping < v0 * v0 / (2 * 10.0)
    car.run(False, True, 0, 200)
    assert car.u < -3.0 and car.gear == 0


def test_walls_keep_the_car_on_the_track():
    """Steering hard into the side never takes the car beyond the wall; hitting it costs speed."""
    track = straight_track(2000.0)
    car = _car(track)
    car.run(True, False, 0, 300)
    v_before = car.u
    geo = sim_geometry(track)
    for _ in range(300):
        car.run(True, False, 1, 1)
        assert abs(car.lat) <= geo.wall_distance - car.car.body_half_width + 1e-6
    assert car.wall_hits > 0 and math.hypot(car.u, car.w) < v_before


def test_elevation_follows_the_road_and_a_crest_launches_the_car():
    """The car's height follows a slope; a sharp crest at speed makes it fly (no ground contact), then land."""
    n = 2400
    z = np.arange(n) * 0.5
    y = np.where(z < 300.0, 10.0 + 0.15 * z, 55.0 - 0.4 * (z - 300.0))  # climb, then a steep drop
    y = np.maximum(y, 0.0)
    line = np.stack([np.zeros(n), y, z], axis=1)
    car = _car(Track("crest", line, road_width=16.0))
    car.run(True, False, 0, 300)
    assert not car.airborne and abs(car.y - (10.0 + 0.15 * car.s)) < 0.5
    assert car.pitch > 0.1
    flew = landed = False
    for _ in range(1500):
        car.run(True, False, 0, 1)
        flew |= car.airborne
        landed |= flew and not car.airborne
    assert flew and landed


def _gate_track() -> Track:
    """A straight 400 m road (16 m wide, 6 m of run-off each side: barriers 14 m from the line), one
    checkpoint gate at 150 m and the finish at 400 m."""
    track = straight_track(400.0)
    track.checkpoint_s = [150.0]
    return track


def _drive_straight_across_the_gates(lateral: float, walls_moved_out_m: float = 0.0) -> CarPhysics:
    """Full throttle straight along the line, ``lateral`` m left of it, past both gates; with
    ``walls_moved_out_m`` the walls stand that much further out than the track's barriers."""
    track = _gate_track()
    geo = sim_geometry(track)
    if walls_moved_out_m:
        geo = dataclasses.replace(geo, wall_distance=geo.wall_distance + walls_moved_out_m)
    car = CarPhysics(track, geo)
    car.reset(0, lateral, 0.0)
    car.run(True, False, 0, 2500)
    assert car.s > track.length_m and abs(car.lat - lateral) < 0.5  # it drove past the finish, on its line
    return car


@pytest.mark.parametrize("lateral", [0.0, 12.0, -12.0], ids=["on_the_line", "2m_inside_left_barrier",
                                                             "2m_inside_right_barrier"])
def test_gates_trigger_across_the_whole_width_between_the_barriers(lateral):
    """As a checkpoint or finish block of the game, a gate counts a car that crosses it anywhere
    between the barriers: 2 m inside them (12 m off the line, on the run-off) the checkpoint and the
    finish count. (The gates reached only 11.5 m from the line: the agent's fastest lines, against
    the outer wall, went round them and most races ended at a missed gate.)"""
    car = _drive_straight_across_the_gates(lateral)
    assert len(car.checkpoint_times_ms) == 1 and car.next_checkpoint == 1
    assert car.finished


def test_gates_do_not_count_a_car_outside_the_barriers():
    """A car that passes beside the gates outside the barriers (the walls moved out of its way)
    counts neither the checkpoint nor the finish; inside them it still counts both."""
    outside = _drive_straight_across_the_gates(16.0, walls_moved_out_m=10.0)
    assert outside.checkpoint_times_ms == [] and not outside.finished
    inside = _drive_straight_across_the_gates(12.0, walls_moved_out_m=10.0)
    assert len(inside.checkpoint_times_ms) == 1 and inside.finished


def test_every_builtin_track_gate_spans_road_and_run_off():
    """On every built-in track the gates span the road and its run-off up to the walls, so no line
    the car can drive passes beside a gate."""
    from environments.trackmania.tracks import BUILTIN_TRACK_NAMES, get_track

    for name in BUILTIN_TRACK_NAMES:
        track = get_track(name)
        geo = sim_geometry(track)
        assert geo.gate_half_width == 0.5 * track.road_width + track.runoff_width == geo.wall_distance, name