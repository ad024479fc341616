"""Piecewise schedules: a value that changes with one of the run's counters.

A schedule is a list of ``(step, value)`` knots that must start at step 0 with strictly increasing
steps. Between knots the value is interpolated:

* ``linear``: straight line;
* ``exponential``: geometric (straight line in log space; the knots' values must be > 0);
* ``staircase``: the value of the last knot passed (values may be anything, e.g. tuples).

Past the last knot the value stays at the last knot's value. ``speed`` (the configuration's
``global_schedule_speed``) scales the step: ``value(step * speed)``.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

INTERPOLATIONS = ("linear", "exponential", "staircase")
#: The counters a schedule may follow. TrackMania schedules follow env_steps (actions played).
COUNTERS = ("env_steps", "episodes", "gradient_updates")


class ScheduleError(ValueError):
    """A schedule that cannot be evaluated (bad knots, wrong interpolation, wrong counter)."""


@dataclass
class Schedule:
    """A value driven by a counter. See the module docstring for the interpolation rules."""

    points: list[tuple[int, Any]]
    interpolation: str = "linear"
    counter: str = "env_steps"
    _steps: list[float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.points = [_as_knot(p) for p in self.points]
        validate_schedule(self.points, self.interpolation, self.counter)
        self._steps = [s for s, _ in self.points]

    @classmethod
    def constant(cls, value: Any, counter: str = "env_steps") -> "Schedule":
        return cls([(0, value)], "staircase", counter)

    def value(self, step: float, speed: float = 1.0) -> Any:
        """The value at ``step`` of the schedule's counter, with steps scaled by ``speed``."""
        x = step * speed
        i = bisect.bisect_right(self._steps, x) - 1
        if i < 0:
            return self.points[0][1]
        if i >= len(self.points) - 1 or self.interpolation == "staircase":
            return self.points[i][1]
        (s0, v0), (s1, v1) = self.points[i], self.points[i + 1]
        frac = (x - s0) / (s1 - s0)
        if self.interpolation == "linear":
            return v0 + frac * (v1 - v0)
        return math.exp(math.log(v0) + frac * (math.log(v1) - math.log(v0)))

    def index(self, step: float, speed: float = 1.0) -> int:
        """Index of the last knot passed (for staircase schedules such as TensorBoard suffixes)."""
        return max(0, bisect.bisect_right(self._steps, step * speed) - 1)

    def first_step_at_most(self, target: float) -> float | None:
        """The first step (before ``speed``) at which a numeric schedule's value is at most ``target``;
        None when it never comes down that far. Exact between knots: each segment is monotone."""
        if self.points[0][1] <= target:
            return 0.0
        for (s0, v0), (s1, v1) in zip(self.points, self.points[1:]):
            if v1 > target:  # the whole segment stays above (v0 > target too)
                continue
            if self.interpolation == "staircase":
                return float(s1)
            if self.interpolation == "linear":
                frac = (target - v0) / (v1 - v0)
            else:
                frac = (math.log(target) - math.log(v0)) / (math.log(v1) - math.log(v0))
            return s0 + frac * (s1 - s0)
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "points": [[s, _plain(v)] for s, v in self.points],
            "interpolation": self.interpolation,
            "counter": self.counter,
        }


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _as_knot(point: Any) -> tuple[int, Any]:
    if not isinstance(point, (list, tuple)) or len(point) != 2:
        raise ScheduleError(f"each schedule point must be a pair [step, value], got {point!r}")
    step, value = point
    if isinstance(step, bool) or not isinstance(step, (int, float)) or step != int(step):
        raise ScheduleError(f"schedule step must be a whole number, got {step!r}")
    if isinstance(value, list):
        value = tuple(value)
    return int(step), value


def validate_schedule(points: Sequence[tuple[int, Any]], interpolation: str, counter: str) -> None:
    """Raise :class:`ScheduleError` naming the first problem of a schedule definition."""
    if interpolation not in INTERPOLATIONS:
        raise ScheduleError(f"interpolation must be one of {INTERPOLATIONS}, got {interpolation!r}")
    if counter not in COUNTERS:
        raise ScheduleError(f"counter must be one of {COUNTERS}, got {counter!r}")
    if not points:
        raise ScheduleError("a schedule needs at least one point, e.g. [[0, 1.0]]")
    if points[0][0] != 0:
        raise ScheduleError(f"a schedule must start at step 0, it starts at {points[0][0]}")
    for (s0, _), (s1, _) in zip(points, points[1:]):
        if s1 <= s0:
            raise ScheduleError(f"schedule steps must increase strictly: {s0} is followed by {s1}")
    if interpolation == "staircase":
        return
    for _, v in points:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ScheduleError(f"{interpolation} interpolation needs numeric values, got {v!r}")
        if interpolation == "exponential" and v <= 0:
            raise ScheduleError(f"exponential interpolation needs values > 0, got {v!r}")
