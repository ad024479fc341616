"""Benchmark: collection throughput of the learner / collector design on the simulator.

One table from one run, with the ``trackmania_iqn_sim`` network and frame size:

* learning off (the learner stores and never trains), actions/s of
  (a) one process, one environment, batch-1 inference (``gpu_collectors_count: 0``, the old design),
  (b) one collector process stepping k = 8 environments, one forward pass for all 8,
  (c) two collector processes with k = 8 each;
* end to end (learning on, the preset's replay ratio): actions/s and updates/s with 0, 1 and 2
  collectors (k as the preset sets it, or --k).

Each row runs a fresh graph manager in this process, waits until ``--warmup`` actions are stored
(collectors started, heatup over, training under way) and measures over ``--seconds`` of wall time.

Run:  .venv/bin/python bench/collection.py [--seconds 40] [--warmup 6000] [--k 8]
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measure(overrides: list[str], warmup: int, seconds: float) -> tuple[float, float]:
    """(actions/s, updates/s) of trackmania_iqn_sim with ``overrides``, after ``warmup`` stored actions."""
    from rulka.config import apply_overrides
    from rulka.presets import load_graph_manager

    graph_manager = load_graph_manager("trackmania_iqn_sim")
    graph_manager.config = apply_overrides(graph_manager.config, overrides=[
        "training.checkpoint_every_n_env_steps=0", *overrides])
    graph_manager.create(None, "cpu", 0)
    counters = graph_manager.agent.counters
    thread = threading.Thread(target=graph_manager.improve, kwargs={"max_env_steps": 10 ** 9, "show_progress": False})
    thread.start()
    while counters.env_steps < warmup and thread.is_alive():
        time.sleep(0.05)
    t1, s1, u1 = time.monotonic(), counters.env_steps, counters.gradient_updates
    time.sleep(seconds)
    t2, s2, u2 = time.monotonic(), counters.env_steps, counters.gradient_updates
    graph_manager.stop_requested = True
    thread.join()
    graph_manager.close()
    return (s2 - s1) / (t2 - t1), (u2 - u1) / (t2 - t1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=40.0, help="measuring window per row (default 40)")
    parser.add_argument("--warmup", type=int, default=6000, help="stored actions before measuring (default 6000)")
    parser.add_argument("--k", type=int, default=8, help="environments per collector in rows (b), (c) (default 8)")
    args = parser.parse_args()
    learning_off = ["training.train_every_n_env_steps=1000000000", "memory.memory_size_schedule=[[0, [50000, 1000]]]"]
    k = args.k
    rows = [
        ("(a) learning off, 1 process, 1 env, batch-1 inference", learning_off + ["performance.gpu_collectors_count=0"]),
        (f"(b) learning off, 1 collector x {k} envs", learning_off + ["performance.gpu_collectors_count=1",
                                                                     f"performance.envs_per_collector={k}"]),
        (f"(c) learning off, 2 collectors x {k} envs", learning_off + ["performance.gpu_collectors_count=2",
                                                                      f"performance.envs_per_collector={k}"]),
        ("end to end, 0 collectors (learner plays 1 env)", ["performance.gpu_collectors_count=0"]),
        (f"end to end, 1 collector x {k} envs", ["performance.gpu_collectors_count=1", f"performance.envs_per_collector={k}"]),
        (f"end to end, 2 collectors x {k} envs", ["performance.gpu_collectors_count=2", f"performance.envs_per_collector={k}"]),
    ]
    print(f"trackmania_iqn_sim, {os.cpu_count()} CPUs, torch threads per collector 1, window {args.seconds:g} s "
          f"after {args.warmup} actions")
    print(f"{'configuration':<52} {'actions/s':>10} {'updates/s':>10} {'vs (a)':>7}")
    base = None
    for name, overrides in rows:
        actions, updates = measure(overrides, args.warmup, args.seconds)
        base = base or actions
        print(f"{name:<52} {actions:>10.0f} {updates:>10.1f} {actions / base:>6.2f}x", flush=True)


if __name__ == "__main__":
    main()
