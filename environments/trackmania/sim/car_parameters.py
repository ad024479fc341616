"""Constants of the simulated car (a TrackMania Stadium-like car): engine, gears, brakes, steering, body."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CarParameters:
    """Physical constants of the simulated car. Units in each name's comment."""

    gravity: float = 9.81  # m/s^2
    wheelbase: float = 2.6  # m, front to rear axle
    half_track: float = 0.9  # m, centre to wheel, laterally
    half_wheelbase: float = 1.3  # m, centre to axle
    body_half_width: float = 1.0  # m, for wall contact
    # engine and gearbox: gear 0 is reverse, 1..5 forward
    gear_top_speed: tuple[float, ...] = (11.0, 17.5, 29.0, 43.0, 60.0, 84.0)  # m/s at rpm_max, per gear
    gear_acceleration: tuple[float, ...] = (5.0, 15.0, 11.0, 8.0, 5.8, 4.3)  # m/s^2 at full torque, per gear
    rpm_max: float = 11000.0  # rpm
    rpm_idle: float = 1000.0  # rpm
    rpm_torque_peak_end: float = 8500.0  # rpm, torque falls linearly above this
    torque_at_rpm_max: float = 0.6  # fraction of peak torque at rpm_max
    rpm_upshift: float = 10500.0  # rpm
    downshift_speed_fraction: float = 0.6  # downshift below this fraction of the lower gear's top speed
    shift_time: float = 0.08  # s, engine force reduced while shifting
    shift_torque_fraction: float = 0.3  # engine force kept while shifting
    # resistances
    aero_drag: float = 4.0e-4  # 1/m, deceleration = aero_drag * v^2
    rolling_resistance: float = 0.15  # m/s^2
    engine_brake: float = 0.6  # m/s^2 when coasting
    downforce: float = 1.2e-4  # s^2/m^2, grip multiplier = 1 + downforce * v^2
    # brakes and reverse
    brake_deceleration: float = 16.0  # m/s^2 (before the grip limit)
    reverse_top_speed: float = 11.0  # m/s
    # steering
    steer_max: float = 0.55  # rad at standstill
    steer_speed_scale: float = 18.0  # m/s, max angle = steer_max / (1 + v / scale)
    steer_rate: float = 5.0  # rad/s
    yaw_time_constant: float = 0.06  # s
    min_lateral_grip_fraction: float = 0.45  # of the grip left for cornering at full braking / traction
    # turbo
    turbo_acceleration: float = 7.0  # m/s^2
    turbo_duration: float = 1.0  # s
    # walls
    wall_restitution: float = 0.1  # fraction of the normal speed bounced back
    wall_friction: float = 0.4  # tangential speed lost per unit of normal speed / speed
    wall_align: float = 0.3  # fraction of the angle into the wall turned away per tick of contact
    # suspension (damper absorb values reported to the agent)
    damper_rest: float = 0.06  # m of compression at rest
    damper_load_gain: float = 0.35  # fractional compression change per g of load transfer
    landing_impulse_gain: float = 0.02  # m of extra compression per m/s of landing speed
    landing_impulse_decay: float = 0.9  # per tick
    # the car leaves the ground when the road's downward acceleration exceeds gravity (+ downforce) by this, m/s^2
    airborne_acceleration_margin: float = 3.0
