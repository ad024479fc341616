"""Stopping a run: SIGTERM (docker stop, systemd, schedulers) writes a final checkpoint and leaves no process."""
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from rulka import checkpoints


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"RULKA_RUN_MARKER={marker}".encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.reliability
def test_sigterm_stops_collectors_and_writes_a_final_checkpoint(tmp_path):
    """cartpole_iqn with 2 collector processes, SIGTERM mid-run: exit 143, last.pt at the stop, no child left."""
    marker = uuid.uuid4().hex
    env = dict(os.environ, RULKA_RUN_MARKER=marker, OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "rulka.cli", "-p", "cartpole_iqn", "-e", "r", "--experiments-dir", str(tmp_path),
               "-cp", "performance.gpu_collectors_count=2", "-cp", "training.evaluate_every_n_env_steps=0",
               "-cp", "training.checkpoint_every_n_env_steps=0", "--device", "cpu"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not any(re.search(r" [1-9]\d*/\d+ steps", line) for line in lines):
            time.sleep(0.5)  # the progress line (every 10 s off a terminal) shows collected steps
        assert len(_processes_with(marker)) >= 3, "the learner and its two collectors did not start"
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
        reader.join(10)
    finally:
        if process.poll() is None:
            process.kill()
    err = "".join(lines)
    assert process.returncode == 128 + signal.SIGTERM, err
    assert "stopped by SIGTERM" in err and "final checkpoint written" in err
    saved = checkpoints.load_checkpoint(tmp_path / "r" / "checkpoints" / checkpoints.LAST)
    assert saved["agent"]["counters"]["env_steps"] > 0
    time.sleep(1.0)
    assert _processes_with(marker) == []


def test_a_stop_request_ends_a_training_burst_after_the_update_in_progress():
    """A burst is as long as the replay ratio allows (a minute and more at batch 512 on a CPU): Ctrl-C or
    SIGTERM (``stop_requested``) during it ends the burst after the update in progress, not at its end."""
    from tests.rulka.collection.envs import make_graph_manager

    graph_manager = make_graph_manager(collectors=0)
    agent = graph_manager.agent
    graph_manager.improve(300, show_progress=False)  # a replay to sample from
    agent.config.memory.number_times_single_memory_is_used_before_discard = 1_000.0  # a burst of thousands
    assert agent.updates_allowed() > 100
    learn, updates = agent.learn_from_batch, []

    def learn_then_stop(batch):
        updates.append(1)
        if len(updates) == 3:
            graph_manager.stop_requested = True
        return learn(batch)

    agent.learn_from_batch = learn_then_stop
    graph_manager.train_and_log()
    graph_manager.close()
    assert len(updates) == 3 and agent.updates_allowed() > 100
