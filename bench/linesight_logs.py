"""The races each side logged, read back for ``bench/vs_linesight_training.py``, and the row summary.

* Linesight writes every race to TensorBoard (``learner_process.py``): ``{explo|eval}_race_time_{status}_{map}``
  (the race time at the end of the rollout, s, finished or not) and ``{explo|eval}_race_finished_{status}_{map}``
  (1 or 0), both at step ``cumul_number_frames_played`` (actions of all games so far) and one wall time;
  each gradient update prints a line ``B    loss=...`` (tested batches print ``BT``).
* rulka writes every race it keeps to ``races.csv`` (``env_steps``, ``exploration``, ``finished``,
  ``race_time_s``); the bench stamps each row with its own clock when it first sees it, and reads the
  gradient updates from TensorBoard's ``RL/gradient_updates``.

A :class:`Race` is one race on the bench's clock: minutes since the side was started, actions of all its
games when the race was logged, exploring or not, finished or not, race time.
"""
from __future__ import annotations

import math
import re
import struct
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator

#: The minutes at which the table gives the best race so far.
MILESTONES_MIN = (15, 30, 60)


@dataclass(frozen=True)
class Race:
    minute: float  # since the side was started by the bench, min
    actions: int  # actions of all games together when the race was logged
    exploration: bool
    finished: bool
    race_time_s: float


def read_scalars(event_file: str | Path) -> Iterator[tuple[str, int, float, float]]:
    """``(tag, step, wall_time, value)`` of each scalar of a TensorBoard event file (torch's or tensorboardX's).

    A record is: u64 length, u32 CRC, ``length`` bytes of an ``Event`` protobuf, u32 CRC; a torn last
    record (a writer still running) ends the file.
    """
    from tensorboardX.proto import event_pb2

    data = Path(event_file).read_bytes()
    offset = 0
    while offset + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        start, end = offset + 12, offset + 12 + length
        if end + 4 > len(data):
            break
        event = event_pb2.Event()
        event.ParseFromString(data[start:end])
        offset = end + 4
        for value in event.summary.value:
            if value.HasField("simple_value"):
                yield value.tag, int(event.step), float(event.wall_time), float(value.simple_value)
            elif value.HasField("tensor") and value.tensor.float_val:
                yield value.tag, int(event.step), float(event.wall_time), float(value.tensor.float_val[0])


def event_files(folder: str | Path) -> list[Path]:
    """Every ``events.out.tfevents*`` file below ``folder``."""
    folder = Path(folder)
    return sorted(folder.rglob("events.out.tfevents*")) if folder.is_dir() else []


_LINESIGHT_TAG = re.compile(r"^(explo|eval)_race_(time|finished)_(?:trained|blind)_(.+)$")


def linesight_races(scalars: Iterable[tuple[str, int, float, float]], started_at: float, map_name: str) -> list[Race]:
    """Races of ``map_name`` from Linesight's scalars; ``started_at``: the bench's epoch time at the side's start."""
    time_of: dict[tuple[str, int], tuple[float, float]] = {}
    finished_of: dict[tuple[str, int], bool] = {}
    for tag, step, wall, value in scalars:
        match = _LINESIGHT_TAG.match(tag)
        if not match or match.group(3) != map_name:
            continue
        kind, what = match.group(1), match.group(2)
        if what == "time":
            time_of[(kind, step)] = (wall, value)
        else:
            finished_of[(kind, step)] = value >= 0.5
    races = []
    for (kind, step), (wall, seconds) in time_of.items():
        races.append(Race((wall - started_at) / 60.0, step, kind == "explo", finished_of.get((kind, step), False),
                          seconds))
    return sorted(races, key=lambda r: (r.minute, r.actions))


def linesight_updates(log_text: str) -> int:
    """Gradient updates in a Linesight log: one ``B    loss=`` line each (``BT`` lines are test batches)."""
    return len(re.findall(r"^B {4}loss=", log_text, flags=re.M))


def last_scalar(scalars: Iterable[tuple[str, int, float, float]], tag: str) -> float | None:
    """The value of ``tag`` with the latest wall time, or None."""
    best = None
    for t, _, wall, value in scalars:
        if t == tag and (best is None or wall >= best[0]):
            best = (wall, value)
    return None if best is None else best[1]


def rulka_race(row: dict[str, str], minute: float) -> Race:
    """One ``races.csv`` row, seen by the bench at ``minute``."""
    return Race(minute, int(row["env_steps"]), row["exploration"] != "0", row["finished"] == "1",
                float(row["race_time_s"]))


@dataclass
class Summary:
    """One side of one row of the table."""

    side: str
    track: str
    repeat: int
    minutes: float  # how long the side ran (start to stop signal), min
    actions: int
    updates: int | None
    races: int
    eval_races: int
    finished: int
    first_finish_min: float | None
    best_at: dict[int, float | None]  # milestone minute -> best race time so far, s (None: none finished)
    best_s: float | None
    alive_after: int  # its own processes alive after it ended and the bench cleaned up
    left_by_it: int  # its own processes alive after it ended, before the bench killed them
    note: str = ""

    @property
    def actions_per_s(self) -> float:
        return self.actions / max(self.minutes * 60.0, 1e-9)

    @property
    def updates_per_s(self) -> float | None:
        return None if self.updates is None else self.updates / max(self.minutes * 60.0, 1e-9)

    def to_json(self) -> dict:
        out = asdict(self)
        out["best_at"] = {str(k): v for k, v in self.best_at.items()}
        out["actions_per_s"], out["updates_per_s"] = self.actions_per_s, self.updates_per_s
        return out


def best_by(races: list[Race], minute: float) -> float | None:
    """The best finished race time logged by ``minute``, s (None if none)."""
    times = [r.race_time_s for r in races if r.finished and r.minute <= minute]
    return min(times) if times else None


def summarize(side: str, track: str, repeat: int, minutes: float, races: list[Race], actions: int,
              updates: int | None, alive_after: int, left_by_it: int, note: str = "") -> Summary:
    """The row summary of one side; milestones past ``minutes`` stay None (the run did not get there)."""
    finished = [r for r in races if r.finished]
    best_at = {m: (best_by(races, m) if m <= minutes + 1e-9 else None) for m in MILESTONES_MIN}
    return Summary(side, track, repeat, minutes, max([actions] + [r.actions for r in races]), updates, len(races),
                   sum(not r.exploration for r in races), len(finished),
                   min((r.minute for r in finished), default=None), best_at, best_by(races, math.inf),
                   alive_after, left_by_it, note)


def _fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "-" if value is None else pattern.format(value)


def table(summaries: list[Summary]) -> str:
    """The markdown table of the rows (one line per side, track and repeat)."""
    head = ("| track | rep | side | minutes | actions | gradient updates | actions/s | updates/s | races (eval) | "
            "finished | first finish, min | " + " | ".join(f"best at {m} min, s" for m in MILESTONES_MIN)
            + " | best, s | own processes alive after |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for s in summaries:
        cells = [s.track, str(s.repeat), s.side, f"{s.minutes:.1f}", str(s.actions), _fmt(s.updates, "{}"),
                 f"{s.actions_per_s:.1f}", _fmt(s.updates_per_s), f"{s.races} ({s.eval_races})", str(s.finished),
                 _fmt(s.first_finish_min, "{:.1f}"), *(_fmt(s.best_at[m]) for m in MILESTONES_MIN), _fmt(s.best_s),
                 f"{s.alive_after} ({s.left_by_it} left by it)"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def first_reach(races: list[Race], target_s: float) -> float | None:
    """The minute of the first finished race at or below ``target_s`` (None if never)."""
    times = [r.minute for r in races if r.finished and r.race_time_s <= target_s]
    return min(times) if times else None


def goal_lines(track: str, repeat: int, linesight: Summary, ls_races: list[Race], rulka: Summary,
               rk_races: list[Race], at_min: float = 60.0) -> list[str]:
    """Issue 42's three goals for one track and repeat, measured at ``at_min`` (or at the end of a shorter
    run, said so): rulka's best race faster than Linesight's; rulka reaching Linesight's best by half
    that time; rulka's actions/s at least 1.5x Linesight's."""
    at = min(at_min, linesight.minutes, rulka.minutes)
    when = f"minute {round(at, 1):g}" + ("" if at >= at_min else f" (the runs ended before minute {at_min:g})")
    ls_best, rk_best = best_by(ls_races, at), best_by(rk_races, at)
    ratio = rulka.actions_per_s / linesight.actions_per_s if linesight.actions_per_s > 0 else float("nan")
    lines = [f"{track} r{repeat}: best race at {when}: rulka {_fmt(rk_best)} s, Linesight {_fmt(ls_best)} s"
             + ("" if ls_best is None or rk_best is None else f" (rulka faster: {rk_best < ls_best})")]
    if ls_best is not None:
        reach = first_reach([r for r in rk_races if r.minute <= at], ls_best)
        lines.append(f"{track} r{repeat}: rulka reached Linesight's best ({ls_best:.2f} s) at minute "
                     f"{_fmt(reach, '{:.1f}')} (goal: by minute {round(at / 2, 1):g})")
    lines.append(f"{track} r{repeat}: actions/s rulka / Linesight = {ratio:.2f} (goal: >= 1.5)")
    return lines


def plot(curves: dict[str, list[Race]], png: str | Path, title: str) -> None:
    """Best race so far against wall-clock minutes (left) and against actions (right), one line per
    ``curves`` key (e.g. ``linesight short r0``); a line starts at its first finished race and ends at the
    side's last logged race."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from race_curves import require_matplotlib

    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    figure, (by_time, by_actions) = plt.subplots(1, 2, figsize=(11, 4.4), dpi=100)
    for label, races in curves.items():
        best, xs_t, xs_a, ys = math.inf, [], [], []
        for race in sorted(races, key=lambda r: r.minute):
            if race.finished and race.race_time_s < best:
                best = race.race_time_s
                xs_t.append(race.minute)
                xs_a.append(race.actions)
                ys.append(best)
        if ys:  # hold the last best to the side's last logged race
            xs_t.append(max(r.minute for r in races))
            xs_a.append(max(r.actions for r in races))
            ys.append(best)
            style = "-" if label.startswith("rulka") else "--"
            by_time.step(xs_t, ys, style, where="post", label=label)
            by_actions.step(xs_a, ys, style, where="post", label=label)
    by_time.set_xlabel("wall-clock minutes since the side was started")
    by_actions.set_xlabel("actions (all games together)")
    for axis in (by_time, by_actions):
        axis.set_ylabel("best race so far, s")
        axis.grid(True, alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(loc="best", fontsize=8)
        else:
            axis.text(0.5, 0.5, "no finished race yet", ha="center", va="center", transform=axis.transAxes)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(png)
    plt.close(figure)
