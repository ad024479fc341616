"""rulka/demonstrations.py: the ``demonstrations`` section in a run: a missing set is refused before
any work, a run pretrains once (not again on --resume) and draws demonstrations into its batches."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from memories.demonstrations import DemoEpisode, MixedReplay, write_demonstrations
from rulka import checkpoints
from rulka.cli import main, write_run_info
from rulka.config import apply_overrides
from rulka.presets import load_graph_manager

FAST = ["--device", "cpu", "--no-progress", "-cp", "performance.torch_num_threads=1"]


def record_cartpole(folder, episodes: int = 2) -> None:
    """Episodes of a pole-balancing rule (push towards the side the pole falls), 500 steps each."""
    env = gym.make("CartPole-v1")
    found = []
    for seed in range(episodes):
        obs, _ = env.reset(seed=seed)
        states, actions, rewards = [obs], [], []
        while True:
            action = int(obs[2] + 0.5 * obs[3] > 0)
            obs, reward, terminated, truncated, _ = env.step(action)
            states.append(obs), actions.append(action), rewards.append(reward)
            if terminated or truncated:
                break
        found.append(DemoEpisode({"observation": np.array(states, np.float32)}, np.array(actions),
                                 np.array(rewards, np.float32), terminated, truncated))
    write_demonstrations(folder, found, {"policy": "pole rule"}, 2)


def test_a_missing_set_is_refused_before_the_run_folder_is_made(tmp_path, capsys):
    """demonstrations.folders naming a folder without a set: exit 2, the entry and the fix named."""
    status = main(["-p", "cartpole_dqn", "-cp", f"demonstrations.folders=[{tmp_path / 'none'}]", "-e", "x",
                   "--experiments-dir", str(tmp_path / "exp"), *FAST])
    assert status == 2 and "demonstrations.folders[0]" in capsys.readouterr().err
    assert not (tmp_path / "exp" / "x").exists()


def test_a_run_pretrains_once_and_keeps_demonstrations_in_its_batches(tmp_path, capsys):
    """The run pretrains before its first action (its gradient updates start at pretrain_updates,
    nothing sampled), then learns from batches that hold the scheduled share of demonstrations; a
    resumed run reads the set again without pretraining; evaluating the run needs no set (it was
    deleted) and reads none."""
    import shutil

    preset = "cartpole_dqn"  # (every agent's pretraining: tests/agents/test_demonstrations.py)
    record_cartpole(tmp_path / "demos")
    run = tmp_path / "exp" / "x"
    cp = ["-cp", f"demonstrations.folders=[{tmp_path / 'demos'}]", "-cp", "demonstrations.pretrain_updates=40",
          "-cp", "memory.memory_size_schedule=[[0, [5000, 300]]]"]
    graph_manager = load_graph_manager(preset)
    graph_manager.config = apply_overrides(graph_manager.config, [], [c for c in cp if c != "-cp"] +
                                           ["performance.torch_num_threads=1"])
    run.mkdir(parents=True)
    write_run_info(run, {"preset": preset, "seed": 0, "device": "cpu"})
    graph_manager.create(run, "cpu", 0)
    assert not isinstance(graph_manager.agent.memory, MixedReplay)  # read when collection starts
    graph_manager.improve(700, show_progress=False)
    agent, memory = graph_manager.agent, graph_manager.agent.memory
    assert graph_manager.pretraining.updates == 40
    assert agent.counters.gradient_updates > 40
    assert agent.counters.transitions_sampled == (agent.counters.gradient_updates - 40) * 64
    assert isinstance(memory, MixedReplay) and len(memory.demonstrations) > 900
    assert memory.demonstration_rows > 0  # demonstrations were drawn into the learner's batches
    batch = memory.sample(64, 0.99)
    assert (~batch.priority_mask).sum() == round(64 * memory.share()) > 0
    graph_manager.close()
    capsys.readouterr()

    assert main(["--resume", str(run), "--max-steps", "900", *FAST]) == 0
    err = capsys.readouterr().err
    assert "demonstration episode(s)" in err and "pretrained" not in err
    saved = checkpoints.load_checkpoint(run / "checkpoints" / checkpoints.LAST)["agent"]["counters"]
    assert saved["env_steps"] == 900 and saved["gradient_updates"] > agent.counters.gradient_updates

    shutil.rmtree(tmp_path / "demos")
    assert main(["--evaluate", str(run), *FAST]) == 0
    assert "demonstration" not in capsys.readouterr().err
