"""A trained policy outside its run: ``rulka export``, :func:`rulka.policy.load_policy`, ``--evaluate
RUN_DIR`` without ``-p`` and ``--init-from`` (CartPole; TrackMania's side is in
tests/environments/trackmania/test_policy.py)."""
import shutil

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml

from rulka import checkpoints
from rulka.cli import load_run, main
from rulka.export import ExportError, export_policy, init_networks_from
from rulka.policy import load_policy
from rulka.presets import load_graph_manager

TINY = ["--device", "cpu", "--no-progress", "-cp", "memory.memory_size_schedule=[[0, [5000, 300]]]",
        "-cp", "performance.torch_num_threads=1"]
#: A network size the preset does not have: only the run's snapshot can rebuild it.
SMALL = ["-cp", "neural_network.dense_hidden_dimension=32"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A CartPole DQN run of 600 steps (learning from the 300th) with a non-default network size."""
    root = tmp_path_factory.mktemp("runs")
    assert main(["-p", "cartpole_dqn", "-e", "small", "--experiments-dir", str(root), "--max-steps", "600",
                 *TINY, *SMALL]) == 0
    return root / "small"


def online_weights(run_dir):
    return checkpoints.load_checkpoint(run_dir / "checkpoints" / checkpoints.LAST)["agent"]["online_network"]


def test_export_writes_weights_plain_torch_load_reads(run, tmp_path):
    """``rulka export`` writes policy.pt (read by torch.load(weights_only=True): a checkpoint with its header
    is not), the config snapshot and policy.yaml with the spaces and the source's counters."""
    assert main(["export", str(run), "--out", str(tmp_path / "exp")]) == 0
    weights = torch.load(tmp_path / "exp" / "policy.pt", weights_only=True)
    expected = online_weights(run)
    assert set(weights) == set(expected)
    assert all(torch.equal(weights[k], expected[k]) for k in expected)
    with pytest.raises(Exception):
        torch.load(run / "checkpoints" / checkpoints.LAST, weights_only=True)
    description = yaml.safe_load((tmp_path / "exp" / "policy.yaml").read_text())
    assert description["action_space"] == {"type": "Discrete", "n": 2, "start": 0}
    assert description["source"]["counters"]["env_steps"] == 600
    assert (tmp_path / "exp" / "config_snapshot.yaml").read_text() == (run / "config_snapshot.yaml").read_text()


def test_export_refuses_a_folder_with_other_files(run, tmp_path):
    """Export never mixes its files into a folder that holds something else."""
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="not an export"):
        export_policy(run, tmp_path)


def test_predict_takes_raw_and_batched_observations_and_returns_env_actions(run, tmp_path):
    """predict() takes CartPole's bare numpy observation (and a dict, and a batch) and returns the greedy
    action of the run's network: the argmax of the trained agent's Q-values, as an int for one observation
    and an array for a batch. Loading the run folder or its export gives the same policy."""
    policy = load_policy(export_policy(run, tmp_path / "exp"))
    agent = load_run(run, "cpu").agent
    env = gym.make("CartPole-v1")
    observations = np.stack([env.reset(seed=s)[0] for s in range(16)])
    with torch.no_grad():
        expected = agent.q_values({"observation": torch.as_tensor(observations)}).argmax(1).numpy()
    singles = [policy.predict(obs, deterministic=True) for obs in observations]
    assert all(type(a) is int for a in singles)
    assert singles == expected.tolist()
    assert policy.predict(observations).tolist() == expected.tolist()
    assert policy.predict({"observation": observations[0]}) == expected[0]
    assert load_policy(run).predict(observations).tolist() == expected.tolist()
    assert policy.q_values(observations).shape == (16, 2)
    exploring = {policy.predict(observations[0], deterministic=False) for _ in range(50)}
    assert exploring == {0, 1}  # epsilon 0.94 at the checkpoint step 600
    with pytest.raises(ValueError, match=r"takes \(4,\) \(one observation\)"):
        policy.predict(np.zeros(5, dtype=np.float32))


def test_a_policy_drives_cartpole_to_the_end_of_an_episode(run):
    """The policy's actions go straight to env.step, episode after episode."""
    policy = load_policy(run)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=3)
    steps, done = 0, False
    while not done:
        obs, _, terminated, truncated, _ = env.step(policy.predict(obs))
        done, steps = terminated or truncated, steps + 1
    assert steps >= 1


PRESET_WITH_FILTERS = '''
from agents.dqn_agent import DQNAgent
from filters import InputFilter, OutputFilter
from filters.action_filters import DiscreteToDictActionFilter
from filters.observation_filters import ObservationNormalizationFilter
from rulka.graph_manager import BasicRLGraphManager
from rulka.parameters import ExperimentConfig, GymEnvironmentParameters

config = ExperimentConfig(environment=GymEnvironmentParameters(level="CartPole-v1"))
graph_manager = BasicRLGraphManager(
    DQNAgent, config,
    input_filter=InputFilter({"observation": [ObservationNormalizationFilter([0.5, 1.0, 0.1, 2.0], [2.0, 3.0, 0.5, 4.0])]}),
    output_filter=OutputFilter([DiscreteToDictActionFilter([{"push": "left"}, {"push": "right"}])]))
'''


def test_predict_applies_the_exported_input_and_output_filters(tmp_path):
    """The filters' state (a normalisation's mean and std) travels in policy.yaml: the exported policy
    normalises the raw observation as the run did and returns the output filter's action (a dict here)."""
    preset = tmp_path / "filtered.py"
    preset.write_text(PRESET_WITH_FILTERS)
    graph_manager = load_graph_manager(str(preset))
    run_dir = tmp_path / "run"
    graph_manager.create(run_dir, "cpu", 0)
    (run_dir / "run_info.yaml").write_text(yaml.safe_dump({"preset": str(preset), "seed": 0}))
    graph_manager.save_checkpoint()
    graph_manager.close()
    policy = load_policy(export_policy(run_dir, tmp_path / "exp"))
    observations = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    normalised = (observations - np.array([0.5, 1.0, 0.1, 2.0], np.float32)) / np.array([2.0, 3.0, 0.5, 4.0], np.float32)
    with torch.no_grad():
        best = graph_manager.agent.q_values({"observation": torch.as_tensor(normalised)}).argmax(1).numpy()
    table = [{"push": "left"}, {"push": "right"}]
    assert policy.predict(observations) == [table[b] for b in best]
    assert policy.predict(observations[0]) == table[best[0]]


def test_evaluate_a_run_folder_without_preset_or_flags(run, tmp_path, capsys):
    """--evaluate RUN_DIR (or its export, or a checkpoint in it) builds the network from the run's snapshot:
    no -p, no repeated -cp. A bare checkpoint needs -p, and with the preset's sizes the error names the layer
    and both shapes."""
    for source in (run, run / "checkpoints" / checkpoints.LAST, export_policy(run, tmp_path / "exp")):
        assert main(["--evaluate", str(source), "--device", "cpu", "-cp", "training.evaluation_episodes=2"]) == 0
        assert "average return" in capsys.readouterr().out
    bare = tmp_path / "bare.pt"
    shutil.copy(run / "checkpoints" / checkpoints.LAST, bare)
    assert main(["--evaluate", str(bare), "--device", "cpu"]) == 2
    assert "give the run's preset with -p" in capsys.readouterr().err
    assert main(["-p", "cartpole_dqn", "--evaluate", str(bare), "--device", "cpu"]) == 2
    assert "layer 'head.value.0.0.weight' has shape (32, 128)" in capsys.readouterr().err
    assert main(["-p", "cartpole_dqn", "--evaluate", str(bare), "--device", "cpu", *SMALL,
                 "-cp", "training.evaluation_episodes=2"]) == 0


def test_init_from_starts_both_networks_from_the_weights_and_everything_else_fresh(run, tmp_path):
    """--init-from: the new run's online and target networks are the source's online network; counters,
    optimizer and memory start empty; the run folder records the source."""
    for source in (run, export_policy(run, tmp_path / "exp")):
        name = f"from_{source.name}"
        assert main(["-p", "cartpole_dqn", "-e", name, "--experiments-dir", str(tmp_path), "--init-from", str(source),
                     "--max-steps", "0", *TINY, *SMALL]) == 0
        state = checkpoints.load_checkpoint(tmp_path / name / "checkpoints" / checkpoints.LAST)["agent"]
        expected = online_weights(run)
        for network in ("online_network", "target_network"):
            assert all(torch.equal(state[network][k], expected[k]) for k in expected)
        assert state["counters"] == {"env_steps": 0, "episodes": 0, "gradient_updates": 0, "transitions_sampled": 0}
        assert state["optimizer"]["state"] == {}
        assert len(load_run(tmp_path / name, "cpu").agent.memory) == 0
        recorded = yaml.safe_load((tmp_path / name / "init_from.yaml").read_text())
        assert recorded["source"] == str(source) and recorded["counters"]["env_steps"] == 600


def test_init_from_a_different_network_names_the_layer_and_both_shapes(run, tmp_path, capsys):
    """A shape mismatch is refused with the layer and both shapes, and leaves no half-made run folder."""
    assert main(["-p", "cartpole_dqn", "-e", "wrong", "--experiments-dir", str(tmp_path), "--init-from", str(run),
                 "--max-steps", "0", *TINY]) == 2
    error = capsys.readouterr().err
    assert "layer 'head.value.0.0.weight' has shape (32, 128) in --init-from" in error
    assert "and (128, 128) in this run's network" in error
    assert not (tmp_path / "wrong").exists()


def test_init_from_then_training_learns_from_the_loaded_weights(run, tmp_path):
    """From Python: a graph manager created for a new run, initialised from the run, trains on."""
    graph_manager = load_graph_manager("cartpole_dqn")
    from rulka.config import apply_overrides

    graph_manager.config = apply_overrides(graph_manager.config, [], [c for c in TINY + SMALL if "=" in c])
    graph_manager.create(tmp_path / "py", "cpu", 1)
    init_networks_from(graph_manager, run)
    summary = graph_manager.improve(400, show_progress=False)
    graph_manager.close()
    assert summary.env_steps == 400 and summary.gradient_updates > 0
