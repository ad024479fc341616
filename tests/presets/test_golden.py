"""Coach-style preset golden tests: each preset that declares validation parameters must reach its
minimum evaluation return within its maximum number of environment steps (seed 0, CPU)."""
import pytest

from rulka.presets import available_presets, load_graph_manager

GOLDEN = [name for name in available_presets() if load_graph_manager(name).preset_validation_params.test]


@pytest.mark.golden
@pytest.mark.parametrize("preset", GOLDEN)
def test_preset_reaches_its_threshold(preset):
    graph_manager = load_graph_manager(preset)
    validation = graph_manager.preset_validation_params
    graph_manager.create(None, "cpu", seed=0)
    summary = graph_manager.improve(validation.max_env_steps, stop_at_evaluation=validation.min_reward_threshold,
                                    show_progress=False)
    graph_manager.close()
    assert summary.reached_threshold, (
        f"{preset}: best evaluation {summary.best_evaluation} < {validation.min_reward_threshold} "
        f"after {summary.env_steps} env steps; history {graph_manager.evaluation_history}")
    assert summary.env_steps <= validation.max_env_steps


def test_cartpole_qr_dqn_is_a_golden_preset():
    """The QR-DQN preset of docs/new_agent.md keeps its golden run (dropping test=True would skip it silently)."""
    assert "cartpole_qr_dqn" in GOLDEN
