import subprocess
import sys

import pytest
import torch
import yaml

from rulka import checkpoints
from rulka.cli import load_run, main, write_run_info
from rulka.machine import describe_machine

FAST = ["--device", "cpu", "--no-progress"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rulka.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.reliability
def test_wrong_preset_name_is_one_line_error_with_suggestion():
    """A typo in -p gives one line naming the closest preset, no traceback, exit code 2."""
    result = run_cli("-p", "cartpole_iqm")
    assert result.returncode == 2
    assert "no preset named 'cartpole_iqm'; did you mean 'cartpole_iqn'?" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.reliability
def test_bad_override_and_missing_file_are_refused_before_work(tmp_path):
    """-cp with a wrong type and a missing --config file are refused without creating a run folder."""
    bad = run_cli("-p", "cartpole_iqn", "-cp", "training.batch_size=abc", "--experiments-dir", str(tmp_path))
    assert bad.returncode == 2 and "training.batch_size: expected int, got str 'abc'" in bad.stderr
    missing = run_cli("-p", "cartpole_iqn", "--config", str(tmp_path / "nope.yaml"), "--experiments-dir", str(tmp_path))
    assert missing.returncode == 2 and "config file not found" in missing.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.reliability
def test_misspelled_yaml_key_is_refused(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("trainig:\n  batch_size: 3\n")
    result = run_cli("-p", "cartpole_iqn", "--config", str(config), "--experiments-dir", str(tmp_path / "runs"))
    assert result.returncode == 2 and "did you mean 'training'" in result.stderr


def test_help_explains_every_flag():
    result = run_cli("--help")
    for flag in ("--preset", "--list", "--experiment-name", "--config", "-cp", "--seed", "--device", "--evaluate",
                 "--resume", "--max-steps"):
        assert flag in result.stdout


def test_resume_continues_counters_epsilon_and_optimizer(tmp_path):
    """A run stopped at 3000 steps resumes with the checkpoint's weights, counters, epsilon and
    optimizer state, writes a config snapshot and its machine, and continues to 6000 steps."""
    assert main(["-p", "cartpole_iqn", "--max-steps", "3000", "-e", "x", "--experiments-dir", str(tmp_path), *FAST]) == 0
    run = tmp_path / "x"
    assert (run / "config_snapshot.yaml").is_file()
    assert yaml.safe_load((run / "run_info.yaml").read_text())["machine"] == describe_machine()  # runs compare beside it
    saved = checkpoints.load_checkpoint(run / "checkpoints" / checkpoints.LAST)
    assert saved["agent"]["counters"]["env_steps"] == 3000
    assert saved["agent"]["counters"]["gradient_updates"] > 0

    graph_manager = load_run(run, "cpu")
    agent = graph_manager.agent
    assert agent.counters.to_dict() == saved["agent"]["counters"]
    for name, tensor in agent.online_network.state_dict().items():
        assert torch.equal(tensor, saved["agent"]["online_network"][name]), name
    for name, tensor in agent.target_network.state_dict().items():
        assert torch.equal(tensor, saved["agent"]["target_network"][name]), name
    resumed_opt = agent.optimizer.state_dict()["state"]
    for key, state in saved["agent"]["optimizer"]["state"].items():
        assert torch.equal(resumed_opt[key]["exp_avg"], state["exp_avg"])
        assert torch.equal(resumed_opt[key]["step"], state["step"])
    epsilon = agent.exploration.current_values(agent.schedule_step(agent.config.exploration.epsilon_schedule))["epsilon"]
    assert epsilon == pytest.approx(agent.config.exploration.epsilon_schedule.value(3000))
    assert len(agent.memory) > 0
    graph_manager.close()

    assert main(["--resume", str(run), "--max-steps", "6000", *FAST]) == 0
    final = checkpoints.load_checkpoint(run / "checkpoints" / checkpoints.LAST)
    assert final["agent"]["counters"]["env_steps"] == 6000
    assert final["agent"]["counters"]["gradient_updates"] > saved["agent"]["counters"]["gradient_updates"]
    assert final["agent"]["counters"]["episodes"] > saved["agent"]["counters"]["episodes"]
    resumed = yaml.safe_load((run / "run_info.yaml").read_text())["resumed"]
    assert resumed == [{"env_steps": 3000, "machine": describe_machine()}]  # where its later minutes ran


def test_evaluate_only_prints_average(tmp_path, capsys):
    assert main(["-p", "cartpole_iqn", "--max-steps", "1200", "-e", "e", "--experiments-dir", str(tmp_path), *FAST]) == 0
    capsys.readouterr()
    assert main(["-p", "cartpole_iqn", "--evaluate", str(tmp_path / "e" / "checkpoints" / "last.pt"),
                 "-cp", "training.evaluation_episodes=2", *FAST]) == 0
    assert "average return" in capsys.readouterr().out


def test_a_run_info_write_killed_halfway_keeps_the_old_file(tmp_path, monkeypatch):
    """--resume rewrites run_info.yaml, which the next --resume needs: a write cut short (a kill, a full
    disk) must leave the previous file whole and no temporary file."""
    write_run_info(tmp_path, {"preset": "cartpole_iqn", "seed": 3})

    def dies_before_the_data_is_safe(fd):
        raise OSError("killed while writing")

    monkeypatch.setattr(checkpoints.os, "fsync", dies_before_the_data_is_safe)
    with pytest.raises(OSError):
        write_run_info(tmp_path, {"preset": "cartpole_iqn", "seed": 3, "resumed": [{"env_steps": 10}]})
    monkeypatch.undo()
    assert yaml.safe_load((tmp_path / "run_info.yaml").read_text()) == {"preset": "cartpole_iqn", "seed": 3}
    assert [p.name for p in tmp_path.iterdir()] == ["run_info.yaml"]
