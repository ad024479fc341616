import math

import pytest

from rulka.schedules import Schedule, ScheduleError


def test_linear_interpolates_and_holds_after_last_knot():
    """Linear schedules (gamma) interpolate between knots and stay at the last value."""
    s = Schedule([(0, 1.0), (1000, 0.5), (2000, 0.1)], "linear")
    assert s.value(500) == pytest.approx(0.75)
    assert s.value(1500) == pytest.approx(0.3)
    assert s.value(10_000) == pytest.approx(0.1)


def test_exponential_interpolates_geometrically():
    """Exponential schedules (lr, epsilon) are straight lines in log space: the midpoint is the geometric mean."""
    s = Schedule([(0, 1e-3), (3_000_000, 5e-5)], "exponential")
    assert s.value(1_500_000) == pytest.approx(math.sqrt(1e-3 * 5e-5))
    assert s.value(0) == pytest.approx(1e-3)
    assert s.value(3_000_000) == pytest.approx(5e-5)


def test_staircase_keeps_last_knot_value_including_tuples():
    """Staircase schedules (memory size, TensorBoard suffix) jump at knots and may hold tuples."""
    s = Schedule([(0, (50_000, 20_000)), (5_000_000, (100_000, 75_000))], "staircase")
    assert s.value(4_999_999) == (50_000, 20_000)
    assert s.value(5_000_000) == (100_000, 75_000)
    assert s.index(5_000_001) == 1


def test_global_schedule_speed_scales_the_step():
    """global_schedule_speed = 2 reaches each knot at half the steps."""
    s = Schedule([(0, 0.0), (100, 1.0)], "linear")
    assert s.value(25, speed=2.0) == pytest.approx(0.5)


@pytest.mark.parametrize("points, interpolation, message", [
    ([], "linear", "at least one point"),
    ([(10, 1.0)], "linear", "start at step 0"),
    ([(0, 1.0), (10, 0.5), (10, 0.1)], "linear", "increase strictly"),
    ([(0, 1.0), (10, 0.0)], "exponential", "values > 0"),
    ([(0, 1.0)], "cubic", "interpolation must be one of"),
    ([(0, "a"), (5, "b")], "linear", "numeric values"),
])
def test_invalid_schedules_are_refused(points, interpolation, message):
    """Bad knots are refused with a message naming the problem."""
    with pytest.raises(ScheduleError, match=message):
        Schedule(points, interpolation)
