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


@pytest.mark.parametrize("point, message", [
    ((0, 1.0, 2.0), r"each schedule point must be a pair \[step, value\], got \(0, 1.0, 2.0\)"),
    (5, r"each schedule point must be a pair \[step, value\], got 5"),
    ((0.5, 1.0), r"schedule step must be a whole number, got 0.5"),
    ((True, 1.0), r"schedule step must be a whole number, got True"),
    (("0", 1.0), r"schedule step must be a whole number, got '0'"),
])
def test_malformed_points_are_refused_naming_the_point(point, message):
    """A knot that is not a [whole step, value] pair is refused, and the message shows it."""
    with pytest.raises(ScheduleError, match=message):
        Schedule([point], "staircase")


def test_other_refusals_name_the_offending_value():
    """Wrong counter, empty schedule and a first step other than 0: the message says exactly what was given."""
    with pytest.raises(ScheduleError, match=r"counter must be one of \('env_steps', 'episodes', 'gradient_updates'\), got 'steps'"):
        Schedule([(0, 1.0)], "linear", "steps")
    with pytest.raises(ScheduleError, match=r"^a schedule needs at least one point, e.g. \[\[0, 1.0\]\]$"):
        Schedule([], "linear")
    with pytest.raises(ScheduleError, match=r"it starts at 10$"):
        Schedule([(10, 0.5)], "linear")


def test_whole_float_steps_and_list_values_are_normalised():
    """A float step 100.0 becomes the int 100, a list value becomes a tuple (hashable, as YAML gives lists)."""
    s = Schedule([[0, [50_000, 20_000]], [100.0, [100_000, 75_000]]], "staircase")
    assert s.points == [(0, (50_000, 20_000)), (100, (100_000, 75_000))]
    assert isinstance(s.points[1][0], int)


def test_before_the_first_knot_and_index_with_speed():
    """A negative step gives the first value; index() counts knots passed, scaled by the speed."""
    s = Schedule([(0, 1.0), (100, 0.0)], "linear")
    assert s.value(-50) == 1.0
    assert s.index(-1) == 0 and s.index(0) == 0 and s.index(99) == 0 and s.index(100) == 1
    assert s.index(50, speed=2.0) == 1 and s.index(60, speed=0.5) == 0


def test_constant_and_to_dict_round_trip():
    """Schedule.constant holds one value as a staircase; to_dict gives plain lists that rebuild the same schedule."""
    c = Schedule.constant(0.3, counter="episodes")
    assert (c.points, c.interpolation, c.counter) == ([(0, 0.3)], "staircase", "episodes")
    assert c.value(10 ** 9) == 0.3
    assert Schedule.constant("x") == Schedule([(0, "x")], "staircase", "env_steps")
    s = Schedule([(0, (50_000, 20_000)), (5, (100_000, 75_000))], "staircase", "gradient_updates")
    d = s.to_dict()
    assert d == {"points": [[0, [50_000, 20_000]], [5, [100_000, 75_000]]], "interpolation": "staircase",
                 "counter": "gradient_updates"}
    assert Schedule(d["points"], d["interpolation"], d["counter"]) == s
    assert Schedule([(0, 1e-3), (10, 5e-4)], "exponential").to_dict()["points"] == [[0, 1e-3], [10, 5e-4]]


@pytest.mark.parametrize("interpolation", ["linear", "exponential", "staircase"])
def test_first_step_at_most_finds_where_the_value_comes_down(interpolation):
    """Where a decaying schedule first reaches a value (demonstrations.start_epsilon reads the
    epsilon schedule with it): 0 when it starts there, inside the crossing segment otherwise (after
    a flat stretch and a rise), None when it never comes down that far."""
    s = Schedule([(0, 1.0), (10_000, 1.0), (20_000, 0.9), (60_000, 0.1), (600_000, 0.03)], interpolation)
    step = s.first_step_at_most(0.5)
    assert 20_000 < step <= 60_000
    if interpolation != "staircase":
        assert s.value(step) == pytest.approx(0.5)
        assert s.value(step - 1) > 0.5
    else:
        assert step == 60_000
    assert s.first_step_at_most(1.0) == 0.0
    assert s.first_step_at_most(0.03) == pytest.approx(600_000)
    assert s.first_step_at_most(0.01) is None
