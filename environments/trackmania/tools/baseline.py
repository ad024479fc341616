"""The classical driver: pure-pursuit steering on the reference line and a quasi-steady-state speed profile.

Speed profile (computed once per track):
  1. curvature kappa(s) of the reference line (smoothed over a few metres);
  2. v_max(s) from lateral grip (surface grip x g x downforce factor) and the steering lock;
  3. a backward pass (braking limit) and a forward pass (engine acceleration limit) give the speed
     the car can actually carry; the forward pass also predicts the race time.
Control (per action): steer towards the line point one look-ahead distance ahead (pure pursuit),
binary steering modulated by a sigma-delta accumulator; accelerate below the profile, brake above.

The shipped margins (:class:`DriverMargins`: grip 0.8, braking 0.7, look-ahead gain 0.45 s) are
safe everywhere; :func:`tune_baseline` (``rulka baseline --tune``) searches them per track for the
fastest finishing race: the tuned driver is the reference the benches compare the agent with.
The racing-line driver (racing_line.py) plans its own line within the road and drives it with this
driver's control.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from environments.trackmania.actions import inputs_to_action
from environments.trackmania.backend import CarState
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.sim.car_parameters import CarParameters
from environments.trackmania.sim.surfaces import SURFACE_GRIP
from environments.trackmania.track import Track
from environments.trackmania.tracks import resolve_track

#: Half-window of the curvature estimate, m.
CURVATURE_HALF_WINDOW_M = 4.0
#: The profile keeps this fraction of the grip limit.
GRIP_SAFETY = 0.8
#: Braking deceleration used by the profile, fraction of the grip limit.
BRAKE_SAFETY = 0.7
#: Pure-pursuit look-ahead: clip(gain * speed, min, max), m.
LOOKAHEAD_GAIN_S, LOOKAHEAD_MIN_M, LOOKAHEAD_MAX_M = 0.45, 6.0, 30.0
#: How far ahead (in seconds of travel) the speed target is read, s.
SPEED_PREVIEW_S = 0.3
#: Brake when faster than the target by this much, m/s.
BRAKE_MARGIN_MS = 1.0


@dataclass(frozen=True)
class DriverMargins:
    """The classical driver's margins: fraction of the grip limit the profile keeps, fraction of the
    braking limit it plans with, and the pure-pursuit look-ahead gain (s of travel)."""

    grip_safety: float = GRIP_SAFETY
    brake_safety: float = BRAKE_SAFETY
    lookahead_gain_s: float = LOOKAHEAD_GAIN_S

    def __str__(self) -> str:
        return (f"grip {self.grip_safety:.2f}, brake {self.brake_safety:.2f}, "
                f"look-ahead {self.lookahead_gain_s:.2f} s")


@dataclass
class SpeedProfile:
    """Per raw-line point: arc length s (m), curvature (1/m), grip-limited v_max and achievable speed (m/s)."""

    s: np.ndarray
    curvature: np.ndarray
    v_max: np.ndarray
    v_profile: np.ndarray
    predicted_time_s: float


def engine_acceleration(car: CarParameters, v: float) -> float:
    """Full-throttle acceleration at speed ``v`` in the automatic gearbox's gear (drag included), m/s^2."""
    gear = 1
    while gear < len(car.gear_top_speed) - 1 and v >= car.gear_top_speed[gear] * car.rpm_upshift / car.rpm_max:
        gear += 1
    rpm = max(car.rpm_idle, min(car.rpm_max, v / car.gear_top_speed[gear] * car.rpm_max))
    if rpm <= car.rpm_torque_peak_end:
        torque = 1.0
    else:
        f = (rpm - car.rpm_torque_peak_end) / (car.rpm_max - car.rpm_torque_peak_end)
        torque = 1.0 - (1.0 - car.torque_at_rpm_max) * min(f, 1.0)
    return car.gear_acceleration[gear] * torque - car.aero_drag * v * v - car.rolling_resistance


_engine_acceleration = engine_acceleration  # the name before the racing-line driver shared it


#: The steering lock must reach this much more than the curvature (room to correct).
STEER_LOCK_HEADROOM = 1.1


def steering_lock_speed(car: CarParameters, curvature: np.ndarray) -> np.ndarray:
    """(N,) the highest speed (m/s) at which the steering lock, ``tan(steer_max / (1 + v / scale)) / L``,
    still turns :data:`STEER_LOCK_HEADROOM` x ``curvature`` (N,) 1/m; inf where any speed does."""
    v_grid = np.linspace(0.0, car.gear_top_speed[-1], 400)
    kappa_lock = np.tan(car.steer_max / (1.0 + v_grid / car.steer_speed_scale)) / car.wheelbase
    idx = np.searchsorted(-kappa_lock, -curvature * STEER_LOCK_HEADROOM)  # first speed whose lock is below the need
    v_steer = v_grid[np.clip(idx, 0, len(v_grid) - 1)]
    return np.where(idx >= len(v_grid), np.inf, v_steer)


def speed_profile(track: Track, car: CarParameters | None = None, margins: DriverMargins | None = None
                  ) -> SpeedProfile:
    """The quasi-steady-state speed profile of ``track`` for ``car`` within ``margins``."""
    car = car or CarParameters()
    margins = margins or DriverMargins()
    line = track.reference_line
    s = track.arc_length
    n = len(line)
    spacing = s[-1] / max(n - 1, 1)
    k = max(1, int(round(CURVATURE_HALF_WINDOW_M / spacing)))
    t = track.tangent_xz
    heading = np.unwrap(np.arctan2(t[:, 0], t[:, 1]))
    hi = np.minimum(np.arange(n) + k, n - 1)
    lo = np.maximum(np.arange(n) - k, 0)
    curvature = np.abs(heading[hi] - heading[lo]) / np.maximum(s[hi] - s[lo], 1e-6)
    # a corner is as tight as its tightest part nearby
    curvature = np.max(np.stack([np.roll(curvature, j) for j in range(-k, k + 1)]), axis=0)
    grip = np.array([SURFACE_GRIP[track.surface_at(i, 0.0)] for i in range(n)]) * margins.grip_safety
    g = car.gravity
    denom = curvature - grip * g * car.downforce
    with np.errstate(divide="ignore"):
        v_grip = np.where(denom > 1e-9, np.sqrt(grip * g / np.maximum(denom, 1e-9)), np.inf)
    v_steer = steering_lock_speed(car, curvature)
    v_max = np.minimum(np.minimum(v_grip, v_steer), car.gear_top_speed[-1])
    # backward pass: braking limit
    v = v_max.copy()
    ds = np.diff(s)
    for i in range(n - 2, -1, -1):
        a_b = margins.brake_safety * min(car.brake_deceleration, grip[i] * g * (1 + car.downforce * v[i + 1] ** 2))
        v[i] = min(v[i], math.sqrt(v[i + 1] ** 2 + 2 * a_b * ds[i]))
    # forward pass: acceleration limit from a standing start; integrate the time
    v[0] = 0.0
    time_s = 0.0
    for i in range(n - 1):
        a = max(engine_acceleration(car, v[i]), 0.0)
        v_next = min(v[i + 1], math.sqrt(v[i] ** 2 + 2 * a * ds[i]))
        v[i + 1] = v_next
        time_s += ds[i] / max(0.5 * (v[i] + v_next), 0.5)
    return SpeedProfile(s=s, curvature=curvature, v_max=v_max, v_profile=v, predicted_time_s=time_s)


class BaselineDriver:
    """Drives a track from :class:`CarState` alone (works with any backend)."""

    def __init__(self, track: Track, car: CarParameters | None = None, margins: DriverMargins | None = None) -> None:
        self.track = track
        self.car = car or CarParameters()
        self.margins = margins or DriverMargins()
        self.profile = speed_profile(track, self.car, self.margins)
        line = track.reference_line
        self._follow(line[:, [0, 2]], track.arc_length, self.profile.v_profile)

    def _follow(self, xz: np.ndarray, s: np.ndarray, v_target: np.ndarray) -> None:
        """Drive along the path ``xz`` (N, 2) m, of arc length ``s`` (N,) m, at the speed ``v_target`` (N,) m/s."""
        self._x = xz[:, 0].tolist()
        self._z = xz[:, 1].tolist()
        self._s = s
        self._v = v_target
        self._n = len(xz)
        self._spacing = float(self._s[-1] / max(self._n - 1, 1))
        self._idx = 0
        self._sigma = 0.0

    def reset(self) -> None:
        """Start of a race."""
        self._idx = 0
        self._sigma = 0.0

    def _project(self, x: float, z: float) -> int:
        i, xs, zs, last = self._idx, self._x, self._z, self._n - 1
        d = (xs[i] - x) ** 2 + (zs[i] - z) ** 2
        while i < last and (xs[i + 1] - x) ** 2 + (zs[i + 1] - z) ** 2 < d:
            i += 1
            d = (xs[i] - x) ** 2 + (zs[i] - z) ** 2
        while i > 0 and (xs[i - 1] - x) ** 2 + (zs[i - 1] - z) ** 2 < d:
            i -= 1
            d = (xs[i] - x) ** 2 + (zs[i] - z) ** 2
        self._idx = i
        return i

    def _may_accelerate(self, v: float, i: int) -> bool:
        """Whether the car at forward speed ``v`` (m/s) at path point ``i`` may accelerate (always, here)."""
        return True

    def act(self, state: CarState) -> int:
        """The action (0..11) for the car in ``state``."""
        car = self.car
        x, z = float(state.position[0]), float(state.position[2])
        rot = state.rotation
        fx, fz = float(rot[0, 2]), float(rot[2, 2])
        norm = math.hypot(fx, fz) or 1.0
        fx, fz = fx / norm, fz / norm
        v = float(state.linear_velocity[0] * fx + state.linear_velocity[2] * fz)
        i = self._project(x, z)

        # --- steering: pure pursuit
        lookahead = min(max(self.margins.lookahead_gain_s * abs(v), LOOKAHEAD_MIN_M), LOOKAHEAD_MAX_M)
        j = i + int(round(lookahead / self._spacing))
        if j < self._n:
            tx, tz = self._x[j], self._z[j]
        else:  # past the end: extend the last segment
            ex, ez = self._x[-1] - self._x[-2], self._z[-1] - self._z[-2]
            extra = (j - self._n + 1)
            tx, tz = self._x[-1] + ex * extra, self._z[-1] + ez * extra
        dx, dz = tx - x, tz - z
        ahead = dx * fx + dz * fz
        left = dx * fz - dz * fx  # left = (fz, -fx)
        alpha = math.atan2(left, ahead)
        kappa_des = 2.0 * math.sin(alpha) / max(math.hypot(dx, dz), 1e-3)
        vs = max(abs(v), 1.0)
        kappa_lock = math.tan(car.steer_max / (1.0 + vs / car.steer_speed_scale)) / car.wheelbase
        kappa_grip = SURFACE_GRIP[0] * car.gravity * (1 + car.downforce * vs * vs) / (vs * vs)
        duty = max(-1.0, min(1.0, kappa_des / min(kappa_lock, kappa_grip)))
        if v < 0:
            duty = -duty
        if self._sigma * duty < 0:
            self._sigma = 0.0
        self._sigma += duty
        steer = 0
        if self._sigma >= 0.5:
            steer, self._sigma = 1, self._sigma - 1.0
        elif self._sigma <= -0.5:
            steer, self._sigma = -1, self._sigma + 1.0

        # --- speed: follow the profile a little ahead
        k_end = min(self._n, i + 1 + int((abs(v) * SPEED_PREVIEW_S + 2.0) / self._spacing))
        target = float(np.min(self._v[i:k_end])) if k_end > i else float(self._v[-1])
        target = max(target, 5.0)
        if i >= self._n - 2:
            target = car.gear_top_speed[-1]
        accelerate = v < target and self._may_accelerate(v, i)
        brake = v > target + BRAKE_MARGIN_MS
        if brake:
            accelerate = False
        return inputs_to_action(accelerate, brake, steer > 0, steer < 0)


@dataclass
class BaselineResult:
    """Outcome of one classical-driver race."""

    track: str
    finished: bool
    race_time_ms: int
    steps: int
    predicted_time_s: float
    end_reason: str
    infos: list[dict[str, Any]] = field(default_factory=list)

    @property
    def race_time_s(self) -> float:
        """Race time, s."""
        return self.race_time_ms / 1000.0


def run_baseline(
    track_name: str | Track = "short",
    params: TrackManiaEnvironmentParameters | None = None,
    seed: int = 0,
    render: bool = False,
    max_steps: int | None = None,
    margins: DriverMargins | None = None,
) -> BaselineResult:
    """Drive ``track_name`` with the classical driver in the simulator; returns the race time."""
    from environments.trackmania.env import TrackManiaEnv

    track = resolve_track(track_name)
    env = TrackManiaEnv(params=params, track=track, backend_options={"render": render})
    driver = BaselineDriver(track, margins=margins)
    obs, info = env.reset(seed=seed)
    limit = max_steps or (env.params.cutoff_rollout_if_race_not_finished_within_duration_ms // env.params.ms_per_action
                          + 1)
    steps = 0
    for steps in range(1, limit + 1):
        obs, _, terminated, truncated, info = env.step(driver.act(env.state))
        if terminated or truncated:
            break
    env.close()
    return BaselineResult(track=track.name, finished=bool(info["finished"]), race_time_ms=int(info["race_time_ms"]),
                          steps=steps, predicted_time_s=driver.profile.predicted_time_s,
                          end_reason=info["end_reason"])


#: The search grid of :func:`tune_baseline`: a coarse pass, then a finer one around the best.
TUNE_GRIP = tuple(round(0.8 + 0.1 * i, 2) for i in range(6))  # 0.8 .. 1.3
TUNE_BRAKE = tuple(round(0.7 + 0.1 * i, 2) for i in range(6))  # 0.7 .. 1.2
TUNE_LOOKAHEAD = (0.35, 0.45, 0.55)
TUNE_FINE_STEP = 0.05


@dataclass
class TuneResult:
    """The fastest finishing setting found, with the shipped driver's result for comparison."""

    track: str
    margins: DriverMargins
    race_time_s: float
    shipped_time_s: float | None
    shipped_finished: bool
    races: int


def tune_baseline(track_name: str | Track = "short", seed: int = 0,
                  progress: Callable[[str], None] | None = None) -> TuneResult:
    """Search the driver's margins on ``track_name`` for the fastest finishing race.

    A coarse grid (grip 0.8-1.3, brake 0.7-1.2 in steps of 0.1, look-ahead gain 0.35/0.45/0.55 s),
    then every neighbour at +-0.05 grip / brake / look-ahead of the best setting. Raises ValueError
    when no setting finishes.
    """
    track = resolve_track(track_name)
    tried: dict[DriverMargins, BaselineResult] = {}

    def race(margins: DriverMargins) -> None:
        if margins not in tried:
            tried[margins] = run_baseline(track, seed=seed, margins=margins)

    def best() -> DriverMargins | None:
        done = [(r.race_time_ms, m.grip_safety, m.brake_safety, m.lookahead_gain_s, m)
                for m, r in tried.items() if r.finished]
        return min(done)[-1] if done else None

    shipped = DriverMargins()
    race(shipped)
    for grip, brake, gain in itertools.product(TUNE_GRIP, TUNE_BRAKE, TUNE_LOOKAHEAD):
        race(DriverMargins(grip, brake, gain))
    coarse = best()
    if progress is not None and coarse is not None:
        progress(f"coarse grid: {len(tried)} races, best {tried[coarse].race_time_s:.2f} s ({coarse})")
    if coarse is None:
        raise ValueError(f"no setting of the classical driver finishes {track.name}")
    for dg, db, dl in itertools.product((-TUNE_FINE_STEP, 0.0, TUNE_FINE_STEP), repeat=3):
        race(replace(coarse, grip_safety=round(coarse.grip_safety + dg, 3),
                     brake_safety=round(coarse.brake_safety + db, 3),
                     lookahead_gain_s=round(coarse.lookahead_gain_s + dl, 3)))
    found = best()
    assert found is not None
    return TuneResult(track=track.name, margins=found, race_time_s=tried[found].race_time_s,
                      shipped_time_s=tried[shipped].race_time_s if tried[shipped].finished else None,
                      shipped_finished=tried[shipped].finished, races=len(tried))
