"""The learner's longest pause in a real run with Ray collectors, and what became of the races it met.

    python bench/ray_learner_pause.py -p trackmania_iqn_uni --config presets/trackmania_iqn_uni_standin.yaml \
        -cp performance.collector_backend=ray --max-steps 6000 ...     # any rulka arguments

Runs ``rulka`` with those arguments in this process and records, at the learner, when each
``RayCollection.poll`` starts and ends (a pause: the time between two polls, when no collector's
results are taken: a checkpoint, an evaluation, a burst of updates) and when each checkpoint and
evaluation ran; from the rollouts, each race's first and last action times (``Rollout.step_times``,
the collector's clock) and its longest gap between two actions. Prints the longest pauses, what ran in
them, and the races in flight when each began (an action before its start and after it): how they ended
(finished, discarded) and their longest gap between two actions (a race kept waiting shows a gap as long
as the pause; one played through it, its usual step).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

from rulka import cli
from rulka.collection.ray_collection import RayCollection
from rulka.graph_manager import BasicRLGraphManager


@dataclass
class Race:
    first: float
    last: float
    max_gap: float = 0.0
    ended: str = ""  # "", "finished" (terminated or truncated), "discarded"


polls: list[tuple[float, float]] = []
busy: list[tuple[str, float, float]] = []
races: dict[tuple, Race] = {}


def _record(rollout) -> None:
    times = rollout.step_times
    if times is None or len(times) == 0:
        return
    race = races.get(rollout.stream)
    if race is None:
        race = races[rollout.stream] = Race(float(times[0]), float(times[0]))
    gaps = np.diff(np.concatenate([[race.last], times]))
    race.max_gap = max(race.max_gap, float(gaps.max()))
    race.last = float(times[-1])
    if rollout.episode_ended:
        race.ended = "discarded" if rollout.discarded else "finished"


def _timed(name: str, method):
    def wrapper(self, *args, **kwargs):
        start = time.time()
        try:
            return method(self, *args, **kwargs)
        finally:
            busy.append((name, start, time.time()))
    return wrapper


def _install() -> None:
    poll = RayCollection.poll

    def timed_poll(self, heatup, timeout=0.05):
        start = time.time()
        rollouts = poll(self, heatup, timeout)
        polls.append((start, time.time()))
        for rollout in rollouts:
            _record(rollout)
        return rollouts

    RayCollection.poll = timed_poll
    BasicRLGraphManager.save_checkpoint = _timed("checkpoint", BasicRLGraphManager.save_checkpoint)
    BasicRLGraphManager.run_evaluation = _timed("evaluation", BasicRLGraphManager.run_evaluation)


def report(top: int = 3) -> str:
    pauses = sorted(((b[0] - a[1], a[1], b[0]) for a, b in zip(polls, polls[1:])), reverse=True)[:top]
    discarded = sum(r.ended == "discarded" for r in races.values())
    finished = sum(r.ended == "finished" for r in races.values())
    lines = [f"polls {len(polls)}, races seen {len(races)}: {finished} finished, {discarded} discarded, "
             f"{len(races) - finished - discarded} unfinished at the end"]
    for length, start, end in pauses:
        what = sorted({name for name, s, e in busy if s < end and e > start}) or ["updates / other"]
        across = [r for r in races.values() if r.first < start < r.last]
        ends = {k: sum(r.ended == k for r in across) for k in ("finished", "discarded", "")}
        gap = max((r.max_gap for r in across), default=0.0)
        lines.append(f"pause {length:.2f} s at {start - polls[0][0]:.0f} s ({', '.join(what)}): {len(across)} races in flight when it began "
                     f"({ends['finished']} finished, {ends['discarded']} discarded, {ends['']} unfinished at the "
                     f"end), their longest gap between two actions {gap:.2f} s")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    _install()
    status = cli.main(argv)
    print(report(), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
