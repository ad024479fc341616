"""Where one race gains or loses time against another, sector by sector (a racing game's split times).

:func:`sector_gaps` cuts the track into sectors of equal length along the reference line and, for two
:class:`~environments.trackmania.tools.trajectory.Trajectory` on the same track (an agent's race and
the classical driver's, say), gives each race's time through each sector, the difference, each one's
lowest speed there and how much of the sector each drove beyond the road's edge (on the run-off, or
against the wall). ``rulka record --best-run RUN_DIR/best_runs/MAP --driver tuned`` prints it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from environments.trackmania.tools.trajectory import Trajectory
from environments.trackmania.track import Track


@dataclass(frozen=True)
class SectorGap:
    """One sector, ``start_m`` to ``end_m`` along the reference line, raced by ``race`` and ``reference``.

    Times in s, speeds in km/h; ``off_road`` and ``reference_off_road`` are the fractions (0..1) of each
    race's samples in the sector more than half the road's width from the reference line."""

    start_m: float
    end_m: float
    time_s: float
    reference_time_s: float
    min_speed_kmh: float
    reference_min_speed_kmh: float
    off_road: float
    reference_off_road: float

    @property
    def gap_s(self) -> float:
        """Time ``race`` lost in this sector against ``reference`` (negative: it gained), s."""
        return self.time_s - self.reference_time_s


def lateral_offsets(track: Track, positions: np.ndarray) -> np.ndarray:
    """(T,) metres left (+) or right (-) of the reference line for (T, 3) world positions, each against
    the nearest raw-line point found by walking along the line from the previous sample's nearest point,
    as the simulator projects its car (a line that passes near itself does not capture the car)."""
    line = track.reference_line[:, [0, 2]]
    left = track.left_xz
    xz = np.asarray(positions, dtype=np.float64)[:, [0, 2]]
    last = len(line) - 1
    i = int(np.argmin(((line - xz[0]) ** 2).sum(axis=1)))
    offsets = np.empty(len(xz))
    for k, (x, z) in enumerate(xz):
        d = (line[i, 0] - x) ** 2 + (line[i, 1] - z) ** 2
        while i < last and (ahead := (line[i + 1, 0] - x) ** 2 + (line[i + 1, 1] - z) ** 2) < d:
            i, d = i + 1, ahead
        while i > 0 and (behind := (line[i - 1, 0] - x) ** 2 + (line[i - 1, 1] - z) ** 2) < d:
            i, d = i - 1, behind
        offsets[k] = (x - line[i, 0]) * left[i, 0] + (z - line[i, 1]) * left[i, 1]
    return offsets


def crossing_times_s(race: Trajectory, marks_m: np.ndarray) -> np.ndarray:
    """The race time (s) at which ``race`` first reached each distance of ``marks_m`` along the line,
    linear between samples; NaN for a mark it never reached."""
    reached = np.maximum.accumulate(race.progress_m.astype(np.float64))
    time_s = race.race_time_ms.astype(np.float64) / 1000.0
    after = np.searchsorted(reached, marks_m, side="left")
    times = np.full(len(marks_m), np.nan)
    ok = after < len(reached)
    after = after[ok]
    before = np.maximum(after - 1, 0)
    span = reached[after] - reached[before]
    frac = np.where(span > 0, (marks_m[ok] - reached[before]) / np.where(span > 0, span, 1.0), 1.0)
    times[ok] = time_s[before] + np.clip(frac, 0.0, 1.0) * (time_s[after] - time_s[before])
    return times


def sector_gaps(track: Track, race: Trajectory, reference: Trajectory, sector_m: float = 100.0) -> list[SectorGap]:
    """``race`` against ``reference`` in sectors of ``sector_m`` metres from the start up to where the
    shorter of the two got (the finish when both finished); the last sector may be shorter."""
    if sector_m <= 0:
        raise ValueError(f"sector length must be positive, got {sector_m} m")
    end = float(min(race.progress_m.max(), reference.progress_m.max()))
    if end <= 0:
        return []
    marks = np.arange(0.0, end, sector_m)
    if end - marks[-1] > 0.5:  # the rest, unless it is under half a metre
        marks = np.append(marks, end)
    half_road = 0.5 * track.road_width
    per_race = []
    for run in (race, reference):
        off = np.abs(lateral_offsets(track, run.positions)) > half_road
        per_race.append((crossing_times_s(run, marks), run.progress_m, run.speeds_kmh, off))
    gaps = []
    for k in range(len(marks) - 1):
        lo, hi = marks[k], marks[k + 1]
        cells = []
        for times, progress, speeds, off in per_race:
            inside = (progress >= lo) & (progress < hi)
            cells.append((times[k + 1] - times[k], float(speeds[inside].min()) if inside.any() else float("nan"),
                          float(off[inside].mean()) if inside.any() else 0.0))
        (t, v, o), (rt, rv, ro) = cells
        gaps.append(SectorGap(float(lo), float(hi), float(t), float(rt), v, rv, o, ro))
    return gaps


def format_sector_gaps(gaps: list[SectorGap], race_label: str = "race", reference_label: str = "reference") -> str:
    """A text table, one line a sector: each race's time, the gap and the running gap (s), lowest
    speeds (km/h), share off the road (%)."""
    lines = [f"sectors: {race_label} against {reference_label} (gap > 0: {race_label} lost time)",
             f"{'metres':>11} {race_label + ' s':>9} {reference_label + ' s':>9} {'gap s':>7} {'total s':>8}"
             f" {'lowest km/h':>13} {'off road %':>12}"]
    total = 0.0
    for g in gaps:
        total += g.gap_s
        lines.append(f"{g.start_m:5.0f}-{g.end_m:<5.0f} {g.time_s:9.2f} {g.reference_time_s:9.2f} {g.gap_s:+7.2f} "
                     f"{total:+8.2f} {g.min_speed_kmh:6.0f} {g.reference_min_speed_kmh:6.0f} "
                     f"{100 * g.off_road:5.0f} {100 * g.reference_off_road:6.0f}")
    return "\n".join(lines)
