"""environments/trackmania/tools/demos.py and `rulka demos`: demonstration sets of simulator races
(the classical driver's, a best run's) that fit the run's environment, and a short TrackMania run
that pretrains on them and keeps them in its replay."""
from __future__ import annotations

import json

import numpy as np

from environments.trackmania.env import trackmania_spaces
from environments.trackmania.tools.demos import RACE_STATE_KEYS, best_run_demonstrations
from memories.demonstrations import load_demonstrations
from rulka import checkpoints
from rulka.cli import main
from rulka.config import write_config_snapshot
from rulka.presets import load_graph_manager

FAST = ["--device", "cpu", "--no-progress", "-cp", "performance.torch_num_threads=1"]


def test_recorded_races_fit_the_presets_environment_and_keep_the_race_state(tmp_path, capsys):
    """`rulka demos record` with the classical driver: one whole race that finishes (terminated, its
    race time in the last race state), frames uint8 at the preset's 48 x 64, and the set fits the
    preset's spaces; a race cut by --max-steps is stored as a cut (truncated)."""
    out = tmp_path / "demos"
    assert main(["demos", "record", "--track", "short", "--races", "1", "--out", str(out)]) == 0
    assert "1 finished" in capsys.readouterr().out
    config = load_graph_manager("trackmania_iqn_sim").config
    demos = load_demonstrations(out)
    observation_space, action_space = trackmania_spaces(config.environment)
    demos.check_fits(observation_space, int(action_space.n))
    (race,) = demos.episodes
    assert race.terminated and race.outcome == "finished" and race.states["frame"].dtype == np.uint8
    assert set(race.step_info) == set(RACE_STATE_KEYS) and race.step_info["finished"][-1] == 1
    np.testing.assert_allclose(np.diff(race.step_info["race_time_ms"]), config.environment.ms_per_action)
    assert demos.source["policy"] == "baseline" and demos.source["margins"] == "shipped"

    assert main(["demos", "record", "--track", "short", "--races", "2", "--max-steps", "20",
                 "--margins", "1.0,0.9,0.45", "--out", str(tmp_path / "cut")]) == 0
    cut = load_demonstrations(tmp_path / "cut")
    assert [(e.length, e.terminated, e.truncated) for e in cut.episodes] == [(20, False, True)] * 2
    assert "grip 1.00" in cut.source["margins"]
    assert main(["demos", "record", "--policy", "nowhere", "--margins", "1,1,1", "--out", str(tmp_path / "x")]) == 2


def test_a_best_run_becomes_a_one_race_set(tmp_path):
    """A run's best race (actions and reset seed, in its run folder) is played again in the run's
    environment: the set's race finishes in the saved time with the saved actions; a best run whose
    time, or whose saved speeds, the replay does not reproduce is refused."""
    out = tmp_path / "driver"
    assert main(["demos", "record", "--track", "short", "--races", "1", "--out", str(out)]) == 0
    race = load_demonstrations(out).episodes[0]
    run = tmp_path / "run"
    (run / "best_runs" / "short").mkdir(parents=True)
    write_config_snapshot(load_graph_manager("trackmania_iqn_sim").config, run / "config_snapshot.yaml")
    time_ms = int(race.step_info["race_time_ms"][-1])
    best = {"map": "short", "race_time_s": time_ms / 1000, "env_steps": 1000, "exploration": False,
            "reset_seed": 0, "actions": race.actions.tolist()}
    (run / "best_runs" / "short" / f"{time_ms}ms_1000steps.json").write_text(json.dumps(best))
    recorded = best_run_demonstrations(run / "best_runs" / "short", tmp_path / "best")
    assert recorded.finished and recorded.race_time_ms == time_ms
    (replayed,) = load_demonstrations(tmp_path / "best").episodes
    np.testing.assert_array_equal(replayed.actions, race.actions)
    np.testing.assert_array_equal(replayed.states["frame"], race.states["frame"])
    best["speeds_kmh"] = [1.0] * len(race.actions)  # the saved race went at other speeds: another race
    (run / "best_runs" / "short" / f"{time_ms}ms_1000steps.json").write_text(json.dumps(best))
    assert main(["demos", "from-best-run", str(run / "best_runs" / "short"), "--out", str(tmp_path / "b1")]) == 2
    del best["speeds_kmh"]
    best["race_time_s"] = time_ms / 1000 - 0.5
    (run / "best_runs" / "short" / f"{time_ms}ms_1000steps.json").write_text(json.dumps(best))
    assert main(["demos", "from-best-run", str(run / "best_runs" / "short"), "--out", str(tmp_path / "b2")]) == 2


def test_a_trackmania_run_pretrains_and_keeps_the_demonstrations(tmp_path, capsys):
    """trackmania_iqn_sim with the classical driver's race: pretraining runs (mini-race batches of the
    demonstrations), then the run learns with them in its replay and ends normally; its exported
    policy records a set of its own (`--policy EXPORT_DIR`) that fits the run's environment."""
    out = tmp_path / "demos"
    assert main(["demos", "record", "--track", "short", "--races", "1", "--out", str(out)]) == 0
    assert main(["-p", "trackmania_iqn_sim", "--max-steps", "500", "-e", "x", "--experiments-dir", str(tmp_path / "exp"),
                 "-cp", f"demonstrations.folders=[{out}]", "-cp", "demonstrations.pretrain_updates=20",
                 "-cp", "memory.memory_size_schedule=[[0, [5000, 300]]]", "-cp", "performance.gpu_collectors_count=0",
                 "-cp", "performance.envs_per_collector=1", *FAST]) == 0
    assert "pretrained on the demonstrations: 20 updates" in capsys.readouterr().err
    counters = checkpoints.load_checkpoint(tmp_path / "exp" / "x" / "checkpoints" / checkpoints.LAST)["agent"]["counters"]
    assert counters["gradient_updates"] > 20 and counters["transitions_sampled"] > 0
    assert main(["export", str(tmp_path / "exp" / "x"), "--out", str(tmp_path / "policy")]) == 0
    assert main(["demos", "record", "--policy", str(tmp_path / "policy"), "--track", "short", "--races", "1",
                 "--max-steps", "15", "--out", str(tmp_path / "own")]) == 0
    own = load_demonstrations(tmp_path / "own")
    observation_space, action_space = trackmania_spaces(load_graph_manager("trackmania_iqn_sim").config.environment)
    own.check_fits(observation_space, int(action_space.n))
    assert own.source["policy"] == str(tmp_path / "policy") and own.episodes[0].length == 15
