"""Supervision of game processes under faults, with stand-in games and collector processes: a collector
killed in the middle of a race takes its game with it (killed by the learner, checked by pid), its port is
freed, the run goes on with a replacement, and no process of ours is left at the end."""
from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from environments.trackmania.tmi.processes import list_processes, port_listeners, process_environ, process_info

from .standin_helpers import free_port_block, standin_available, standin_environ

ROOT = Path(__file__).resolve().parents[4]
STANDIN_YAML = ROOT / "presets" / "trackmania_iqn_uni_standin.yaml"
LINES = ROOT / "environments" / "trackmania" / "tmi" / "standin" / "lines"


def _ours(trace_dir: Path) -> dict[int, int]:
    """pid -> port of every process of this test's stand-in games (a game and its helpers), found by
    their trace path in their environment (/proc)."""
    found = {}
    for pid in (info.pid for info in list_processes()):
        env = process_environ(pid) or {}
        if str(trace_dir) in env.get("RULKA_STANDIN_TRACE", "") and "RULKA_TMI_PORT" in env:
            found[pid] = int(env["RULKA_TMI_PORT"])
    return found


def _games(trace_dir: Path) -> dict[int, int]:
    """pid -> port of the game processes themselves (named TmForever, as the real game)."""
    return {pid: port for pid, port in _ours(trace_dir).items()
            if (info := process_info(pid)) is not None and info.name.startswith("TmForever")}


def _races(run: Path) -> list[dict[str, str]]:
    path = run / "races.csv"
    return list(csv.DictReader(path.open())) if path.is_file() else []


def _wait(condition, timeout_s: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    return process_info(pid) is not None


@pytest.mark.reliability
def test_supervision_collector_killed_mid_race_takes_its_game_along(tmp_path):
    """SIGKILL collector 1 while its game races: the learner kills that game (gone by pid), its port is not
    held by it, a new collector and game take over and races go on; Ctrl-C (SIGINT) then stops the run and
    no rulka, collector or game process is left (by pid)."""
    standin_available()
    env = dict(os.environ)
    env.update(standin_environ(tmp_path))
    env.update({"TMI_LINUX_LAUNCH_SCRIPT": str(LINES.parent / "launch.sh"), "TMI_ACCOUNT_NAME": "standin",
                "TMI_BASE_PORT": str(free_port_block(2)), "TMI_START_TIMEOUT_S": "60"})
    args = ["-p", "trackmania_iqn_uni", "--config", str(STANDIN_YAML),
            "-cp", "performance.gpu_collectors_count=2", "-cp", "performance.running_speed=100",
            "-cp", "memory.memory_size_schedule=[[0, [5000, 300]]]", "-cp", "training.batch_size=32",
            "--experiments-dir", str(tmp_path / "runs"), "-e", "faults", "--max-steps", "1000000",
            "--no-progress", "--seed", "1"]
    run = tmp_path / "runs" / "faults"
    log = tmp_path / "run.log"
    seen: set[int] = set()
    with log.open("w") as out:
        rulka = subprocess.Popen([str(Path(sys.executable).with_name("rulka")), *args], cwd=ROOT, env=env,
                                 stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait(lambda: len(_games(tmp_path)) == 2 and len(_races(run)) >= 2, 90, "two games race", log)
        games = _games(tmp_path)
        seen |= set(_ours(tmp_path)) | {rulka.pid}
        victim_game, port = next((pid, p) for pid, p in games.items() if p == max(games.values()))
        collector = process_info(victim_game).ppid  # the launch script execs the game: its parent is the collector
        assert process_info(collector).ppid == rulka.pid
        seen.add(collector)
        os.kill(collector, signal.SIGKILL)

        _wait(lambda: not _alive(victim_game), 60, f"the killed collector's game {victim_game} is gone", log)
        assert victim_game not in port_listeners(port).pids
        _wait(lambda: any(p == port and pid != victim_game for pid, p in _games(tmp_path).items()), 60,
              f"a new game serves port {port}", log)
        seen |= set(_ours(tmp_path))
        instance = str(port - int(env["TMI_BASE_PORT"]))
        raced = len(_races(run))
        _wait(lambda: instance in {r["instance"] for r in _races(run)[raced:]}, 60,
              f"the new game (instance {instance}) races", log)
        text = log.read_text()
        assert "died (exit code -9)" in text and f"pids {victim_game};" in text and f"ports {port}" in text, text[-3000:]
        assert rulka.poll() is None

        rulka.send_signal(signal.SIGINT)  # Ctrl-C in a terminal reaches the learner; collectors ignore it
        assert rulka.wait(60) == 130, log.read_text()[-3000:]  # stopped by SIGINT, as documented
        assert "final checkpoint written" in log.read_text()
    finally:  # on a failure, leave nothing behind either: the run's collectors, its games, the run
        if rulka.poll() is None:
            children = [p.pid for p in list_processes() if p.ppid == rulka.pid]
            for pid in [*_ours(tmp_path), *children]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            rulka.kill()
            rulka.wait(10)
    _wait(lambda: not [pid for pid in seen if _alive(pid)] and not _ours(tmp_path), 15,
          "no process of the run is left", log)
    assert "Traceback" not in log.read_text()
