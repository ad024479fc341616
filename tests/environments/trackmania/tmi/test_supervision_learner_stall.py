"""Supervision under a learner stall, with a stand-in game and a collector process: the learner stops for
60 s (SIGSTOP: it neither reads rollouts nor publishes weights) while its collector races; the collector
plays the race in flight to its end into its local buffer and waits between races, so the game, whose
in-race timeout is 30 s, never drops its client; after SIGCONT the run goes on, no race is counted twice,
and Ctrl-C leaves no process of ours behind (checked by pid)."""
from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from environments.trackmania.tmi.processes import list_processes, process_environ, process_info

from .standin_helpers import free_port_block, standin_available, standin_environ

ROOT = Path(__file__).resolve().parents[4]
STANDIN_YAML = ROOT / "presets" / "trackmania_iqn_uni_standin.yaml"
LINES = ROOT / "environments" / "trackmania" / "tmi" / "standin" / "lines"
STALL_S = 60.0


def _ours(trace_dir: Path) -> list[int]:
    """Pids of this test's stand-in game processes (found by their trace path in their environment)."""
    return [info.pid for info in list_processes()
            if str(trace_dir) in (process_environ(info.pid) or {}).get("RULKA_STANDIN_TRACE", "")]


def _races(run: Path) -> list[dict[str, str]]:
    path = run / "races.csv"
    return list(csv.DictReader(path.open())) if path.is_file() else []


def _wait(condition, timeout_s: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


@pytest.mark.reliability
def test_supervision_learner_stalled_60_s_mid_race_loses_no_race(tmp_path):
    """Chunks of 20 actions and a queue share of 2 chunks: a learner stopped for 60 s fills the share within a
    race (before collectors sent from a thread of their own, a chunk larger than the pipe blocked the collector
    mid-race and the game dropped it after 30 s). The game is not dropped ("client dropped" never appears), no
    race is discarded, races go on after SIGCONT with env_steps strictly increasing (none counted twice), and
    nothing of ours is left."""
    standin_available()
    env = dict(os.environ)
    env.update(standin_environ(tmp_path))
    env.update({"TMI_LINUX_LAUNCH_SCRIPT": str(LINES.parent / "launch.sh"), "TMI_ACCOUNT_NAME": "standin",
                "TMI_BASE_PORT": str(free_port_block(1)), "TMI_START_TIMEOUT_S": "60"})
    args = ["-p", "trackmania_iqn_uni", "--config", str(STANDIN_YAML),
            "-cp", "performance.gpu_collectors_count=1", "-cp", "performance.running_speed=100",
            "-cp", "performance.rollout_chunk_actions=20", "-cp", "performance.max_rollout_queue_size=2",
            "-cp", "memory.memory_size_schedule=[[0, [5000, 300]]]", "-cp", "training.batch_size=32",
            "--experiments-dir", str(tmp_path / "runs"), "-e", "stall", "--max-steps", "1000000",
            "--no-progress", "--seed", "1"]
    run = tmp_path / "runs" / "stall"
    log = tmp_path / "run.log"
    seen: set[int] = set()
    with log.open("w") as out:
        rulka = subprocess.Popen([str(Path(sys.executable).with_name("rulka")), *args], cwd=ROOT, env=env,
                                 stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait(lambda: len(_races(run)) >= 2, 90, "the game races", log)
        seen |= set(_ours(tmp_path)) | {rulka.pid}
        seen |= {p.pid for p in list_processes() if p.ppid == rulka.pid}
        os.kill(rulka.pid, signal.SIGSTOP)  # the learner stalls: reads nothing, publishes nothing
        try:
            time.sleep(STALL_S)
        finally:
            os.kill(rulka.pid, signal.SIGCONT)
        raced = len(_races(run))
        # the race in flight during the stall ends and is counted (after heatup the learner trains between
        # reads, so on a loaded CPU a race may take a minute)
        _wait(lambda: len(_races(run)) >= raced + 1, 120, "races go on after the stall", log)
        text = log.read_text()
        assert "client dropped" not in text and "discarded" not in text, text[-3000:]
        steps = [int(r["env_steps"]) for r in _races(run)]
        assert steps == sorted(set(steps)), f"a race was counted twice: {steps}"
        assert rulka.poll() is None
        rulka.send_signal(signal.SIGINT)
        assert rulka.wait(60) == 130, log.read_text()[-3000:]
    finally:  # on a failure, leave nothing behind either
        if rulka.poll() is None:
            os.kill(rulka.pid, signal.SIGCONT)
            children = [p.pid for p in list_processes() if p.ppid == rulka.pid]
            for pid in [*_ours(tmp_path), *children]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            rulka.kill()
            rulka.wait(10)
    _wait(lambda: not [pid for pid in seen if process_info(pid) is not None] and not _ours(tmp_path), 15,
          "no process of the run is left", log)
    assert "Traceback" not in log.read_text()
