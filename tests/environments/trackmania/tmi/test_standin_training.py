"""`rulka -p trackmania_iqn_uni` trains through stand-in games end to end: two games launched by
launch.sh (the TMI_LINUX_LAUNCH_SCRIPT contract), two maps in the cycle, a checkpoint, a resume."""
from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

from .standin_helpers import free_port_block, processes_mentioning, standin_available, standin_environ

ROOT = Path(__file__).resolve().parents[4]
STANDIN_YAML = ROOT / "presets" / "trackmania_iqn_uni_standin.yaml"
LINES = ROOT / "environments" / "trackmania" / "tmi" / "standin" / "lines"
#: How races end on the simulator backend (environments/trackmania/rewards.py), and nothing else.
SIM_END_REASONS = re.compile(r"^(finished|race_time_limit|no_progress|missed_checkpoint_\d+_of_\d+|"
                             r"far_from_checkpoint_\d+_of_\d+)$")


def _rulka(args: list[str], env: dict[str, str], log: Path) -> subprocess.CompletedProcess:
    with log.open("w") as out:
        return subprocess.run([str(Path(sys.executable).with_name("rulka")), *args], cwd=ROOT, env=env,
                              stdout=out, stderr=subprocess.STDOUT, timeout=400)


def test_standin_training_runs_checkpoints_and_resumes(tmp_path):
    """Two stand-in games race short and medium in turn for the uni preset (CPU-sized network), the
    learner trains and checkpoints, `--resume` continues the run; every race ends as races end on the
    simulator backend (no discarded rollout), and no game or physics process is left behind."""
    standin_available()
    cycle = {"map_cycle": {"entries": [
        {"short_name": "short", "map_path": "short", "reference_line_path": str(LINES / "short.npy"),
         "is_exploration": True, "fill_buffer": True, "repeat": 1},
        {"short_name": "medium", "map_path": "medium", "reference_line_path": str(LINES / "medium.npy"),
         "is_exploration": True, "fill_buffer": True, "repeat": 1},
        {"short_name": "short", "map_path": "short", "reference_line_path": str(LINES / "short.npy"),
         "is_exploration": False, "fill_buffer": True, "repeat": 1},
    ]}}
    test_yaml = tmp_path / "two_maps.yaml"
    test_yaml.write_text(yaml.safe_dump(cycle))
    env = dict(os.environ)
    env.update(standin_environ(tmp_path))
    env.update({"TMI_LINUX_LAUNCH_SCRIPT": str(LINES.parent / "launch.sh"), "TMI_ACCOUNT_NAME": "standin",
                "TMI_BASE_PORT": str(free_port_block(2)), "TMI_START_TIMEOUT_S": "120"})
    small = ["-cp", "performance.gpu_collectors_count=2", "-cp", "performance.running_speed=100",
             "-cp", "memory.memory_size_schedule=[[0, [5000, 300]]]", "-cp", "training.batch_size=32",
             "-cp", "memory.number_times_single_memory_is_used_before_discard=1",
             "-cp", "training.checkpoint_every_n_env_steps=400"]
    run = tmp_path / "runs" / "standin"
    first = _rulka(["-p", "trackmania_iqn_uni", "--config", str(STANDIN_YAML), "--config", str(test_yaml), *small,
                    "--experiments-dir", str(tmp_path / "runs"), "-e", "standin", "--max-steps", "800",
                    "--no-progress", "--seed", "1"], env, tmp_path / "first.log")
    assert first.returncode == 0, (tmp_path / "first.log").read_text()[-3000:]
    assert (run / "checkpoints" / "last.pt").is_file()
    races_first = list(csv.DictReader((run / "races.csv").open()))
    # 500 more actions a game: at 250 (--max-steps 1300) a resumed medium race could outlast the run (CI, once)
    second = _rulka(["--resume", str(run), "--max-steps", "1800", "--no-progress"], env, tmp_path / "second.log")
    assert second.returncode == 0, (tmp_path / "second.log").read_text()[-3000:]
    log = (tmp_path / "first.log").read_text() + (tmp_path / "second.log").read_text()

    races = list(csv.DictReader((run / "races.csv").open()))
    assert len(races) > len(races_first) >= 3
    assert int(races[-1]["env_steps"]) > int(races_first[-1]["env_steps"])
    resumed = re.search(r"resumed .* at (\d+) environment steps", log)
    assert resumed and int(resumed.group(1)) >= 800, log[-2000:]
    assert {r["map"] for r in races_first} == {"short", "medium"}
    assert {r["instance"] for r in races_first} == {"0", "1"}  # two games
    assert "0" in {r["exploration"] for r in races}  # the cycle's greedy race was raced
    bad = [r["end_reason"] for r in races if not SIM_END_REASONS.match(r["end_reason"])]
    assert not bad, bad
    assert "discarded" not in log and "Traceback" not in log
    assert re.search(r"done: \d+ env steps, \d+ episodes, [1-9]\d* gradient updates", log), log[-2000:]
    deadline = time.monotonic() + 15
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_mentioning(str(tmp_path)) == []
