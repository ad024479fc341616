"""Sector gaps: one race's time against another's per stretch of track, and where each left the road
(what `rulka record --best-run` prints to show where an agent loses time to the driver)."""
from __future__ import annotations

import numpy as np
import pytest

from environments.trackmania.tools.race_gaps import crossing_times_s, format_sector_gaps, lateral_offsets, sector_gaps
from environments.trackmania.tools.trajectory import Trajectory
from environments.trackmania.track import Track

#: 400 m straight along +z (its left is +x), 16 m of road.
STRAIGHT = Track(name="straight", reference_line=np.stack(
    [np.zeros(801), np.zeros(801), np.linspace(0.0, 400.0, 801)], axis=1))


def _race(speeds_mps: list[tuple[float, float]], end_m: float = 400.0, lateral=lambda s: 0.0) -> Trajectory:
    """A race down STRAIGHT sampled every 50 ms: ``speeds_mps`` = [(from_m, speed), ...] pieces;
    ``lateral(s)`` metres left of the line at distance ``s``."""
    s, t, samples = 0.0, 0, [(0.0, 0)]
    while s < end_m:
        speed = [v for start, v in speeds_mps if s >= start][-1]
        s, t = min(s + speed * 0.05, end_m), t + 50
        samples.append((s, t))
    progress = np.array([p for p, _ in samples])
    positions = np.stack([[lateral(p) for p in progress], np.zeros(len(progress)), progress], axis=1)
    n = len(samples)
    return Trajectory(positions=positions, headings=np.zeros(n), speeds_kmh=np.full(n, 72.0, np.float32),
                      race_time_ms=np.array([t for _, t in samples], np.int32), progress_m=progress.astype(np.float32),
                      actions=np.zeros(n - 1, np.int8), finished=end_m >= 400.0, end_reason="", track="straight")


def test_each_sector_holds_each_race_time_through_it_and_the_gap():
    """A race at 20 m/s against one that drops to 10 m/s after 200 m: even in the first two sectors,
    5 s gained in each of the last two; the sectors' times add up to the races' times."""
    race = _race([(0.0, 20.0)])
    reference = _race([(0.0, 20.0), (200.0, 10.0)])
    gaps = sector_gaps(STRAIGHT, race, reference, sector_m=100.0)
    assert [(g.start_m, g.end_m) for g in gaps] == [(0, 100), (100, 200), (200, 300), (300, 400)]
    assert [round(g.time_s, 2) for g in gaps] == [5.0, 5.0, 5.0, 5.0]
    assert [round(g.reference_time_s, 2) for g in gaps] == [5.0, 5.0, 10.0, 10.0]
    assert [round(g.gap_s, 2) for g in gaps] == [0.0, 0.0, -5.0, -5.0]
    assert sum(g.time_s for g in gaps) == pytest.approx(race.race_time_s, abs=0.01)
    assert sum(g.reference_time_s for g in gaps) == pytest.approx(reference.race_time_s, abs=0.01)


def test_sectors_stop_where_the_shorter_race_stopped():
    """A race cut at 250 m: sectors up to 250 m, the last one 50 m long."""
    gaps = sector_gaps(STRAIGHT, _race([(0.0, 20.0)], end_m=250.0), _race([(0.0, 20.0)]), sector_m=100.0)
    assert [(g.start_m, g.end_m) for g in gaps] == [(0, 100), (100, 200), (200, 250)]
    assert gaps[-1].time_s == pytest.approx(2.5, abs=0.01)


def test_off_road_share_counts_samples_beyond_half_the_road_width_on_either_side():
    """9 m left of the line from 100 to 200 m and 9 m right from 300 m (the road is 16 m wide): that
    sector and the last one are off the road, the others on it; lateral offsets carry the side."""
    def lateral(s: float) -> float:
        return 9.0 if 100.0 <= s < 200.0 else (-9.0 if s >= 300.0 else 0.0)

    race = _race([(0.0, 20.0)], lateral=lateral)
    offsets = lateral_offsets(STRAIGHT, race.positions)
    assert offsets[race.progress_m == 150.0].tolist() == [9.0] and offsets[-1] == -9.0
    gaps = sector_gaps(STRAIGHT, race, _race([(0.0, 20.0)]), sector_m=100.0)
    assert [g.off_road for g in gaps] == [0.0, 1.0, 0.0, 1.0]
    assert [g.reference_off_road for g in gaps] == [0.0] * 4


def test_a_mark_never_reached_has_no_time_and_bad_lengths_are_refused():
    """Crossing times interpolate between samples and are NaN past the race's end; a sector of 0 m
    is refused with the length named."""
    race = _race([(0.0, 20.0)], end_m=150.0)
    times = crossing_times_s(race, np.array([0.0, 50.0, 125.0, 200.0]))
    assert times[:3].tolist() == pytest.approx([0.0, 2.5, 6.25]) and np.isnan(times[3])
    with pytest.raises(ValueError, match="positive, got 0"):
        sector_gaps(STRAIGHT, race, race, sector_m=0.0)


def test_the_table_has_a_line_per_sector_with_the_running_gap():
    """The printed table: a header, then one line per sector ending with the running total."""
    gaps = sector_gaps(STRAIGHT, _race([(0.0, 20.0)]), _race([(0.0, 20.0), (200.0, 10.0)]), sector_m=100.0)
    lines = format_sector_gaps(gaps, "agent", "driver").splitlines()
    assert len(lines) == 2 + 4 and "agent lost time" in lines[0]
    assert "-5.00" in lines[-2] and "-10.00" in lines[-1]
