import csv
import subprocess
import sys

from rulka import checkpoints
from rulka.cli import load_run, main

SMALL = ["-cp", "memory.memory_size_schedule=[[0, [3000, 300]]]", "-cp", "training.batch_size=16",
         "-cp", "training.checkpoint_every_n_env_steps=0", "--device", "cpu", "--no-progress"]


def test_sim_run_follows_the_map_cycle_and_resumes(tmp_path):
    """A short trackmania_iqn_sim run alternates 4 exploring and 1 greedy race, logs races.csv,
    trains, checkpoints, and resumes at the same cycle position and counters."""
    assert main(["-p", "trackmania_iqn_sim", "-e", "r", "--experiments-dir", str(tmp_path), "--max-steps", "1500",
                 *SMALL]) == 0
    run = tmp_path / "r"
    rows = list(csv.DictReader((run / "races.csv").open()))
    assert len(rows) >= 5
    assert [r["exploration"] for r in rows[:5]] == ["1", "1", "1", "1", "0"]
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
