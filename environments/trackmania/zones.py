"""Reference-line zones: extrapolation, smoothing, zone tracking and progress in metres.

Shared by every backend. A *zone center* is one point of the (extended, smoothed) reference line;
the car's *current zone* advances and retreats by the rules of the Linesight rollout loop.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Smoothing half-window, points: z[i] = (z[i - 5] + z[i + 5]) / 2 for i in [5, n - 5).
SMOOTHING_HALF_WINDOW = 5
#: Distance within which the car must be of a real checkpoint to advance onto its paired point, m
#: (Linesight's, for checkpoint blocks read from a real map: their centre, 32 m blocks).
REAL_CHECKPOINT_RADIUS_M = 12.0
#: How far past a gate the tracker may first see a car that crossed it: one 50 ms action at 430 km/h, m.
GATE_ALONG_MARGIN_M = 6.0
#: When map checkpoints are paired within a radius, points this close (either side) to a pairing are
#: not paired again with the same checkpoint: 100 m at 0.5 m spacing (Linesight's window; a later lap
#: passes the checkpoint again further along the line).
LAP_PAIRING_EXCLUSION_POINTS = 200
#: Distances computed per tracking call (points); the window grows when the car outruns it.
_WINDOW = 48


def checkpoint_radius_for_gate(gate_half_width_m: float) -> float:
    """The zone rule's radius for checkpoints that are gates of this half-width on the line (the
    simulator's and the stand-in's, whose gates count a car up to the walls), m: a car that crossed
    the gate anywhere within it, seen up to one action later, is inside it. With Linesight's 12 m on
    the simulator's 14 m gates, a fast line along the wall passed the gate, yet its progress held
    there until the no-progress cut-off (``far_from_checkpoint_K_of_N``)."""
    return math.hypot(gate_half_width_m, GATE_ALONG_MARGIN_M)


def extrapolate_and_smooth(raw_line: np.ndarray, n_before: int, n_after: int) -> np.ndarray:
    """Extend ``raw_line`` (N, 3) by ``n_before`` / ``n_after`` points along its first / last segment,
    then smooth [5:-5] with the mean of the points 5 before and 5 after. Returns (n_before + N + n_after, 3)."""
    raw = np.asarray(raw_line, dtype=np.float64)
    if raw.ndim != 2 or raw.shape[1] != 3 or len(raw) < 2:
        raise ValueError(f"a reference line is an (N >= 2, 3) array, got shape {raw.shape}")
    before = raw[0] + (raw[0] - raw[1])[None, :] * np.arange(n_before, 0, -1, dtype=np.float64)[:, None]
    after = raw[-1] + (raw[-1] - raw[-2])[None, :] * np.arange(1, n_after + 1, dtype=np.float64)[:, None]
    z = np.concatenate([before, raw, after], axis=0)
    h = SMOOTHING_HALF_WINDOW
    if len(z) > 2 * h:
        z[h:-h] = 0.5 * (z[: -2 * h] + z[2 * h:])
    return z


@dataclass
class ZoneCenters:
    """The extended reference line with its progress bookkeeping.

    Attributes:
        centers: (M, 3) float64 world positions.
        first_real: index of the first real (non-extrapolated) point: the start.
        finish: index of the last real point: the finish; the tracker never goes beyond it.
        transitions: (M - 1, 3) midpoints between consecutive centers.
        transition_axis: (M - 2, 3) unit vectors from transition i to transition i + 1.
        transition_length: (M - 2,) metres between consecutive transitions.
        distance_to_transition: (M - 1,) metres from transition 0 to transition i.
        checkpoint_position: (M, 3) position of the real checkpoint paired with each point (zeros if none).
        checkpoint_radius: (M,) radius within which the car must be of it, m (inf where unpaired).
    """

    centers: np.ndarray
    first_real: int
    finish: int
    transitions: np.ndarray
    transition_axis: np.ndarray
    transition_length: np.ndarray
    distance_to_transition: np.ndarray
    checkpoint_position: np.ndarray
    checkpoint_radius: np.ndarray

    @classmethod
    def from_raw_line(
        cls,
        raw_line: np.ndarray,
        n_before: int = 20,
        n_after: int = 1000,
        real_checkpoints: np.ndarray | None = None,
        pair_radius_m: float | None = None,
        checkpoint_radius_m: float = REAL_CHECKPOINT_RADIUS_M,
    ) -> "ZoneCenters":
        """Build from a raw (N, 3) reference line and pair ``real_checkpoints`` (K, 3) with its points.

        Without ``pair_radius_m`` each checkpoint is paired with its nearest point (checkpoints that lie
        on the line: the simulator's). With it (checkpoints read from a real map: unordered, start and
        finish lines included, one block per gate even on multi-lap maps) as Linesight does: each
        checkpoint is paired with the nearest point within ``pair_radius_m``, then again with the nearest
        outside :data:`LAP_PAIRING_EXCLUSION_POINTS` of the pairings so far (one per lap), and with
        none if no point is that close. ``checkpoint_radius_m``: the car must be within this of a
        paired checkpoint to advance onto its point (Linesight's 12 m for a real map's blocks;
        :func:`checkpoint_radius_for_gate` for the simulator's gates).
        """
        centers = extrapolate_and_smooth(raw_line, n_before, n_after)
        transitions = 0.5 * (centers[1:] + centers[:-1])
        delta = np.diff(transitions, axis=0)
        length = np.linalg.norm(delta, axis=1)
        axis = delta / np.maximum(length, 1e-9)[:, None]
        dist = np.concatenate([[0.0], np.cumsum(length)])
        cp_pos = np.zeros_like(centers)
        cp_radius = np.full(len(centers), np.inf)
        if real_checkpoints is not None and len(real_checkpoints):
            inner = centers[n_before: len(centers) - n_after]
            for cp in np.asarray(real_checkpoints, dtype=np.float64).reshape(-1, 3):
                d_cp = np.linalg.norm(inner - cp, axis=1)
                while True:
                    j = int(np.argmin(d_cp))
                    if pair_radius_m is not None and not d_cp[j] < pair_radius_m:
                        break
                    cp_pos[j + n_before] = cp
                    cp_radius[j + n_before] = checkpoint_radius_m
                    if pair_radius_m is None:
                        break
                    d_cp[max(0, j - LAP_PAIRING_EXCLUSION_POINTS): j + LAP_PAIRING_EXCLUSION_POINTS] = np.inf
        return cls(
            centers=centers,
            first_real=n_before,
            finish=len(centers) - 1 - n_after,
            transitions=transitions,
            transition_axis=axis,
            transition_length=length,
            distance_to_transition=dist,
            checkpoint_position=cp_pos,
            checkpoint_radius=cp_radius,
        )

    def progress_m(self, zone: int, position: np.ndarray) -> float:
        """Metres along the line from transition 0 to ``position`` in zone ``zone`` (>= 1)."""
        k = max(zone - 1, 0)
        along = float(np.dot(position - self.transitions[k], self.transition_axis[k]))
        along = min(max(along, 0.0), float(self.transition_length[k]))
        return float(self.distance_to_transition[k]) + along

    @property
    def finish_progress_m(self) -> float:
        """Progress value at the finish point (the middle of the finish zone), m."""
        return self.progress_m(self.finish, self.centers[self.finish])


class ZoneTracker:
    """Tracks the car's current zone along :class:`ZoneCenters` (one call per action).

    Advance while the next point is at least as close as the current one, within
    ``max_distance_m`` of the car, not past the finish, and (if that point is paired with a real
    checkpoint) the car is within its radius; then go back while the previous point is closer (and
    within ``max_distance_m``). Distances are computed for a window of points in one numpy call.
    """

    def __init__(self, zones: ZoneCenters, road_width: float, use_real_checkpoints: bool = True) -> None:
        self.zones = zones
        self.max_distance_m = math.sqrt(0.25 ** 2 + (road_width / 2.0) ** 2)
        self.use_real_checkpoints = use_real_checkpoints
        self.current = zones.first_real
        self.furthest = zones.first_real
        self._centers = zones.centers
        self._n = len(zones.centers)
        self._buf = np.empty((_WINDOW, 3))
        self._d = np.empty(_WINDOW)

    def reset(self, zone: int | None = None) -> None:
        """Start from ``zone`` (default: the first real point)."""
        self.current = self.zones.first_real if zone is None else int(zone)
        self.furthest = self.current

    def _distances(self, lo: int, position: np.ndarray) -> tuple[int, list[float]]:
        lo = max(lo, 0)
        hi = min(lo + _WINDOW, self._n)
        n = hi - lo
        buf = self._buf[:n]
        np.subtract(self._centers[lo:hi], position, out=buf)
        np.square(buf, out=buf)
        d = self._d[:n]
        np.sum(buf, axis=1, out=d)
        np.sqrt(d, out=d)
        return lo, d.tolist()

    def update(self, position: np.ndarray) -> int:
        """Move the current zone for the car at ``position`` (3,) and return it."""
        zones = self.zones
        cur = self.current
        max_d = self.max_distance_m
        last_allowed = zones.finish
        check_cp = self.use_real_checkpoints
        cp_radius = zones.checkpoint_radius
        lo, d = self._distances(cur - 1, position)
        while True:  # forward
            if cur >= last_allowed:
                break
            if cur + 1 - lo >= len(d):
                lo, d = self._distances(cur - 1, position)
            d_next, d_cur = d[cur + 1 - lo], d[cur - lo]
            if d_next > d_cur or d_next > max_d:
                break
            if check_cp and cp_radius[cur + 1] < math.inf:
                dcp = float(np.linalg.norm(zones.checkpoint_position[cur + 1] - position))
                if dcp >= cp_radius[cur + 1]:
                    break
            cur += 1
        while cur >= 2:  # backward
            if cur - 1 < lo:
                lo, d = self._distances(cur - _WINDOW + 2, position)
            d_prev, d_cur = d[cur - 1 - lo], d[cur - lo]
            if d_prev < d_cur and d_prev <= max_d:
                cur -= 1
            else:
                break
        self.current = cur
        if cur > self.furthest:
            self.furthest = cur
        return cur

    def held_at_checkpoint(self, position: np.ndarray) -> int | None:
        """The real checkpoint (1-based, in line order) that stops the zone from advancing, or None.

        That is when the point after the furthest zone is paired with a real checkpoint and the car at
        ``position`` (3,) is outside its radius: it went past the checkpoint too far from it (off its
        gate), so its progress stays where the checkpoint is.
        """
        zones, nxt = self.zones, self.furthest + 1
        if not self.use_real_checkpoints or nxt >= self._n or not math.isfinite(zones.checkpoint_radius[nxt]):
            return None
        if float(np.linalg.norm(zones.checkpoint_position[nxt] - position)) < zones.checkpoint_radius[nxt]:
            return None
        return int(np.isfinite(zones.checkpoint_radius[: nxt + 1]).sum())
