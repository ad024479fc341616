"""Benchmark: collection throughput of the learner / collector design on the simulator.

One table from one run, with the ``trackmania_iqn_sim`` network and frame size:

* learning off (the learner stores and never trains), actions/s of
  (a) one process, one environment, batch-1 inference (``gpu_collectors_count: 0``, the old design),
  (b) one collector process stepping k = 8 environments, one forward pass for all 8,
  (c) two collector processes with k = 8 each;
* end to end (learning on, the preset's replay ratio): actions/s and updates/s with 0, 1 and 2
  collectors (k as the preset sets it, or --k);
* policy lag at the preset as it is (its collectors, environments per collector,
  ``send_shared_network_every_n_batches`` N and ``update_inference_network_every_n_actions`` n), with
  collector processes and with Ray actors (a local Ray instance pinned to 127.0.0.1): p50 / p95 of
  ``Performance/policy_lag_batches`` and ``Performance/queue_delay_batches`` over the window, and the
  guide's bound, N + the updates the learner made during n actions of one environment (the window's
  average rates); "met" when p95 <= bound.

Each row runs a fresh graph manager in this process, waits until ``--warmup`` actions are stored
(collectors started, heatup over, training under way) and measures over ``--seconds`` of wall time.

Run:  .venv/bin/python bench/collection.py [--seconds 40] [--warmup 6000] [--k 8] [--only-lag]
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
    actions, updates, _ = measure_with_lag(overrides, warmup, seconds)
    return actions, updates


def measure_with_lag(overrides: list[str], warmup: int, seconds: float) -> tuple[float, float, dict]:
    """(actions/s, updates/s, lag) of trackmania_iqn_sim with ``overrides`` over the window; ``lag`` holds
    the policy lag and queue delay percentiles, the guide's bound and the configuration's N, n."""
    from rulka.collection.lag import LagMeter, policy_lag_bound
    from rulka.config import apply_overrides
    from rulka.presets import load_graph_manager

    graph_manager = load_graph_manager("trackmania_iqn_sim")
    graph_manager.config = apply_overrides(graph_manager.config, overrides=[
        "training.checkpoint_every_n_env_steps=0", *overrides])
    graph_manager.create(None, "cpu", 0)
    meter = LagMeter()
    actions_per_s, updates_per_s, actions, updates = train_and_measure(graph_manager, warmup, seconds, meter)
    perf = graph_manager.config.performance
    environments = max(1, perf.gpu_collectors_count) * perf.envs_per_collector
    lag = {"percentiles": meter.percentiles(), "N": perf.send_shared_network_every_n_batches,
           "n": perf.update_inference_network_every_n_actions,
           "collectors": perf.gpu_collectors_count, "k": perf.envs_per_collector,
           "bound": policy_lag_bound(perf.send_shared_network_every_n_batches,
                                     perf.update_inference_network_every_n_actions, updates, actions / environments)}
    return actions_per_s, updates_per_s, lag


def train_and_measure(graph_manager, warmup: int, seconds: float, meter=None) -> tuple[float, float, int, int]:
    """Train a created ``graph_manager`` in a thread; once ``warmup`` actions are stored, measure for
    ``seconds`` of wall time (``meter``, a LagMeter, listening meanwhile); then stop and close it.
    Returns the window's (actions/s, updates/s, actions, gradient updates)."""
    counters = graph_manager.agent.counters
    thread = threading.Thread(target=graph_manager.improve, kwargs={"max_env_steps": 10 ** 9, "show_progress": False})
    thread.start()
    while counters.env_steps < warmup and thread.is_alive():
        time.sleep(0.05)
    if meter is not None:
        graph_manager.lag_meters.append(meter)
    t1, s1, u1 = time.monotonic(), counters.env_steps, counters.gradient_updates
    time.sleep(seconds)
    t2, s2, u2 = time.monotonic(), counters.env_steps, counters.gradient_updates
    if meter is not None:
        graph_manager.lag_meters.remove(meter)
    graph_manager.stop_requested = True
    thread.join()
    graph_manager.close()
    return (s2 - s1) / (t2 - t1), (u2 - u1) / (t2 - t1), s2 - s1, u2 - u1


def lag_table(warmup: int, seconds: float) -> None:
    """Policy lag and queue delay at the sim preset as it is, with collector processes, then Ray actors."""
    import ray

    print(f"\npolicy lag, trackmania_iqn_sim as the preset sets it, window {seconds:g} s after {warmup} actions")
    print(f"{'backend':<10} {'actions/s':>9} {'updates/s':>9} {'lag p50':>7} {'lag p95':>7} {'bound':>6} "
          f"{'met':>4} {'queue p50':>9} {'queue p95':>9}  configuration")
    for backend in ("processes", "ray"):
        if backend == "ray":  # a local instance on loopback only, small object store
            ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", _node_ip_address="127.0.0.1",
                     object_store_memory=200 * 2 ** 20, _system_config={"worker_niceness": 0})
        try:
            actions, updates, lag = measure_with_lag([f"performance.collector_backend={backend}"], warmup, seconds)
        finally:
            if backend == "ray":
                ray.shutdown()
        p = lag["percentiles"]
        policy, queue = p["policy_lag_batches"], p["queue_delay_batches"]
        met = "yes" if policy[95] <= lag["bound"] else "NO"
        print(f"{backend:<10} {actions:>9.0f} {updates:>9.1f} {policy[50]:>7.0f} {policy[95]:>7.0f} {lag['bound']:>6.1f} "
              f"{met:>4} {queue[50]:>9.0f} {queue[95]:>9.0f}  {lag['collectors']} collector(s) x {lag['k']} envs, "
              f"N = {lag['N']}, n = {lag['n']}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=40.0, help="measuring window per row (default 40)")
    parser.add_argument("--warmup", type=int, default=6000, help="stored actions before measuring (default 6000)")
    parser.add_argument("--k", type=int, default=8, help="environments per collector in rows (b), (c) (default 8)")
    parser.add_argument("--only-lag", action="store_true", help="only the policy-lag table (processes and Ray)")
    args = parser.parse_args()
    if args.only_lag:
        lag_table(args.warmup, args.seconds)
        return
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
    lag_table(args.warmup, args.seconds)


if __name__ == "__main__":
    main()
