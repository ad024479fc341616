"""The racing-line driver: it plans its own line between the road's edges and drives it at the car's limits.

Line (:func:`plan_racing_line`): the minimum-curvature line within the road. Every ~2 m of the
reference line the path may move sideways by an offset ``n_i`` (m, left positive) within the road
less ``edge_margin_m`` (and off the side patches of grass or slippery surface that do not span the
road); the offsets minimise the sum of the squared second differences of the path's points, a
bounded linear least-squares problem, solved by a primal active-set method on its pentadiagonal normal
equations (``scipy.linalg.solve_banded``: a few tenths of a second for a 1.3 km track, where
``scipy.optimize.lsq_linear`` took seconds on this ill-conditioned problem). The path is straight
between the knots (drawn at every reference-line point).

Speed (:func:`line_speed_profile`): the quasi-steady-state profile of that line (the classical
driver's model: lateral grip of the surface under the line x g x downforce, the steering lock,
braking limit; where the line turns, no faster than the car can cross a crest on the ground: a car
that takes off turning keeps its yaw rate in the air and lands sliding), with the engine, turbo pads
and slopes in the forward pass. The driver's speed target is the braking-limited speed; it accelerates
below it while the grip that full throttle leaves (the friction circle) still holds the line's
curvature. The forward pass predicts the race time. At ``grip_safety = brake_safety = 1`` that
prediction is the *speed-profile bound* of the line: what the car could do on it if it cornered and
braked at the model's limits everywhere.

Control: the classical driver's pure pursuit and sigma-delta steering, on the planned line.

:func:`tune_racing_line` searches the margins (edge margin, grip and braking fractions, look-ahead)
for the fastest finishing race without a wall contact with scipy's Nelder-Mead (bounded), from the
shipped margins. scipy is the ``driver`` extra (``pip install -e '.[driver]'``): only this driver needs it.
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from environments.trackmania.backend import SURFACE_ASPHALT
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.sim.car_parameters import CarParameters
from environments.trackmania.sim.geometry import sim_geometry
from environments.trackmania.sim.surfaces import SURFACE_BOOST, SURFACE_GRIP
from environments.trackmania.tools.baseline import (BaselineDriver, DriverMargins, engine_acceleration,
                                                    steering_lock_speed)
from environments.trackmania.track import Track
from environments.trackmania.tracks import resolve_track

#: Spacing of the planner's offsets along the reference line, m.
PLAN_SPACING_M = 2.0
#: Half-window of the planned line's curvature estimate, m.
LINE_CURVATURE_HALF_WINDOW_M = 3.0
#: The car starts within this distance of the reference line (the simulator's start jitter), m.
START_LATERAL_M = 0.5
#: Where the line turns tighter than this (1/m) the profile keeps the car on the ground over crests.
TURNING_CURVATURE = 1.0 / 150.0
#: Penalty (s) of a race that does not finish or touches a wall, plus 100 s per missing fraction of the track.
FAILED_RACE_S = 1000.0
#: The search space of :func:`tune_racing_line`: (low, high) per margin.
TUNE_BOUNDS: dict[str, tuple[float, float]] = {
    "edge_margin_m": (0.5, 6.0),
    "grip_safety": (0.6, 1.5),
    "brake_safety": (0.5, 1.3),
    "lookahead_gain_s": (0.2, 0.9),
}
#: Races :func:`tune_racing_line` may run (the optimiser's function evaluations).
TUNE_MAX_RACES = 80

_SCIPY_MISSING = ("the racing-line driver needs scipy (its line planner and its tuner): "
                  "pip install -e '.[driver]' (or pip install scipy)")


def _scipy(module: str):
    """``scipy.<module>``, or ImportError saying how to install scipy."""
    try:
        return importlib.import_module(f"scipy.{module}")
    except ImportError:
        raise ImportError(_SCIPY_MISSING) from None


@dataclass(frozen=True)
class RacingLineMargins:
    """The racing-line driver's margins: distance kept between the line (the car's centre) and the road's
    edge (m), fraction of the grip limit its profile keeps, fraction of the braking limit it plans with,
    and the pure-pursuit look-ahead gain (s of travel)."""

    edge_margin_m: float = 2.5
    grip_safety: float = 1.0
    brake_safety: float = 0.9
    lookahead_gain_s: float = 0.45

    def __str__(self) -> str:
        return (f"edge {self.edge_margin_m:.2f} m, grip {self.grip_safety:.2f}, brake {self.brake_safety:.2f}, "
                f"look-ahead {self.lookahead_gain_s:.2f} s")


@dataclass
class RacingLine:
    """A planned line, one point per reference-line point.

    Attributes:
        lateral: (N,) offset of the line from the reference line, m, left positive.
        xz: (N, 2) the line's horizontal world positions, m.
        s: (N,) arc length along the planned line, m.
        lo, hi: (N,) the offsets' bounds the planner kept to, m.
    """

    lateral: np.ndarray
    xz: np.ndarray
    s: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


def _offset_bounds(track: Track, edge_margin_m: float) -> tuple[np.ndarray, np.ndarray]:
    """Per reference-line point, the offsets (m) within the road less ``edge_margin_m`` and off the side
    patches slower than asphalt that touch one edge of the road (a full-width patch cannot be avoided)."""
    half = 0.5 * track.road_width
    n = len(track.reference_line)
    room = max(half - edge_margin_m, 0.0)
    lo, hi = np.full(n, -room), np.full(n, room)
    s = track.arc_length
    for patch in track.surface_patches:
        if SURFACE_GRIP[patch.surface] >= SURFACE_GRIP[SURFACE_ASPHALT]:
            continue
        on = (s >= patch.s_start) & (s < patch.s_end)
        if patch.lat_min <= -half + 1e-6 and patch.lat_max < half - 1e-6:
            lo[on] = np.maximum(lo[on], patch.lat_max + edge_margin_m)
        elif patch.lat_max >= half - 1e-6 and patch.lat_min > -half + 1e-6:
            hi[on] = np.minimum(hi[on], patch.lat_min - edge_margin_m)
    squeezed = lo > hi  # a patch leaves no room at this margin: keep to the patch's edge side as far as it can
    mid = 0.5 * (lo + hi)
    lo[squeezed] = hi[squeezed] = np.clip(mid[squeezed], -room, room)
    lo[0], hi[0] = max(lo[0], -START_LATERAL_M), min(hi[0], START_LATERAL_M)
    if lo[0] > hi[0]:
        lo[0] = hi[0] = 0.0
    return lo, hi


def plan_racing_line(track: Track, edge_margin_m: float = RacingLineMargins.edge_margin_m,
                     spacing_m: float = PLAN_SPACING_M) -> RacingLine:
    """The minimum-curvature line of ``track`` within the road less ``edge_margin_m`` (see the module doc)."""
    ref = track.reference_line[:, [0, 2]]
    normal = track.left_xz
    n = len(ref)
    lo_all, hi_all = _offset_bounds(track, edge_margin_m)
    step = max(1, int(round(spacing_m / (track.length_m / max(n - 1, 1)))))
    knots = np.unique(np.concatenate([np.arange(0, n, step), [n - 1]]))
    m = len(knots)
    p, nrm = ref[knots], normal[knots]
    # window bounds: the tightest bound between neighbouring knots, so the line between them stays inside
    edges = np.concatenate([[0], (knots[:-1] + knots[1:]) // 2 + 1, [n]])
    lo = np.array([lo_all[a:b].max() for a, b in zip(edges[:-1], edges[1:])])
    hi = np.array([hi_all[a:b].min() for a, b in zip(edges[:-1], edges[1:])])
    lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    flat = lo >= hi
    lo[flat], hi[flat] = lo[flat] - 1e-6, hi[flat] + 1e-6
    # second differences of q_i = p_i + n_i * nrm_i (i = 1..m-2): d2p + D n, D of 3 bands per axis
    d2p = p[:-2] - 2.0 * p[1:-1] + p[2:]
    offsets = _box_qp_banded(*_curvature_normal_equations(nrm, d2p), lo, hi)
    arc = track.arc_length
    lateral = np.interp(arc, arc[knots], offsets)
    # the path between knots is the straight segment between the planned points (not the reference line's
    # own points offset, which would bring back its quantisation: 0.1 m steps on a recorded line)
    q = p + offsets[:, None] * nrm
    xz = np.stack([np.interp(arc, arc[knots], q[:, 0]), np.interp(arc, arc[knots], q[:, 1])], axis=1)
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(xz, axis=0), axis=1))])
    return RacingLine(lateral=lateral, xz=xz, s=s, lo=lo_all, hi=hi_all)


def _curvature_normal_equations(nrm: np.ndarray, d2p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The normal equations of min ||d2p + D n||^2 over the offsets n (m,): the pentadiagonal H = D^T D as
    LAPACK banded rows (5, m) and f = D^T d2p (m,), where row i of D (per axis) puts
    nrm[i], -2 nrm[i+1], nrm[i+2] on the offsets i, i+1, i+2."""
    m = len(nrm)
    w = np.array([1.0, -2.0, 1.0])
    bands = np.zeros((5, m))  # bands[2 + j - k, k] = H[j, k] (scipy.linalg.solve_banded's layout)
    f = np.zeros(m)
    for a in range(3):
        for b in range(3):
            coeff = w[a] * w[b] * np.einsum("ij,ij->i", nrm[a:m - 2 + a], nrm[b:m - 2 + b])  # per row i
            cols = np.arange(m - 2) + b
            np.add.at(bands[2 + a - b], cols, coeff)
        f[a:m - 2 + a] += w[a] * np.einsum("ij,ij->i", nrm[a:m - 2 + a], d2p)
    return bands, f


def _box_qp_banded(bands: np.ndarray, f: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   max_iterations: int | None = None) -> np.ndarray:
    """argmin 0.5 x^T H x + f^T x subject to lo <= x <= hi, for a banded symmetric positive-definite H
    (``bands`` in scipy.linalg.solve_banded's layout, 2 bands each side): the primal active-set method
    (Nocedal and Wright, Numerical Optimization, algorithm 16.3), each step one banded solve with the
    bounds in the working set fixed. Raises RuntimeError when it has not converged in ``max_iterations``
    (default 20 x the number of offsets)."""
    solve_banded = _scipy("linalg").solve_banded
    m = len(f)
    x = np.clip(np.zeros(m), lo, hi)
    at_lo, at_hi = x <= lo, (x >= hi) & ~(x <= lo)
    cols = np.arange(m)
    for _ in range(max_iterations or 20 * m):
        fixed = at_lo | at_hi
        system = bands.copy()
        for d in range(5):  # rows of fixed offsets become x_i = its bound (bands[d, k] = H[k + d - 2, k])
            rows = cols + d - 2
            ok = (rows >= 0) & (rows < m)
            hit = np.zeros(m, dtype=bool)
            hit[ok] = fixed[rows[ok]]
            system[d, hit] = 0.0
        system[2, fixed] = 1.0
        rhs = np.where(at_lo, lo, np.where(at_hi, hi, -f))
        target = solve_banded((2, 2), system, rhs)
        step = target - x
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(step < -1e-12, (lo - x) / step, np.where(step > 1e-12, (hi - x) / step, np.inf))
        room[fixed] = np.inf
        alpha = float(room.min()) if m else np.inf
        if alpha < 1.0:  # a bound blocks the step: go to it and fix it
            alpha = max(alpha, 0.0)
            x = x + alpha * step
            block = room <= alpha + 1e-12
            at_lo |= block & (step < 0)
            at_hi |= block & (step > 0)
            x = np.where(at_lo, lo, np.where(at_hi, hi, x))
            continue
        x = target
        grad = _banded_matvec(bands, x) + f
        # a fixed bound whose gradient points away from it (into the box) is released, the worst first
        wrong = np.where(at_lo, -grad, np.where(at_hi, grad, 0.0))
        worst = int(np.argmax(wrong))
        if wrong[worst] <= 1e-10 * max(1.0, float(np.abs(grad).max())):
            return np.clip(x, lo, hi)
        at_lo[worst] = at_hi[worst] = False
    raise RuntimeError(f"the racing-line planner did not converge in {max_iterations or 20 * m} steps")


def _banded_matvec(bands: np.ndarray, x: np.ndarray) -> np.ndarray:
    """H @ x for H in LAPACK's banded layout with 2 bands each side."""
    m = len(x)
    out = np.zeros(m)
    for d in range(5):
        off = d - 2  # bands[d, k] = H[k + off, k]
        if off >= 0:
            out[off:] += bands[d, : m - off] * x[: m - off]
        else:
            out[: m + off] += bands[d, -off:] * x[-off:]
    return out


@dataclass
class LineProfile:
    """The speed profile of a planned line, per point: curvature (1/m), grip (surface friction under the
    line), v_max (grip / steering limited), v_brake (v_max with the braking limit) and v_profile (with the
    engine from a standing start, turbo pads and slopes), m/s; predicted_time_s is the forward pass's time."""

    curvature: np.ndarray
    grip: np.ndarray
    v_max: np.ndarray
    v_brake: np.ndarray
    v_profile: np.ndarray
    predicted_time_s: float


def line_speed_profile(track: Track, line: RacingLine, car: CarParameters | None = None,
                       grip_safety: float = 1.0, brake_safety: float = 1.0) -> LineProfile:
    """The quasi-steady-state speed profile of ``line`` on ``track`` within the fractions of the grip and
    braking limits (1, 1: the line's speed-profile bound)."""
    car = car or CarParameters()
    s, xz = line.s, line.xz
    n = len(s)
    spacing = s[-1] / max(n - 1, 1)
    k = max(1, int(round(LINE_CURVATURE_HALF_WINDOW_M / spacing)))
    fwd = xz[np.minimum(np.arange(n) + 1, n - 1)] - xz[np.maximum(np.arange(n) - 1, 0)]
    heading = np.unwrap(np.arctan2(fwd[:, 0], fwd[:, 1]))
    hi = np.minimum(np.arange(n) + k, n - 1)
    lo = np.maximum(np.arange(n) - k, 0)
    curvature = np.abs(heading[hi] - heading[lo]) / np.maximum(s[hi] - s[lo], 1e-6)
    surfaces = [track.surface_at(i, float(line.lateral[i])) for i in range(n)]
    grip = np.array([SURFACE_GRIP[c] for c in surfaces])
    g = car.gravity
    mu = grip * grip_safety
    denom = curvature - mu * g * car.downforce
    with np.errstate(divide="ignore"):
        v_grip = np.where(denom > 1e-9, np.sqrt(mu * g / np.maximum(denom, 1e-9)), np.inf)
    v_max = np.minimum(np.minimum(v_grip, steering_lock_speed(car, curvature)), car.gear_top_speed[-1])
    # over a crest the car flies once v^2 * crest > g (1 + downforce v^2) + airborne margin; a car that takes
    # off turning keeps its yaw rate in the air and lands sliding: turning, it stays on the ground
    crest = _crest_curvature(track)
    lift = crest - g * car.downforce
    with np.errstate(divide="ignore", invalid="ignore"):
        v_fly = np.where(lift > 1e-9, np.sqrt((g + car.airborne_acceleration_margin) / np.maximum(lift, 1e-9)),
                         np.inf)
    turning = np.convolve(curvature > TURNING_CURVATURE, np.ones(2 * k + 1), mode="same") > 0
    v_max = np.where(turning, np.minimum(v_max, v_fly), v_max)
    y = track.reference_line[:, 1]
    ds = np.maximum(np.diff(s), 1e-6)
    slope = np.diff(y) / ds
    v = v_max.copy()
    for i in range(n - 2, -1, -1):
        a_b = brake_safety * min(car.brake_deceleration, mu[i] * g * (1 + car.downforce * v[i + 1] ** 2))
        a_b = max(a_b + g * slope[i], 0.1)  # climbing helps the brakes, descending works against them
        v[i] = min(v[i], math.sqrt(v[i + 1] ** 2 + 2 * a_b * ds[i]))
    v_brake = v.copy()
    boost = [SURFACE_BOOST[c] for c in surfaces]
    out = v.copy()
    out[0] = 0.0
    time_s = turbo_left = 0.0
    for i in range(n - 1):
        if boost[i]:
            turbo_left = car.turbo_duration
        a = engine_acceleration(car, out[i]) - g * slope[i] + (car.turbo_acceleration if turbo_left > 0 else 0.0)
        a = min(a, mu[i] * g * (1 + car.downforce * out[i] ** 2))
        v_next = math.sqrt(max(out[i] ** 2 + 2 * a * ds[i], 0.25))
        out[i + 1] = min(v[i + 1], v_next)
        dt = ds[i] / max(0.5 * (out[i] + out[i + 1]), 0.5)
        turbo_left -= dt
        time_s += dt
    return LineProfile(curvature=curvature, grip=grip, v_max=v_max, v_brake=v_brake, v_profile=out,
                       predicted_time_s=time_s)


def _crest_curvature(track: Track) -> np.ndarray:
    """(N,) -d(slope)/ds of the simulator's road (1/m): positive over a crest, where a car at speed v
    leaves the ground once v^2 times it exceeds gravity with downforce plus the car's
    airborne_acceleration_margin."""
    geo = sim_geometry(track)
    slope, s = np.asarray(geo.slope), np.asarray(geo.s)
    return -np.gradient(slope, s)


class RacingLineDriver(BaselineDriver):
    """Drives its own planned line (:func:`plan_racing_line`) from :class:`CarState` alone: the classical
    driver's control on that line, aiming at the braking-limited speed of its profile."""

    def __init__(self, track: Track, car: CarParameters | None = None,
                 margins: RacingLineMargins | None = None, line: RacingLine | None = None) -> None:
        self.track = track
        self.car = car or CarParameters()
        self.racing_margins = m = margins or RacingLineMargins()
        self.margins = DriverMargins(grip_safety=m.grip_safety, brake_safety=m.brake_safety,
                                     lookahead_gain_s=m.lookahead_gain_s)
        self.line = line if line is not None else plan_racing_line(track, m.edge_margin_m)
        self.line_profile = line_speed_profile(track, self.line, self.car, m.grip_safety, m.brake_safety)
        self.profile = self.line_profile
        self._follow(self.line.xz, self.line.s, self.line_profile.v_brake)

    def _may_accelerate(self, v: float, i: int) -> bool:
        """Accelerate only while the grip left beside full throttle (the friction circle:
        sqrt(1 - (a_engine / traction)^2) of it, at least the car's min_lateral_grip_fraction) still holds
        the line's curvature at point ``i`` at speed ``v``: at the limit of a corner the car holds its speed."""
        car = self.car
        df = 1.0 + car.downforce * v * v
        traction = self.line_profile.grip[i] * car.gravity * df
        used = min(1.0, max(engine_acceleration(car, v), 0.0) / traction)
        lateral = traction * self.racing_margins.grip_safety * max(car.min_lateral_grip_fraction,
                                                                    math.sqrt(1.0 - used * used))
        return v * v * self.line_profile.curvature[i] <= lateral

    def bound_s(self) -> float:
        """The speed-profile bound of this driver's line (grip and braking at the model's limits), s."""
        return line_speed_profile(self.track, self.line, self.car).predicted_time_s


@dataclass
class RacingLineResult:
    """One race of the racing-line driver.

    Attributes:
        race_time_ms: the race clock at the end (the finish time when finished), ms.
        progress_fraction: the share of the track covered, 0-1.
        wall_hits: ticks the car touched a barrier.
        max_lateral_m: the furthest the car's centre went from the reference line, m (the barriers are
            at the track's ``gate_half_width``; the road's edge at half its ``road_width``).
        predicted_time_s: the forward pass of the driver's own profile, s.
        bound_s: the speed-profile bound of the driver's line, s.
    """

    track: str
    margins: RacingLineMargins
    finished: bool
    race_time_ms: int
    steps: int
    progress_fraction: float
    end_reason: str
    wall_hits: int
    max_lateral_m: float
    predicted_time_s: float
    bound_s: float
    lateral: list[float] = field(default_factory=list)

    @property
    def race_time_s(self) -> float:
        """Race time, s."""
        return self.race_time_ms / 1000.0

    @property
    def clean(self) -> bool:
        """Finished without touching a barrier."""
        return self.finished and self.wall_hits == 0


def run_racing_line(track_name: str | Track = "short", params: TrackManiaEnvironmentParameters | None = None,
                    seed: int = 0, margins: RacingLineMargins | None = None, line: RacingLine | None = None,
                    with_bound: bool = True) -> RacingLineResult:
    """Drive ``track_name`` with the racing-line driver in the simulator (no frames rendered).

    ``line``: a line planned beforehand for ``margins.edge_margin_m`` (default: planned here);
    ``with_bound=False`` leaves the result's ``bound_s`` NaN (saves a profile pass)."""
    from environments.trackmania.env import TrackManiaEnv

    track = resolve_track(track_name)
    driver = RacingLineDriver(track, margins=margins, line=line)
    env = TrackManiaEnv(params=params, track=track, backend_options={"render": False})
    env.reset(seed=seed)
    car = env.backend.car
    limit = env.params.cutoff_rollout_if_race_not_finished_within_duration_ms // env.params.ms_per_action + 1
    lateral: list[float] = []
    steps, info = 0, {}
    for steps in range(1, limit + 1):
        _, _, terminated, truncated, info = env.step(driver.act(env.state))
        lateral.append(car.lat)
        if terminated or truncated:
            break
    env.close()
    return RacingLineResult(
        track=track.name, margins=driver.racing_margins, finished=bool(info["finished"]),
        race_time_ms=int(info["race_time_ms"]), steps=steps, progress_fraction=float(info["progress_fraction"]),
        end_reason=info["end_reason"], wall_hits=car.wall_hits, max_lateral_m=max(map(abs, lateral), default=0.0),
        predicted_time_s=driver.line_profile.predicted_time_s, bound_s=driver.bound_s() if with_bound else math.nan,
        lateral=lateral)


@dataclass
class RacingLineTuneResult:
    """The fastest clean race (finished, no barrier touched) :func:`tune_racing_line` found.

    ``bound_s``: the speed-profile bound of that race's line; ``race_time_s / bound_s`` says how far the
    driver is from what its own line allows in the model."""

    track: str
    margins: RacingLineMargins
    race_time_s: float
    bound_s: float
    shipped_time_s: float | None
    races: int
    result: RacingLineResult

    @property
    def bound_ratio(self) -> float:
        """The race time over the line's speed-profile bound."""
        return self.race_time_s / self.bound_s


def _to_margins(x: np.ndarray) -> RacingLineMargins:
    """The margins at the point ``x`` of the search space, rounded to 0.01 (repeat races are looked up)."""
    return RacingLineMargins(**{name: round(float(v), 2) for name, v in zip(TUNE_BOUNDS, x)})


def tune_racing_line(track_name: str | Track = "short", seed: int = 0, max_races: int | None = None,
                     progress: Callable[[str], None] | None = None,
                     start: RacingLineMargins | None = None) -> RacingLineTuneResult:
    """Search the racing-line driver's margins on ``track_name`` for the fastest clean race.

    scipy's bounded Nelder-Mead over :data:`TUNE_BOUNDS` from ``start`` (default: the shipped margins),
    at most ``max_races`` races (default :data:`TUNE_MAX_RACES`); a race that does not finish or touches a barrier costs
    :data:`FAILED_RACE_S` plus 100 s per missing fraction of the track. Raises ValueError when no race
    tried is clean.
    """
    optimize = _scipy("optimize")
    track = resolve_track(track_name)
    tried: dict[RacingLineMargins, RacingLineResult] = {}
    lines: dict[float, RacingLine] = {}

    def race(margins: RacingLineMargins) -> RacingLineResult:
        if margins not in tried:
            if margins.edge_margin_m not in lines:
                lines[margins.edge_margin_m] = plan_racing_line(track, margins.edge_margin_m)
            tried[margins] = run_racing_line(track, seed=seed, margins=margins, line=lines[margins.edge_margin_m],
                                             with_bound=False)
        return tried[margins]

    def cost(x: np.ndarray) -> float:
        r = race(_to_margins(x))
        if r.clean:
            return r.race_time_s
        return FAILED_RACE_S + 100.0 * (1.0 - r.progress_fraction) + r.race_time_s

    start = start or RacingLineMargins()
    x0 = np.array([getattr(start, name) for name in TUNE_BOUNDS])
    bounds = list(TUNE_BOUNDS.values())
    # a wide first simplex: the race time is a step function of the margins, a small one would stall
    simplex = [x0]
    for i, (low, high) in enumerate(bounds):
        vertex = x0.copy()
        width = 0.25 * (high - low)
        vertex[i] = x0[i] + width if x0[i] + width <= high else x0[i] - width
        simplex.append(vertex)
    optimize.minimize(cost, x0, method="Nelder-Mead", bounds=bounds,
                      options={"initial_simplex": np.array(simplex), "maxfev": max_races or TUNE_MAX_RACES,
                               "xatol": 0.01, "fatol": 0.005})
    clean = [(r.race_time_ms, str(m), m) for m, r in tried.items() if r.clean]
    if not clean:
        raise ValueError(f"no setting of the racing-line driver finishes {track.name} without touching a barrier "
                         f"in {len(tried)} races")
    best = min(clean)[-1]
    shipped = tried.get(start)
    if progress is not None:
        progress(f"racing line: {len(tried)} races, best {tried[best].race_time_s:.2f} s ({best})")
    result = tried[best]
    result.bound_s = line_speed_profile(track, lines[best.edge_margin_m]).predicted_time_s
    return RacingLineTuneResult(track=track.name, margins=best, race_time_s=result.race_time_s, bound_s=result.bound_s,
                                shipped_time_s=shipped.race_time_s if shipped is not None and shipped.clean else None,
                                races=len(tried), result=result)
