"""Run the preset golden tests and print how many environment steps and how much wall time each
preset needed to reach its threshold (the test only says pass or fail).

    python bench/golden_presets.py [PRESET ...] [--backend ray] [--repeats 3]

Default: every preset with validation parameters, in the learner's process (as
``tests/presets/test_golden.py``). ``--backend processes|ray`` runs one collector process or Ray
actor beside the learner (as the Ray golden test in ``tests/rulka/collection/test_ray_collection.py``).
"""
from __future__ import annotations

import argparse
import time

from rulka.presets import available_presets, load_graph_manager


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("presets", nargs="*", help="preset names (default: every golden preset)")
    parser.add_argument("--backend", choices=["in_process", "processes", "ray"], default="in_process",
                        help="where the environment runs: the learner's process (default), or one collector")
    parser.add_argument("--repeats", type=int, default=1, help="runs per preset (seed 0 each; collectors vary)")
    args = parser.parse_args()
    names = args.presets or [n for n in available_presets() if load_graph_manager(n).preset_validation_params.test]
    if args.backend == "ray":
        import ray
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", _node_ip_address="127.0.0.1")
    for name in names:
        for _ in range(args.repeats):
            graph_manager = load_graph_manager(name)
            if args.backend != "in_process":
                graph_manager.config.performance.collector_backend = args.backend
                graph_manager.config.performance.gpu_collectors_count = 1
            validation = graph_manager.preset_validation_params
            graph_manager.create(None, "cpu", seed=0)
            start = time.monotonic()
            summary = graph_manager.improve(validation.max_env_steps,
                                            stop_at_evaluation=validation.min_reward_threshold, show_progress=False)
            graph_manager.close()
            verdict = "reached" if summary.reached_threshold else "MISSED"
            print(f"{name} ({args.backend}): {verdict} {validation.min_reward_threshold} (evaluation average "
                  f"{summary.last_evaluation:.1f}) after {summary.env_steps} env steps (limit "
                  f"{validation.max_env_steps}), {summary.gradient_updates} gradient updates, "
                  f"{time.monotonic() - start:.0f} s wall time, seed 0, CPU", flush=True)
            print(f"  evaluations (env steps, average return): {graph_manager.evaluation_history}", flush=True)


if __name__ == "__main__":
    main()
