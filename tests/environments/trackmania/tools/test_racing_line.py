"""The racing-line driver: its planner keeps to the road, it finishes between the barriers faster than the
line-following driver, its tuner improves on its shipped margins, and a missing scipy is named."""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest

pytest.importorskip("scipy", reason="the racing-line driver needs scipy: pip install -e '.[driver]' (scripts/test.sh)")

from environments.trackmania.sim.car_parameters import CarParameters  # noqa: E402
from environments.trackmania.tools import racing_line  # noqa: E402
from environments.trackmania.tools.baseline import run_baseline  # noqa: E402
from environments.trackmania.tracks import BUILTIN_TRACK_NAMES, get_track  # noqa: E402
from tests.environments.trackmania.helpers import require_hockolicious  # noqa: E402

#: procedural:4 and procedural:9 hit the barriers before the throttle kept to the friction circle (4) and the
#: profile kept the car on the ground over a crest in a bend (9).
TRACKS = list(BUILTIN_TRACK_NAMES) + ["procedural:1", "procedural:4", "procedural:7", "procedural:9", "loop:2"]


@pytest.mark.parametrize("name", TRACKS)
def test_racing_line_finishes_between_the_barriers_faster_than_the_line_follower(name):
    """At its shipped margins the driver finishes every built-in and a few generated tracks without touching
    a barrier (its centre stays a body's half-width inside them), faster than the line-following driver
    at its shipped margins, and no faster than 0.9 of its line's speed-profile bound."""
    track = get_track(name)
    result = racing_line.run_racing_line(name)
    assert result.finished and result.end_reason == "finished"
    assert result.wall_hits == 0
    assert result.max_lateral_m < track.gate_half_width - CarParameters().body_half_width
    follower = run_baseline(name)
    assert follower.finished and result.race_time_s < follower.race_time_s
    assert result.race_time_s > 0.9 * result.bound_s


def test_racing_line_finishes_hockolicious_faster_than_the_line_follower():
    """On the real 4 km Hockolicious line (recorded, quantised to 0.1 m) the planned path is drawn between
    its knots, not on the recorded points: the driver finishes clean and faster than the line follower."""
    require_hockolicious()
    result = racing_line.run_racing_line("hockolicious")
    assert result.clean
    assert result.race_time_s < run_baseline("hockolicious").race_time_s


def test_the_planned_line_keeps_to_the_road_and_bends_less_than_the_reference_line():
    """On medium the line stays within the road less its edge margin, off the grass patch on one side of
    the hairpin, and its total squared curvature is below the reference line's (the planner's objective)."""
    track = get_track("medium")
    margin = 2.0
    line = racing_line.plan_racing_line(track, margin)
    half = 0.5 * track.road_width
    assert (np.abs(line.lateral) <= half - margin + 1e-6).all()
    assert (line.lateral >= line.lo - 1e-6).all() and (line.lateral <= line.hi + 1e-6).all()
    grass = next(p for p in track.surface_patches if p.lat_max < half)  # the inside grass: -8 .. -4 m
    s = track.arc_length
    on = (s >= grass.s_start) & (s < grass.s_end)
    assert (line.lateral[on] >= grass.lat_max + margin - 1e-6).all()

    def bending(xz: np.ndarray) -> float:
        d2 = xz[:-8:4] - 2 * xz[4:-4:4] + xz[8::4]
        return float((d2 ** 2).sum())

    assert bending(line.xz) < 0.75 * bending(track.reference_line[:, [0, 2]])


def test_the_banded_planner_solves_the_bounded_least_squares_problem():
    """The planner's banded active-set solver gives scipy.optimize.lsq_linear's answer (bvls, dense) on a
    small random minimum-curvature problem with bounds that bind."""
    from scipy.optimize import lsq_linear

    rng = np.random.default_rng(0)
    m = 40
    nrm = rng.normal(size=(m, 2))
    nrm /= np.linalg.norm(nrm, axis=1)[:, None]
    d2p = rng.normal(size=(m - 2, 2))
    dense = np.zeros((2 * (m - 2), m))
    for i in range(m - 2):
        for a, w in enumerate((1.0, -2.0, 1.0)):
            dense[2 * i:2 * i + 2, i + a] = w * nrm[i + a]
    lo, hi = -np.full(m, 0.3), np.full(m, 0.5)
    expected = lsq_linear(dense, -d2p.reshape(-1), bounds=(lo, hi), method="bvls", tol=1e-12).x
    got = racing_line._box_qp_banded(*racing_line._curvature_normal_equations(nrm, d2p), lo, hi)
    assert ((got <= lo + 1e-9) | (got >= hi - 1e-9)).sum() >= 5  # the bounds bind
    np.testing.assert_allclose(got, expected, atol=1e-7)


def test_tune_improves_on_the_shipped_margins_and_the_cli_reports_both_drivers(monkeypatch, capsys):
    """`rulka baseline --tune` on short (the line-following grid reduced, 15 racing-line races): the
    racing-line driver's tuned race is clean, no slower than its shipped margins, reproduced when raced
    again, faster than the tuned line-following driver, and both drivers' lines are printed with the
    racing line's speed-profile bound."""
    from environments.trackmania.tools import baseline
    from environments.trackmania.tools.cli import main

    monkeypatch.setattr(baseline, "TUNE_GRIP", (0.8, 1.2))
    monkeypatch.setattr(baseline, "TUNE_BRAKE", (0.7, 1.2))
    monkeypatch.setattr(baseline, "TUNE_LOOKAHEAD", (0.45, 0.55))
    assert main(["baseline", "--tune", "--track", "short", "--racing-races", "15"]) == 0
    out = capsys.readouterr().out
    tuned = racing_line.tune_racing_line("short", max_races=15)
    assert tuned.result.clean and tuned.shipped_time_s is not None
    assert tuned.race_time_s <= tuned.shipped_time_s
    again = racing_line.run_racing_line("short", margins=tuned.margins)
    assert again.clean and again.race_time_s == tuned.race_time_s
    follower = float(out.split("tuned driver finished in ")[1].split(" s")[0])
    assert tuned.race_time_s < follower
    assert (f"racing-line driver finished in {tuned.race_time_s:.2f} s with {tuned.margins} ({tuned.races} races "
            f"tried; shipped margins: {tuned.shipped_time_s:.2f} s); speed-profile bound of its line "
            f"{tuned.bound_s:.2f} s (race / bound {tuned.bound_ratio:.3f})") in out


def test_the_search_starts_from_the_shipped_margins_one_margin_moved_at_a_time(monkeypatch):
    """The tuner's first races: the shipped margins, then each margin alone moved by a quarter of its range
    (inside its bounds), the others kept: the optimiser's first simplex spans the search space."""
    tried = []

    def race(track, seed=0, margins=None, line=None, with_bound=True):
        tried.append(margins)
        return racing_line.RacingLineResult(track="t", margins=margins, finished=True, race_time_ms=20000 - len(tried),
                                            steps=1, progress_fraction=1.0, end_reason="finished", wall_hits=0,
                                            max_lateral_m=0.0, predicted_time_s=20.0, bound_s=math.nan)

    monkeypatch.setattr(racing_line, "run_racing_line", race)
    monkeypatch.setattr(racing_line, "plan_racing_line", lambda track, edge: None)
    monkeypatch.setattr(racing_line, "line_speed_profile", lambda track, line: racing_line.LineProfile(
        *([np.zeros(1)] * 5), predicted_time_s=19.0))
    racing_line.tune_racing_line("short", max_races=5)
    shipped = racing_line.RacingLineMargins()
    assert tried[0] == shipped
    names = list(racing_line.TUNE_BOUNDS)
    for name, margins in zip(names, tried[1:5]):
        low, high = racing_line.TUNE_BOUNDS[name]
        moved = {n for n in names if getattr(margins, n) != getattr(shipped, n)}
        assert moved == {name}
        assert getattr(margins, name) == pytest.approx(getattr(shipped, name) + 0.25 * (high - low), abs=0.006) \
            or getattr(margins, name) == pytest.approx(getattr(shipped, name) - 0.25 * (high - low), abs=0.006)
        assert low <= getattr(margins, name) <= high


def test_a_missing_scipy_is_named_with_the_install_command(monkeypatch, capsys):
    """Without scipy the planner raises ImportError saying how to install it, and `rulka baseline --tune`
    prints that after the line-following driver's result and exits 1."""
    from environments.trackmania.tools import baseline
    from environments.trackmania.tools.cli import main

    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.linalg", None)
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[driver\]'"):
        racing_line.run_racing_line("short")
    monkeypatch.setattr(baseline, "TUNE_GRIP", (0.8,))
    monkeypatch.setattr(baseline, "TUNE_BRAKE", (0.7,))
    monkeypatch.setattr(baseline, "TUNE_LOOKAHEAD", (0.45,))
    assert main(["baseline", "--tune", "--track", "short"]) == 1
    out = capsys.readouterr().out
    assert "tuned driver finished in" in out
    assert "racing-line driver: the racing-line driver needs scipy" in out
