"""Run the preset golden tests and print how many environment steps and how much wall time each
preset needed to reach its threshold (the test only says pass or fail).

    python bench/golden_presets.py [PRESET ...]     # default: every preset with validation parameters
"""
from __future__ import annotations

import sys
import time

from rulka.presets import available_presets, load_graph_manager


def main(names: list[str]) -> None:
    names = names or [n for n in available_presets() if load_graph_manager(n).preset_validation_params.test]
    for name in names:
        graph_manager = load_graph_manager(name)
        validation = graph_manager.preset_validation_params
        graph_manager.create(None, "cpu", seed=0)
        start = time.monotonic()
        summary = graph_manager.improve(validation.max_env_steps, stop_at_evaluation=validation.min_reward_threshold,
                                        show_progress=False)
        graph_manager.close()
        verdict = "reached" if summary.reached_threshold else "MISSED"
        print(f"{name}: {verdict} {validation.min_reward_threshold} (evaluation average {summary.last_evaluation:.1f}) "
              f"after {summary.env_steps} env steps (limit {validation.max_env_steps}), "
              f"{summary.gradient_updates} gradient updates, {time.monotonic() - start:.0f} s wall time, seed 0, CPU")
        print(f"  evaluations (env steps, average return): {graph_manager.evaluation_history}")


if __name__ == "__main__":
    main(sys.argv[1:])
