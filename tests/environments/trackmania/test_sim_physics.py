"""Simulator physics: speeds, gears, surfaces, brakes and reverse, turbo, walls, elevation and flight."""
from __future__ import annotations

import math

import numpy as np

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


def test_gates_count_wherever_zone_tracking_lets_progress_pass():
    """Checkpoint and finish gates reach (almost) the tracker's 12 m checkpoint radius or the walls,
    so a car that earns progress past a checkpoint has also counted it and can finish."""
    from environments.trackmania.sim.geometry import sim_geometry
    from environments.trackmania.tracks import BUILTIN_TRACK_NAMES, get_track
    from environments.trackmania.zones import REAL_CHECKPOINT_RADIUS_M

    for name in BUILTIN_TRACK_NAMES:
        track = get_track(name)
        geo = sim_geometry(track)
        assert geo.gate_half_width >= min(geo.wall_distance, REAL_CHECKPOINT_RADIUS_M - 0.5), name
