"""Exact resume (a trace test, as Coach's): stopped at a checkpoint and resumed, a run continues as if
it had never stopped: the same losses after the stop and the same final weights."""
import torch

from rulka import checkpoints
from rulka.cli import load_run
from rulka.config import apply_overrides
from rulka.presets import load_graph_manager

OVERRIDES = ["memory.memory_size_schedule=[[0, [5000, 300]]]", "training.batch_size=32",
             "training.checkpoint_every_n_env_steps=700", "training.evaluate_every_n_env_steps=1100",
             "training.evaluation_episodes=2", "performance.gpu_collectors_count=0"]
TOTAL = 2_000


class Killed(Exception):
    pass


def _run(run_dir, kill_after_first_checkpoint: bool):
    graph_manager = load_graph_manager("cartpole_iqn")
    graph_manager.config = apply_overrides(graph_manager.config, overrides=OVERRIDES)
    graph_manager.create(run_dir, "cpu", seed=3)
    (run_dir / "run_info.yaml").write_text("preset: cartpole_iqn\nseed: 3\ndevice: cpu\n")
    trace = _trace(graph_manager)
    if kill_after_first_checkpoint:
        save = graph_manager.save_checkpoint

        def save_then_die(name=checkpoints.LAST):
            path = save(name)
            if name == checkpoints.LAST:
                raise Killed
            return path

        graph_manager.save_checkpoint = save_then_die
        try:
            graph_manager.improve(TOTAL, show_progress=False)
        except Killed:
            pass
        graph_manager.close()
        return trace
    graph_manager.improve(TOTAL, show_progress=False)
    return trace, graph_manager


def _trace(graph_manager):
    trace = []
    log_training = graph_manager.log_training
    graph_manager.log_training = lambda stats: (trace.append((graph_manager.agent.counters.gradient_updates,
                                                              stats["loss"])), log_training(stats))
    return trace


def test_a_run_stopped_at_a_checkpoint_and_resumed_matches_the_uninterrupted_run(tmp_path):
    straight_trace, straight = _run(tmp_path / "straight", kill_after_first_checkpoint=False)
    _run(tmp_path / "stopped", kill_after_first_checkpoint=True)
    saved = checkpoints.load_checkpoint(tmp_path / "stopped" / "checkpoints" / checkpoints.LAST)
    stopped_at = saved["agent"]["counters"]["gradient_updates"]
    assert 0 < saved["agent"]["counters"]["env_steps"] < TOTAL
    resumed = load_run(tmp_path / "stopped", "cpu")
    resumed_trace = _trace(resumed)
    resumed.improve(TOTAL, show_progress=False)
    assert resumed.agent.counters == straight.agent.counters
    assert resumed_trace and resumed_trace == [t for t in straight_trace if t[0] > stopped_at]
    for a, b in zip(straight.agent.online_network.state_dict().values(),
                    resumed.agent.online_network.state_dict().values()):
        assert torch.equal(a, b)
    assert resumed.evaluation_history == straight.evaluation_history
