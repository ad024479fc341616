"""Benchmark: actions/s of Ray collector actors against collector processes, same count, same machine.

The learner side only receives: it polls the collection, reads every rollout (the transport is
part of what is measured), publishes its weights every ``--publish-every`` polls and its counters
at every poll, as the training loop does, but does not train, so the figure is the collectors'
throughput and not the learner's. Counting starts once every collector has sent something. Ray
runs as ``rulka`` starts it without ``--ray-address``: a local instance.

Run:  .venv/bin/python bench/ray_vs_processes.py [--preset trackmania_iqn_sim] [--collectors 2] [--seconds 30]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measure(backend: str, preset: str, collectors: int, envs: int, seconds: float, publish_every: int) -> float:
    """Collected actions per second with ``collectors`` collectors of the given backend."""
    from rulka.presets import load_graph_manager

    graph_manager = load_graph_manager(preset)
    perf = graph_manager.config.performance
    perf.collector_backend, perf.gpu_collectors_count, perf.envs_per_collector = backend, collectors, envs
    perf.collector_device = "cpu"
    graph_manager.create(None, "cpu", seed=0)
    agent, setup = graph_manager.agent, graph_manager.collector_setup()
    if backend == "ray":
        from rulka.collection.ray_collection import RayCollection

        collection = RayCollection(setup, agent)
    else:
        from rulka.collection.processes import ProcessCollection

        collection = ProcessCollection(setup, agent)
    collection.start(agent, heatup=False)
    try:
        deadline = time.monotonic() + 300
        while min(collection.actions_per_collector()) == 0 and time.monotonic() < deadline:
            collection.poll(False)
        start, actions_before = time.monotonic(), sum(collection.actions_per_collector())
        polls = 0
        while time.monotonic() - start < seconds:
            collection.poll(False)
            polls += 1
            if polls % publish_every == 0:
                collection.publish(agent)
            collection.publish_counters(agent, False)
        return (sum(collection.actions_per_collector()) - actions_before) / (time.monotonic() - start)
    finally:
        collection.stop()
        graph_manager.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="trackmania_iqn_sim")
    parser.add_argument("--collectors", type=int, default=2)
    parser.add_argument("--envs-per-collector", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--publish-every", type=int, default=20, help="polls between two weight publications")
    parser.add_argument("--order", default="processes,ray", help="which backend runs first (the machine may warm up)")
    args = parser.parse_args()
    rates = {}
    for backend in args.order.split(","):
        rates[backend] = measure(backend, args.preset, args.collectors, args.envs_per_collector, args.seconds,
                                 args.publish_every)
        print(f"{backend:>9}: {rates[backend]:8.1f} actions/s ({args.collectors} collectors x "
              f"{args.envs_per_collector} environments, {args.preset}, {args.seconds:g} s)", flush=True)
    print(f"ray / processes: {rates['ray'] / rates['processes']:.2f}x")


if __name__ == "__main__":
    main()
