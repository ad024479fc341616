"""End to end: the actions/s a preset plays (learner and collectors together, as ``rulka -p`` runs it)
over a timed window, for several variants in alternating runs.

    python bench/preset_actions_per_s.py [--preset trackmania_iqn_sim] [--seconds 150] [--warmup 60]
        [--rounds 2] --variant NAME:[CHECKOUT]:[KEY=VALUE,...] [--variant ...]

Each variant is a checkout of rulka (empty: this one) and ``-cp`` overrides; e.g. today's code
against this one's float32 and its shipped ``auto``::

    git archive 25b8d27 | tar -x -C /tmp/rulka_today    # the code before issue 23
    python bench/preset_actions_per_s.py --variant today:/tmp/rulka_today: \\
        --variant float32::performance.precision=float32 --variant auto::

Every run is a fresh process (its checkout first on PYTHONPATH) that trains the preset (seed 0, CPU,
a temporary run folder, no replay in the final checkpoint) and counts the environment steps stored
and the gradient updates between ``--warmup`` s and ``--warmup + --seconds`` s of wall time (heatup
and start-up left out). Variants take turns, ``--rounds`` times; the table gives actions/s and
updates/s (mean [min-max]) and the ratio of actions/s to the first variant's in the same round.
Goal (issue 23): trackmania_iqn_sim plays >= 1.5x today's actions/s on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(preset: str, seconds: float, warmup: float, overrides: list[str]) -> None:
    """Train ``preset``; print {"actions", "updates", "seconds"} counted over the window."""
    from rulka.config import apply_overrides
    from rulka.presets import load_graph_manager

    graph_manager = load_graph_manager(preset)
    graph_manager.config = apply_overrides(graph_manager.config, [], ["memory.save_memory_in_checkpoint=false",
                                                                      *overrides])
    run_dir = Path(tempfile.mkdtemp(prefix="rulka_actions_"))
    graph_manager.create(run_dir, "cpu", 0)
    marks: list[tuple[float, int, int]] = []

    def mark() -> None:
        counters = graph_manager.agent.counters
        marks.append((time.monotonic(), counters.env_steps, counters.gradient_updates))

    def clock() -> None:
        time.sleep(warmup)
        mark()
        time.sleep(seconds)
        mark()
        graph_manager.stop_requested = True

    threading.Thread(target=clock, daemon=True).start()
    try:
        graph_manager.improve(show_progress=False)
    finally:
        graph_manager.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    if len(marks) < 2:
        raise SystemExit(f"the run stopped before {warmup + seconds:g} s of wall time")
    (t0, a0, u0), (t1, a1, u1) = marks
    if a0 == 0:
        raise SystemExit(f"no action stored after {warmup:g} s: raise --warmup")
    print(json.dumps({"actions": a1 - a0, "updates": u1 - u0, "seconds": t1 - t0}))


def run_variant(preset: str, checkout: str, overrides: list[str], seconds: float, warmup: float) -> dict:
    code = checkout or str(ROOT)
    env = {**os.environ, "PYTHONPATH": code + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--preset", preset, "--seconds", str(seconds),
               "--warmup", str(warmup), *[a for o in overrides for a in ("-cp", o)]]
    result = subprocess.run(command, cwd=code, env=env, capture_output=True, text=True, timeout=warmup + seconds + 600)
    if result.returncode != 0:
        raise SystemExit(f"variant {checkout or 'this checkout'} {overrides} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def spread(values: list[float], digits: int = 0) -> str:
    return f"{sum(values) / len(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="trackmania_iqn_sim")
    parser.add_argument("--seconds", type=float, default=150.0, help="measured window per run, s")
    parser.add_argument("--warmup", type=float, default=60.0, help="wall time before the window (start-up, heatup), s")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:[CHECKOUT]:[KEY=VALUE,...]")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("-cp", action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # (its checkout is first on PYTHONPATH)
        child(args.preset, args.seconds, args.warmup, args.cp)
        return
    variants = []
    for spec in args.variant or ["this::"]:
        name, checkout, overrides = (spec.split(":", 2) + ["", ""])[:3]
        variants.append((name, checkout, [o for o in overrides.split(",") if o]))
    print(f"{args.preset}: {args.rounds} alternating rounds, actions counted from {args.warmup:g} s to "
          f"{args.warmup + args.seconds:g} s of each run; started {time.strftime('%H:%M UTC', time.gmtime())}", flush=True)
    results: dict[str, list[dict]] = {name: [] for name, _, _ in variants}
    for _ in range(args.rounds):
        for name, checkout, overrides in variants:
            r = run_variant(args.preset, checkout, overrides, args.seconds, args.warmup)
            results[name].append(r)
            print(f"  {name}: {r['actions'] / r['seconds']:.0f} actions/s, {r['updates'] / r['seconds']:.1f} updates/s",
                  flush=True)
    first = results[variants[0][0]]
    print("| variant | actions/s | updates/s | actions/s ratio to " + variants[0][0] + " (per round: median [min-max]) |")
    print("|---|---|---|---|")
    for name, runs in results.items():
        actions = [r["actions"] / r["seconds"] for r in runs]
        updates = [r["updates"] / r["seconds"] for r in runs]
        ratios = [a / (f["actions"] / f["seconds"]) for a, f in zip(actions, first)]
        print(f"| {name} | {spread(actions)} | {spread(updates, 1)} | {statistics.median(ratios):.2f} "
              f"[{min(ratios):.2f}-{max(ratios):.2f}] |")
    print(f"finished {time.strftime('%H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
