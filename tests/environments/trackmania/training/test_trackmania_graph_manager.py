import csv
import subprocess
import sys

import pytest

from rulka import checkpoints
from rulka.cli import load_run, main

SMALL = ["-cp", "memory.memory_size_schedule=[[0, [3000, 300]]]", "-cp", "training.batch_size=16",
         "-cp", "training.checkpoint_every_n_env_steps=0", "--device", "cpu", "--no-progress",
         "-cp", "performance.gpu_collectors_count=0", "-cp", "performance.envs_per_collector=1"]  # exact counters


def test_sim_run_follows_the_map_cycle_and_resumes(tmp_path):
    """A short trackmania_iqn_sim run alternates 4 exploring and 1 greedy race, logs races.csv,
    trains, checkpoints, and resumes at the same cycle position and counters."""
    assert main(["-p", "trackmania_iqn_sim", "-e", "r", "--experiments-dir", str(tmp_path), "--max-steps", "1500",
                 *SMALL]) == 0
    run = tmp_path / "r"
    rows = list(csv.DictReader((run / "races.csv").open()))
    # Every 5th race of the cycle is greedy; races that start before the 300 transitions of heatup explore
    # whatever their place (how many there are depends on how long the first races last).
    greedy = [i for i, r in enumerate(rows) if r["exploration"] == "0"]
    assert greedy and all(i % 5 == 4 for i in greedy)
    assert all(rows[i]["exploration"] == "0" for i in range(4, len(rows), 5) if int(rows[i - 1]["env_steps"]) >= 300)
    # one environment, races in turn: env_steps grows between two lines by the later race's stored actions
    steps = [0] + [int(r["env_steps"]) for r in rows]
    assert all(steps[i + 1] - steps[i] == int(r["stored_actions"]) for i, r in enumerate(rows))
    assert sum(int(r["stored_actions"]) > 0 for r in rows) >= len(rows) - 1
    saved = checkpoints.load_checkpoint(run / "checkpoints" / checkpoints.LAST)
    assert saved["agent"]["counters"]["env_steps"] == 1500
    assert saved["agent"]["counters"]["gradient_updates"] > 0
    assert "memory" in saved["agent"]  # the sim preset keeps its memory in checkpoints
    graph_manager = load_run(run, "cpu")
    position = saved["graph_manager"]["collection"]["plans"][0]["position"]
    assert position >= 5 and graph_manager._collection_state["plans"][0]["position"] == position
    assert graph_manager.agent.counters.to_dict() == saved["agent"]["counters"]
    graph_manager.close()
    assert main(["--resume", str(run), "--max-steps", "2000", "--no-progress"]) == 0
    assert checkpoints.load_checkpoint(run / "checkpoints" / checkpoints.LAST)["agent"]["counters"]["env_steps"] == 2000


def test_uni_without_the_game_stops_at_once_naming_the_sim_preset(tmp_path):
    """trackmania_iqn_uni on a machine without TMInterface settings: one clear line, exit 2, no run folder."""
    result = subprocess.run([sys.executable, "-m", "rulka.cli", "-p", "trackmania_iqn_uni", "--experiments-dir",
                             str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 2
    assert "real-game backend is unavailable" in result.stderr and "trackmania_iqn_sim" in result.stderr
    assert "Traceback" not in result.stderr
    assert not any(tmp_path.iterdir())


def test_two_collectors_race_a_two_map_cycle_with_one_environment_each(tmp_path):
    """gpu_collectors_count=2 on a two-map cycle: each collector's one environment races both maps,
    races.csv names map and instance, and the Performance group has the collection metrics."""
    from rulka.config import apply_overrides
    from rulka.presets import load_graph_manager

    graph_manager = load_graph_manager("trackmania_iqn_sim")
    graph_manager.config = apply_overrides(graph_manager.config, overrides=[
        "performance.gpu_collectors_count=2", "performance.envs_per_collector=1", "performance.rollout_chunk_actions=50",
        "memory.memory_size_schedule=[[0, [3000, 300]]]", "training.batch_size=16",
        "training.checkpoint_every_n_env_steps=0",
        "environment.cutoff_rollout_if_race_not_finished_within_duration_ms=5000",  # races of <= 100 actions
        "map_cycle.entries=[{short_name: a, map_path: short}, {short_name: b, map_path: 'procedural:3'}]"])
    graph_manager.create(tmp_path / "r", "cpu", 0)
    tags = set()
    log = graph_manager.log
    graph_manager.log = lambda values: (tags.update(values), log(values))
    summary = graph_manager.improve(800, show_progress=False)
    graph_manager.close()
    assert summary.env_steps >= 800 and summary.gradient_updates > 0
    rows = list(csv.DictReader((tmp_path / "r" / "races.csv").open()))
    assert {(r["instance"], r["map"]) for r in rows} == {("0", "a"), ("0", "b"), ("1", "a"), ("1", "b")}
    for tag in ("Performance/collector_0_actions_per_s", "Performance/collector_1_actions_per_s",
                "Performance/collected_actions_per_s", "Performance/rollout_queue_depth",
                "Performance/policy_lag_batches_p95", "Performance/queue_delay_batches_p95",
                "Performance/learner_training_fraction",
                "Performance/learner_collect_or_wait_fraction", "Performance/learner_publish_fraction"):
        assert tag in tags
    assert not graph_manager.collection.alive_pids()


def test_running_speed_reaches_the_real_game_backend(monkeypatch):
    """performance.running_speed goes to the tmi backend of every instance, with the instance's number."""
    from environments.trackmania import env as env_module
    from environments.trackmania.training.trackmania_graph_manager import TrackManiaEnvFactory
    from environments.trackmania.parameters import TrackManiaEnvironmentParameters

    received = []

    def fake_backend(name, params, **options):
        received.append((name, options))
        raise RuntimeError("no game here")

    monkeypatch.setattr(env_module, "make_backend", fake_backend)
    factory = TrackManiaEnvFactory("short", running_speed=42.0)
    with pytest.raises(Exception, match="real-game backend is unavailable"):
        factory(TrackManiaEnvironmentParameters(backend="tmi"), 3)
    assert received == [("tmi", {"instance_index": 3, "running_speed": 42.0})]
