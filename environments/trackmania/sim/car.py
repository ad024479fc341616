"""The simulated car: a single-track (bicycle) model with per-wheel surface grip, stepped at 100 Hz.

State is kept in plain Python floats (no per-tick numpy work). Coordinates follow backend.py:
world x, y (up), z; heading ``psi`` rotates about +y, forward = (sin psi, 0, cos psi),
left = (cos psi, 0, -sin psi); positive yaw rate turns left.

Model, per tick of ``dt`` seconds:
  * surfaces under the four wheels (road patches, turbo pads, run-off grass) set the grip and
    rolling drag of each axle; touching a turbo pad starts a boost;
  * longitudinal: engine (per-gear acceleration x torque curve of rpm), automatic gearbox, brakes,
    reverse, aero drag, rolling drag, slope (gravity along the road), all capped by the traction
    limit (grip x g x downforce factor);
  * yaw: kinematic yaw rate u tan(delta) / L, capped by the front axle's lateral grip (understeer);
  * lateral: the tyres cancel side slip up to the lateral grip left by the friction circle;
    beyond it the car slides (drifts);
  * elevation: the car follows the road's height; at a crest steeper than gravity it flies
    (ballistic) and lands later; no grip in the air;
  * walls at road half-width + run-off stop the car's outward motion and scrub speed.
"""
from __future__ import annotations

import math

from environments.trackmania.backend import N_WHEELS, SURFACE_GRASS
from environments.trackmania.sim.car_parameters import CarParameters
from environments.trackmania.sim.geometry import SimTrackGeometry
from environments.trackmania.sim.surfaces import SURFACE_BOOST, SURFACE_DRAG, SURFACE_GRIP
from environments.trackmania.track import Track

#: Gearbox states reported to the agent (the game's encoding).
GEARBOX_IDLE, GEARBOX_SHIFT_UP, GEARBOX_SHIFT_DOWN = 0, 1, 2
#: Gear used while reversing.
REVERSE_GEAR = 0
#: Wheel offsets in the car frame (forward sign, left sign), order FL, FR, RL, RR.
_WHEEL_SIGNS: tuple[tuple[float, float], ...] = ((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0))
#: Below this speed the car counts as standing still, m/s.
_STILL = 0.5
#: Cap of the reported time since the last gear change, s.
_SINCE_SHIFT_CAP = 1.0


class CarPhysics:
    """One car on one track. Call :meth:`reset`, then :meth:`run` once per action."""

    def __init__(self, track: Track, geometry: SimTrackGeometry, car: CarParameters | None = None,
                 dt: float = 0.01) -> None:
        self.track = track
        self.geo = geometry
        self.car = car or CarParameters()
        self.dt = dt
        self.surfaces = [0] * N_WHEELS
        self.sliding = [False] * N_WHEELS
        self.damper = [0.0] * N_WHEELS
        self.reset(0, 0.0, 0.0)

    # ------------------------------------------------------------------ reset
    def reset(self, index: int, lateral: float, heading_offset: float) -> None:
        """Stand still at raw-line point ``index``, ``lateral`` m left of it, heading along the line
        plus ``heading_offset`` rad; race time 0."""
        g = self.geo
        self.idx = index
        self.x = g.x[index] + lateral * g.nx[index]
        self.z = g.z[index] + lateral * g.nz[index]
        self.y = g.y[index]
        self.psi = math.atan2(g.tx[index], g.tz[index]) + heading_offset
        self.pitch = math.atan(g.slope[index])
        self.u = self.w = self.vy = self.r = self.delta = 0.0
        self.vx = self.vz = 0.0
        self.along = 0.0
        self.gear = 1
        self.rpm = self.car.rpm_idle
        self.gearbox_state = GEARBOX_IDLE
        self.shift_timer = 0.0
        self.since_shift = _SINCE_SHIFT_CAP
        self.turbo_timer = 0.0
        self.airborne = False
        self.landing = 0.0
        self.freewheeling = True
        self.time_ms = 0
        self.lat = lateral
        self.s = g.s[index]
        self.next_checkpoint = 0
        self.checkpoint_times_ms: list[int] = []
        self.finished = False
        self.wall_hits = 0
        for k in range(N_WHEELS):
            self.sliding[k] = False
        self._update_projection()
        self._update_surfaces()
        self._update_dampers(0.0, 0.0)

    # ------------------------------------------------------------------ helpers
    def _update_projection(self) -> None:
        """Hill-climb the nearest raw-line point from the last one; set lateral offset and arc length."""
        g = self.geo
        x, z, i = self.x, self.z, self.idx
        gx, gz = g.x, g.z
        last = g.n - 1
        d = (gx[i] - x) ** 2 + (gz[i] - z) ** 2
        while i < last:
            dn = (gx[i + 1] - x) ** 2 + (gz[i + 1] - z) ** 2
            if dn >= d:
                break
            i, d = i + 1, dn
        while i > 0:
            dp = (gx[i - 1] - x) ** 2 + (gz[i - 1] - z) ** 2
            if dp >= d:
                break
            i, d = i - 1, dp
        self.idx = i
        ex, ez = x - gx[i], z - gz[i]
        self.along = ex * g.tx[i] + ez * g.tz[i]
        self.lat = ex * g.nx[i] + ez * g.nz[i]
        self.s = g.s[i] + self.along

    def _road_height(self) -> tuple[float, float]:
        """Road height under the car (m), linear between raw-line points, and the slope dy/ds there."""
        g, i = self.geo, self.idx
        j = i + 1 if self.along >= 0.0 else i - 1
        if j < 0 or j >= g.n:
            return g.y[i] + g.slope[i] * self.along, g.slope[i]
        seg = g.s[j] - g.s[i]
        if seg == 0.0:
            return g.y[i], g.slope[i]
        frac = self.along / seg
        if frac > 1.0:
            frac = 1.0
        h = g.y[i] + (g.y[j] - g.y[i]) * frac
        return h, g.slope[i] + (g.slope[j] - g.slope[i]) * frac

    def _update_surfaces(self) -> None:
        """Surface under each wheel from the track's patches (road) or run-off grass (off road)."""
        g, car, track = self.geo, self.car, self.track
        i = self.idx
        sp, cp = math.sin(self.psi), math.cos(self.psi)
        # wheel offsets projected on the track's tangent / normal at point i
        f_t = sp * g.tx[i] + cp * g.tz[i]
        f_n = sp * g.nx[i] + cp * g.nz[i]
        l_t = cp * g.tx[i] - sp * g.tz[i]
        l_n = cp * g.nx[i] - sp * g.nz[i]
        a, b = car.half_wheelbase, car.half_track
        hw = g.half_width
        last = g.n - 1
        for k in range(N_WHEELS):
            fs, ls = _WHEEL_SIGNS[k]
            off_t = fs * a * f_t + ls * b * l_t
            lat = self.lat + fs * a * f_n + ls * b * l_n
            if lat > hw or lat < -hw:
                self.surfaces[k] = SURFACE_GRASS
            else:
                j = i + int(round((self.along + off_t) / g.mean_spacing))
                j = 0 if j < 0 else (last if j > last else j)
                self.surfaces[k] = track.surface_at(j, lat)

    def _update_dampers(self, a_long: float, a_lat: float) -> None:
        """Suspension compression per wheel from load transfer and landings (0 in the air), m."""
        car = self.car
        if self.airborne:
            for k in range(N_WHEELS):
                self.damper[k] = 0.0
            return
        ax = a_long / car.gravity * car.damper_load_gain
        ay = a_lat / car.gravity * car.damper_load_gain
        for k in range(N_WHEELS):
            fs, ls = _WHEEL_SIGNS[k]
            # accelerating loads the rear (fs < 0); turning left (a_lat > 0) loads the right side (ls < 0)
            self.damper[k] = max(0.0, car.damper_rest * (1.0 - fs * ax - ls * ay) + self.landing)

    def _engine_acceleration(self, gear: int, rpm: float) -> float:
        car = self.car
        if rpm <= car.rpm_torque_peak_end:
            torque = 1.0
        else:
            f = (rpm - car.rpm_torque_peak_end) / (car.rpm_max - car.rpm_torque_peak_end)
            torque = 1.0 - (1.0 - car.torque_at_rpm_max) * min(f, 1.0)
        return car.gear_acceleration[gear] * torque

    # ------------------------------------------------------------------ stepping
    def run(self, accelerate: bool, brake: bool, steer: int, n_ticks: int) -> None:
        """Hold the inputs for ``n_ticks`` ticks. ``steer``: +1 left, -1 right, 0 straight."""
        for _ in range(n_ticks):
            self._tick(accelerate, brake, steer)

    def _tick(self, accelerate: bool, brake: bool, steer: int) -> None:  # noqa: C901 (one physics step)
        car, g, dt = self.car, self.geo, self.dt
        grav = car.gravity
        u, w, r = self.u, self.w, self.r

        # --- surfaces and grip
        self._update_surfaces()
        s0, s1, s2, s3 = self.surfaces
        mu_front = 0.5 * (SURFACE_GRIP[s0] + SURFACE_GRIP[s1])
        mu_rear = 0.5 * (SURFACE_GRIP[s2] + SURFACE_GRIP[s3])
        mu_all = 0.5 * (mu_front + mu_rear)
        surface_drag = 0.25 * (SURFACE_DRAG[s0] + SURFACE_DRAG[s1] + SURFACE_DRAG[s2] + SURFACE_DRAG[s3])
        on_ground = not self.airborne
        if on_ground and (SURFACE_BOOST[s0] or SURFACE_BOOST[s1] or SURFACE_BOOST[s2] or SURFACE_BOOST[s3]):
            self.turbo_timer = car.turbo_duration
        df = 1.0 + car.downforce * u * u
        traction = mu_all * grav * df

        # --- gearbox (automatic)
        gear = self.gear
        if u < -_STILL:
            gear = REVERSE_GEAR
        elif gear == REVERSE_GEAR and u >= -_STILL and accelerate:
            gear = 1
        if gear >= 1:
            if gear < len(car.gear_top_speed) - 1 and self.rpm >= car.rpm_upshift and accelerate:
                gear += 1
                self.gearbox_state, self.shift_timer, self.since_shift = GEARBOX_SHIFT_UP, car.shift_time, 0.0
            elif gear > 1 and u < car.gear_top_speed[gear - 1] * car.downshift_speed_fraction:
                gear -= 1
                self.gearbox_state, self.shift_timer = GEARBOX_SHIFT_DOWN, 0.5 * car.shift_time
                self.since_shift = 0.0
        if self.shift_timer > 0.0:
            self.shift_timer -= dt
            if self.shift_timer <= 0.0:
                self.gearbox_state = GEARBOX_IDLE
        self.since_shift = min(self.since_shift + dt, _SINCE_SHIFT_CAP)
        self.gear = gear

        # --- longitudinal command
        wheelspin = locked = False
        self.freewheeling = not accelerate and not brake
        if not on_ground:
            a_cmd = 0.0
        elif brake and u > _STILL:
            a_cmd = -car.brake_deceleration
        elif brake and not accelerate:  # reverse
            a_cmd = -car.gear_acceleration[REVERSE_GEAR] if u > -car.reverse_top_speed else 0.0
        elif brake:  # both pedals at a standstill: hold
            a_cmd = -u / dt
        elif accelerate:
            if u < -_STILL:
                a_cmd = car.brake_deceleration
            else:
                a_cmd = self._engine_acceleration(max(gear, 1), self.rpm)
                if self.shift_timer > 0.0:
                    a_cmd *= car.shift_torque_fraction
        else:
            a_cmd = -car.engine_brake if u > 0 else (car.engine_brake if u < 0 else 0.0)
        if a_cmd > traction:
            a_cmd, wheelspin = traction, True
        elif a_cmd < -traction:
            a_cmd, locked = -traction, True
        if self.turbo_timer > 0.0:
            self.turbo_timer -= dt
            if on_ground:
                a_cmd += car.turbo_acceleration
        resist = car.aero_drag * u * abs(u)
        if on_ground:
            if u > 0.05:
                resist += car.rolling_resistance + surface_drag
            elif u < -0.05:
                resist -= car.rolling_resistance + surface_drag
            slope_acc = -grav * math.sin(self.pitch)
        else:
            slope_acc = 0.0
        a_long = a_cmd - resist + slope_acc

        # --- steering and yaw
        delta_target = steer * car.steer_max / (1.0 + abs(u) / car.steer_speed_scale)
        step = car.steer_rate * dt
        if self.delta < delta_target - step:
            self.delta += step
        elif self.delta > delta_target + step:
            self.delta -= step
        else:
            self.delta = delta_target
        used = min(1.0, abs(a_cmd) / traction) if traction > 0 else 1.0
        lat_fraction = max(car.min_lateral_grip_fraction, math.sqrt(max(0.0, 1.0 - used * used)))
        front_sliding = rear_sliding = False
        if on_ground:
            r_target = u * math.tan(self.delta) / car.wheelbase
            a_front = mu_front * grav * df * lat_fraction
            if abs(u * r_target) > a_front:
                r_target = math.copysign(a_front / max(abs(u), 0.1), r_target)
                front_sliding = True
            r += (r_target - r) * min(1.0, dt / car.yaw_time_constant)
            a_cap = 0.5 * (a_front + mu_rear * grav * df * lat_fraction)
            a_req = u * r - w / dt
            if a_req > a_cap:
                a_lat, rear_sliding = a_cap, True
            elif a_req < -a_cap:
                a_lat, rear_sliding = -a_cap, True
            else:
                a_lat = a_req
        else:
            a_lat = 0.0

        # --- integrate the planar motion
        s_before = self.s
        u_new = u + (a_long + r * w) * dt
        if on_ground and not accelerate and (u > 0.0 > u_new or u < 0.0 < u_new) and abs(a_cmd) <= car.engine_brake:
            u_new = 0.0  # drag stops the car, it does not reverse it
        w = w + (a_lat - u * r) * dt
        u = u_new
        self.psi += r * dt
        sp, cp = math.sin(self.psi), math.cos(self.psi)
        vx = u * sp + w * cp
        vz = u * cp - w * sp
        self.x += vx * dt
        self.z += vz * dt
        self._update_projection()

        # --- walls
        limit = g.wall_distance - car.body_half_width
        if self.lat > limit or self.lat < -limit:
            i = self.idx
            side = 1.0 if self.lat > 0 else -1.0
            push = self.lat - side * limit
            self.x -= push * g.nx[i]
            self.z -= push * g.nz[i]
            self.lat -= push
            v_n = vx * g.nx[i] + vz * g.nz[i]
            if v_n * side > 0.0:
                v_t = vx * g.tx[i] + vz * g.tz[i]
                v_t *= max(0.0, 1.0 - car.wall_friction * abs(v_n) / max(math.hypot(vx, vz), 1.0))
                v_n = -car.wall_restitution * v_n
                vx = v_t * g.tx[i] + v_n * g.nx[i]
                vz = v_t * g.tz[i] + v_n * g.nz[i]
                u = vx * sp + vz * cp
                w = vx * cp - vz * sp
                r *= 0.5
                self.wall_hits += 1
            heading_n = sp * g.nx[i] + cp * g.nz[i]
            if heading_n * side > 0.0:  # nose into the wall: glance off along it
                self.psi -= car.wall_align * math.asin(max(-1.0, min(1.0, heading_n)))

        # --- elevation, flight and landing (downforce pulls the car down like extra gravity)
        i = self.idx
        h, slope = self._road_height()
        g_down = grav * (1.0 + car.downforce * (u * u + w * w))
        if self.airborne:
            self.vy -= g_down * dt
            self.y += self.vy * dt
            if self.y <= h:
                impact = max(0.0, slope * u - self.vy)
                self.landing = min(0.1, car.landing_impulse_gain * impact)
                self.y, self.airborne = h, False
                self.vy = slope * (vx * g.tx[i] + vz * g.tz[i])
        else:
            vy_ground = slope * (vx * g.tx[i] + vz * g.tz[i])
            if (vy_ground - self.vy) / dt < -(g_down + car.airborne_acceleration_margin):
                # the road falls away faster than gravity (+ downforce) can pull the car: it flies
                self.airborne = True
                self.vy -= g_down * dt
                self.y += self.vy * dt
            else:
                self.y = h
                self.vy = vy_ground
        if not self.airborne:
            heading_along = sp * g.tx[i] + cp * g.tz[i]
            self.pitch = math.atan(g.slope[i] * heading_along)
        self.landing *= car.landing_impulse_decay

        # --- engine speed
        if gear == REVERSE_GEAR:
            rpm = abs(u) / car.gear_top_speed[REVERSE_GEAR] * car.rpm_max
        elif on_ground or not accelerate:
            rpm = u / car.gear_top_speed[gear] * car.rpm_max
        else:
            rpm = self.rpm + (car.rpm_max - self.rpm) * 0.05
        self.rpm = min(max(rpm, car.rpm_idle), car.rpm_max)

        # --- reported per-wheel values
        self.sliding[0] = self.sliding[1] = front_sliding or locked
        self.sliding[2] = self.sliding[3] = rear_sliding or wheelspin or locked
        self._update_dampers(a_long, a_lat)
        self.u, self.w, self.r = u, w, r
        self.vx, self.vz = vx, vz

        # --- race clock, checkpoints, finish
        self.time_ms += int(round(dt * 1000))
        # a gate counts when the car crosses its line between the barriers (within the gate's half-width)
        cps = g.checkpoint_s
        in_gate = -g.gate_half_width <= self.lat <= g.gate_half_width
        if in_gate and self.next_checkpoint < len(cps) and s_before < cps[self.next_checkpoint] <= self.s:
            self.checkpoint_times_ms.append(self.time_ms)
            self.next_checkpoint += 1
        if (in_gate and not self.finished and self.next_checkpoint >= len(cps)
                and s_before < g.finish_s <= self.s):
            self.finished = True
