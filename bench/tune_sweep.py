"""The sweeps of issue 46's goals, timed: ``rulka tune`` with ASHA, then its table's figures.

    python bench/tune_sweep.py cartpole [--out DIR]      # 8 trials of cartpole_dqn, learning rate x batch size
    python bench/tune_sweep.py trackmania [--out DIR]    # 8 trials x 10 minutes of trackmania_iqn_sim, 3 keys

Prints the command it ran, the sweep's wall time, how many trials ASHA stopped early and the best trial's
evaluation (CartPole: the best average return of 10 greedy episodes; TrackMania: the best greedy race time,
s). Goals (CartPole, 2 cores): under 10 minutes, at least half stopped early, the best reaches 475.
The spaces are bench/spaces/*.yaml. The TrackMania sweep's one ASHA rung is at 5 minutes (--grace-period 300)
rather than the default 66 s: its metric is the best greedy race time, which ranks a trial with no finished
greedy race yet as the worst and falls fast in a run's first minutes (2026-12-05: first finishes 10 to 179 s
into the trials; the trial worst at 5 minutes was mid-table at 10). Results: docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import csv
import shlex
import sys
import time
from pathlib import Path

from rulka.cli import main as rulka
from rulka.config import load_yaml_file

HERE = Path(__file__).resolve().parent
SWEEPS = {
    "cartpole": ["cartpole_dqn", "--space", str(HERE / "spaces" / "cartpole_lr_batch.yaml"), "--samples", "8",
                 "--scheduler", "asha", "--max-steps", "30000", "-cp", "performance.torch_num_threads=1"],
    "trackmania": ["trackmania_iqn_sim", "--space", str(HERE / "spaces" / "trackmania_sim.yaml"), "--samples", "8",
                   "--scheduler", "asha", "--minutes", "10", "--grace-period", "300", "-cp", "performance.torch_num_threads=1"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", choices=sorted(SWEEPS))
    parser.add_argument("--out", default="bench_out", help="the sweep's --experiments-dir (default bench_out)")
    parser.add_argument("--seed", type=int, default=0, help="the sweep's --seed (default 0)")
    args = parser.parse_args()
    name = f"{args.sweep}_{time.strftime('%Y%m%d-%H%M%S')}"
    argv = ["tune", *SWEEPS[args.sweep], "--seed", str(args.seed), "--experiments-dir", args.out, "-e", name]
    print("rulka " + " ".join(shlex.quote(a) for a in argv), flush=True)
    start = time.monotonic()
    status = rulka(argv)
    wall = time.monotonic() - start
    with open(Path(args.out) / name / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    scored = [float(r["evaluation"]) for r in rows if r["evaluation"]]
    lower = load_yaml_file(Path(args.out) / name / "sweep.yaml")["mode"] == "min"  # the preset's evaluation_mode
    best = (min if lower else max)(scored) if scored else None
    stopped = sum(r["stopped_early"] == "yes" for r in rows)
    print(f"sweep {args.sweep}: {wall / 60:.1f} minutes wall time, {len(rows)} trials, {stopped} stopped early by ASHA, "
          f"best evaluation {best if best is not None else '-'}"
          + (" (s, lower is better)" if lower else ""), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
