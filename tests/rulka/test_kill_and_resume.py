"""SIGKILL at random moments, some in the middle of a checkpoint write, then --resume, 20 times over."""
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rulka import checkpoints

pytestmark = pytest.mark.reliability

INTERVAL = 200
TARGET = 2_600
KILLS = 20


def _start(run: Path, tmp_path: Path, slow: str, marker: Path, max_steps: int) -> tuple[subprocess.Popen, list[str]]:
    if checkpoints.has_checkpoint(run / "checkpoints" / checkpoints.LAST):
        args = ["--resume", str(run)]
    else:
        args = ["-p", "cartpole_dqn", "-e", run.name, "--experiments-dir", str(tmp_path), "--device", "cpu",
                "-cp", f"training.checkpoint_every_n_env_steps={INTERVAL}", "-cp", "training.evaluate_every_n_env_steps=0",
                "-cp", "memory.memory_size_schedule=[[0, [20000, 300]]]", "-cp", "performance.gpu_collectors_count=0"]
    env = dict(os.environ, OMP_NUM_THREADS="1", RULKA_SLOW_WRITE=slow, RULKA_SLOW_WRITE_MARKER=str(marker))
    process = subprocess.Popen([sys.executable, str(Path(__file__).with_name("slow_checkpoint_cli.py")), *args,
                                "--max-steps", str(max_steps), "--no-progress"], env=env, stderr=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, text=True, cwd=tmp_path)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True).start()
    return process, lines


def test_twenty_kills_at_random_moments_lose_at_most_one_checkpoint_interval(tmp_path, record_property):
    """Kill -9 at random moments (one in three inside a checkpoint write) and resume: every checkpoint
    stays readable, counters never go back by more than one checkpoint interval, the run completes."""
    rng = random.Random(0)
    run = tmp_path / "r"
    marker = tmp_path / "in_write"
    kills = killed_in_write = 0
    best_steps = 0
    deadline = time.monotonic() + 900  # about 1 minute on an idle 2-core machine
    while time.monotonic() < deadline:
        slow = ("before", "after")[kills % 2] if kills % 3 == 2 and kills < KILLS else ""
        marker.unlink(missing_ok=True)
        final_steps = max(TARGET, best_steps + 2 * INTERVAL)
        process, lines = _start(run, tmp_path, slow, marker, final_steps if kills >= KILLS else 10 ** 7)
        if kills >= KILLS:  # enough kills: let it finish
            assert process.wait(timeout=240) == 0, "".join(lines)
            break
        started = time.monotonic()
        while process.poll() is None and not any(l.startswith(("rulka: run folder", "rulka: resumed")) for l in lines):
            time.sleep(0.05)
        if slow:
            while process.poll() is None and not marker.exists() and time.monotonic() - started < 120:
                time.sleep(0.02)
            killed_in_write += marker.exists()
        else:
            time.sleep(rng.uniform(0.0, 2.0))
        assert process.poll() is None, "".join(lines)  # it must not stop by itself while we kill it
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += 1
        last = run / "checkpoints" / checkpoints.LAST
        if checkpoints.has_checkpoint(last):
            state = checkpoints.load_checkpoint(last)  # never unreadable: the previous one at worst
            steps = state["agent"]["counters"]["env_steps"]
            assert steps >= best_steps - INTERVAL
            best_steps = max(best_steps, steps)
    assert kills == KILLS and killed_in_write >= 5
    record_property("tries", kills)  # docs/reliability.md counts each kill and resume as a try
    final = checkpoints.load_checkpoint(run / "checkpoints" / checkpoints.LAST)
    assert final["agent"]["counters"]["env_steps"] == final_steps
