"""Helpers of the stand-in tests: launch settings, a race driver, the trace replayed on the simulator backend."""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from environments.trackmania.backend import CarState, TrackManiaBackend
from environments.trackmania.sim.backend import SimBackend, SimOptions
from environments.trackmania.tmi.games.processes import list_processes, process_cmdline, process_environ, process_info
from environments.trackmania.tmi.games.settings import TMISettings
from environments.trackmania.tmi.standin.build import LAUNCH_SCRIPT, REPO_ROOT, StandinBuildError, host_binary
from environments.trackmania.tmi.standin.physics import restore_snapshot
from environments.trackmania.tmi.standin.ports import free_port_block


def standin_available() -> None:
    """Skip (naming the reason) when the host cannot be built here."""
    try:
        host_binary()
    except StandinBuildError as error:
        pytest.skip(str(error))


def standin_settings(n: int = 1) -> TMISettings:
    """Settings that launch stand-in games through launch.sh, as a user's Wine script is launched."""
    return TMISettings(account_name="standin", linux_launch_script=str(LAUNCH_SCRIPT), base_port=free_port_block(n),
                       start_timeout_s=60)


def standin_environ(trace_dir: Path | None = None) -> dict[str, str]:
    """Environment variables for launch.sh: this interpreter; a trace file per port in ``trace_dir``."""
    env = {"RULKA_STANDIN_PYTHON": sys.executable}
    if trace_dir is not None:
        env["RULKA_STANDIN_TRACE"] = str(trace_dir / "trace_{port}.jsonl")
    return env


def processes_mentioning(text: str) -> list[int]:
    """Pids of the processes whose command line contains ``text`` (zombies excluded)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            pids.append(int(entry))
    return pids


def read_trace(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def drive(env, policy, max_steps: int = 6000) -> dict:
    """One race with ``policy(env) -> action``: observations, actions, rewards and the last info."""
    obs, info = env.reset(seed=0)
    record = {"obs": [obs], "actions": [], "rewards": [], "infos": [info], "terminated": False, "truncated": False}
    for _ in range(max_steps):
        action = policy(env)
        obs, reward, terminated, truncated, info = env.step(action)
        record["obs"].append(obs)
        record["actions"].append(action)
        record["rewards"].append(reward)
        record["infos"].append(info)
        if terminated or truncated:
            record["terminated"], record["truncated"] = terminated, truncated
            break
    return record


class TraceReplayBackend(TrackManiaBackend):
    """The simulator backend's state and frame for each car state the stand-in had at an action point.

    ``steps``: per action point, the trace record of the state read (time t) and of the frame
    captured after it (the game runs one more tick before it freezes, as TMNF does: t + 10 ms).
    Each is put into a :class:`SimBackend`'s car, which then reports its ``_state()`` / ``_frame()``.
    """

    def __init__(self, params, steps: list[tuple[dict, dict]]) -> None:
        self.sim = SimBackend(params, SimOptions())
        self.steps = steps
        self.i = 0
        self.was_finished = False

    def _at(self, state_rec: dict, frame_rec: dict) -> tuple[CarState, np.ndarray]:
        car = self.sim.car
        n_gates = len(car.geo.checkpoint_s)
        restore_snapshot(car, frame_rec["car"], frame_rec["checkpoints"], n_gates)
        frame = self.sim._frame().copy()
        times = list(state_rec["checkpoints"]) + ([state_rec["t"]] if state_rec["finished"] else [])
        restore_snapshot(car, state_rec["car"], times, n_gates)
        car.finished = state_rec["finished"]
        state = self.sim._state()
        state.finished = car.finished and not self.was_finished
        self.was_finished = car.finished
        return state, frame

    def start_race(self, track, seed):
        self.sim.start_race(track, seed)
        self.i, self.was_finished = 1, False
        return self._at(*self.steps[0])

    def step(self, inputs):
        self.i += 1
        return self._at(*self.steps[self.i - 1])


def action_points(trace: list[dict], infos: list[dict]) -> list[tuple[dict, dict]]:
    """For each env observation of one race (``infos``), the (state, frame) trace records behind it.

    The state is the last state read at the observation's race time before a frame; the frame is the
    one captured next (at the finish, which is not an action point, the previous frame)."""
    frames = [k for k, r in enumerate(trace) if r["kind"] == "frame"]
    out: list[tuple[dict, dict]] = []
    cursor = 0
    for info in infos:
        t = info["race_time_ms"]
        if info["finished"]:
            state = next(r for r in trace[cursor:] if r["kind"] == "state" and r["t"] == t and r["finished"])
            out.append((state, out[-1][1]))
            continue
        k = next(k for k in frames if k >= cursor and trace[k]["t"] == t + 10)
        state = next(r for r in reversed(trace[cursor:k]) if r["kind"] == "state" and r["t"] == t)
        out.append((state, trace[k]))
        cursor = k + 1
    return out


# ---------------------------------------------------------------------- training runs with stand-in games
STANDIN_YAML = REPO_ROOT / "presets" / "trackmania_iqn_uni_standin.yaml"


class StandinRun:
    """``rulka -p trackmania_iqn_uni`` with the stand-in configuration as a child process, with a few
    collectors whose games are stand-in games launched through ``launch.sh``; the faults tests poke at
    its processes and read its log and ``races.csv``.

    The games and their helpers are found by the trace path in their environment (``/proc``), so a test
    only ever sees (and kills) processes of its own run. ``seen`` collects every pid the test met, so
    that :meth:`assert_nothing_left` checks them all by pid at the end.

    Args:
        tmp_path: the test's folder (runs, log, traces).
        collectors: collector processes (one game each).
        overrides: extra ``-cp KEY=VALUE`` overrides.
        environ: extra environment variables (e.g. ``TMI_BASE_PORT``).
    """

    def __init__(self, tmp_path: Path, collectors: int = 2, overrides: tuple[str, ...] = (),
                 environ: dict[str, str] | None = None) -> None:
        self.tmp_path = tmp_path
        self.env = dict(os.environ)
        self.env.update(standin_environ(tmp_path))
        self.env.update({"TMI_LINUX_LAUNCH_SCRIPT": str(LAUNCH_SCRIPT), "TMI_ACCOUNT_NAME": "standin",
                         "TMI_BASE_PORT": str(free_port_block(collectors)), "TMI_START_TIMEOUT_S": "60"})
        self.env.update(environ or {})
        self.base_port = int(self.env["TMI_BASE_PORT"])
        self.args = ["-p", "trackmania_iqn_uni", "--config", str(STANDIN_YAML),
                     "-cp", f"performance.gpu_collectors_count={collectors}", "-cp", "performance.running_speed=100",
                     "-cp", "memory.memory_size_schedule=[[0, [5000, 300]]]", "-cp", "training.batch_size=32",
                     # one update per 32 transitions instead of 32: the learner of a shared 2-core machine keeps
                     # up with games at speed 100, so collectors never wait for it mid-race (a learner stall
                     # longer than the in-race timeout is tested on its own)
                     "-cp", "memory.number_times_single_memory_is_used_before_discard=1",
                     *[a for o in overrides for a in ("-cp", o)],
                     "--experiments-dir", str(tmp_path / "runs"), "-e", "faults", "--max-steps", "1000000",
                     "--no-progress", "--seed", "1"]
        self.run_dir = tmp_path / "runs" / "faults"
        self.log = tmp_path / "run.log"
        self.seen: set[int] = set()
        self.process: subprocess.Popen | None = None

    # ---------------------------------------------------------------- processes
    def start(self) -> "StandinRun":
        with self.log.open("w") as out:
            self.process = subprocess.Popen([str(Path(sys.executable).with_name("rulka")), *self.args], cwd=REPO_ROOT,
                                            env=self.env, stdout=out, stderr=subprocess.STDOUT)
        self.seen.add(self.process.pid)
        return self

    def ours(self) -> dict[int, int]:
        """pid -> port of every process of this run's stand-in games (a game and its helpers)."""
        found = {}
        for pid in (info.pid for info in list_processes()):
            env = process_environ(pid) or {}
            if str(self.tmp_path) in env.get("RULKA_STANDIN_TRACE", "") and "RULKA_TMI_PORT" in env:
                found[pid] = int(env["RULKA_TMI_PORT"])
        return found

    def games(self) -> dict[int, int]:
        """pid -> port of the game processes themselves (named TmForever, as the real game)."""
        games = {pid: port for pid, port in self.ours().items()
                 if (info := process_info(pid)) is not None and info.name.startswith("TmForever")}
        self.seen |= set(games)
        return games

    def game_on(self, port: int) -> int | None:
        return next((pid for pid, p in self.games().items() if p == port), None)

    def note_all(self) -> None:
        """Remember every process of the run now (learner's children, games and helpers)."""
        assert self.process is not None
        self.seen |= set(self.ours()) | {p.pid for p in list_processes() if p.ppid == self.process.pid}

    # ---------------------------------------------------------------- what the run did
    def races(self) -> list[dict[str, str]]:
        path = self.run_dir / "races.csv"
        return list(csv.DictReader(path.open())) if path.is_file() else []

    def races_of(self, port: int) -> list[dict[str, str]]:
        instance = str(port - self.base_port)
        return [r for r in self.races() if r["instance"] == instance]

    def races_started(self, port: int) -> int:
        """Races the games on ``port`` started (from their traces: one frame at race time 10 ms per race,
        the first action point's)."""
        path = self.tmp_path / f"trace_{port}.jsonl"
        if not path.is_file():
            return 0
        started = 0
        for line in path.read_bytes().splitlines():
            if b'"t": 10,' in line:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # the line being written
                started += record["kind"] == "frame" and record["t"] == 10
        return started

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait(self, condition: Callable[[], object], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"the run exited ({self.process.returncode}) while waiting until {what}:\n"
                                     f"{self.text()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s:.0f} s waiting until {what}:\n{self.text()[-3000:]}")
            time.sleep(0.2)

    def mid_race(self, port: int, min_race_ms: int = 300) -> bool:
        """The game on ``port`` is racing now: its trace's last record is a frame or state at race time
        >= ``min_race_ms`` of an unfinished race."""
        path = self.tmp_path / f"trace_{port}.jsonl"
        if not path.is_file():
            return False
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - 65536))
            lines = f.read().splitlines()
        try:
            last = json.loads(lines[-1])
        except (IndexError, ValueError):
            return False  # a line being written
        return last["t"] >= min_race_ms and not last["finished"]

    def wait_mid_race(self, port: int, timeout_s: float = 30.0) -> None:
        self.wait(lambda: self.mid_race(port), timeout_s, f"the game on port {port} is mid-race")

    # ---------------------------------------------------------------- the end
    def stop(self) -> None:
        """Ctrl-C (SIGINT reaches the learner; collectors ignore it): exit status 130, final checkpoint."""
        assert self.process is not None and self.process.poll() is None, self.text()[-3000:]
        self.note_all()
        self.process.send_signal(signal.SIGINT)
        assert self.process.wait(60) == 130, self.text()[-3000:]
        assert "final checkpoint written" in self.text()

    def kill_everything(self) -> None:
        """On a failure: kill the run, its collectors and games, so that nothing is left either."""
        if self.process is None or self.process.poll() is not None:
            return
        children = [p.pid for p in list_processes() if p.ppid == self.process.pid]
        for pid in [*self.ours(), *children]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.process.kill()
        self.process.wait(10)

    def assert_nothing_left(self) -> None:
        """Every process the run had (by pid) is gone, no game of the run remains, no traceback."""
        self.wait_gone(lambda: not [pid for pid in self.seen if process_info(pid) is not None] and not self.ours(),
                       15, "no process of the run is left")
        assert "Traceback" not in self.text(), self.text()[-3000:]

    def wait_gone(self, condition: Callable[[], object], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                left = {pid: process_cmdline(pid) for pid in self.seen if process_info(pid) is not None}
                raise AssertionError(f"timed out waiting until {what} (left: {left}):\n{self.text()[-3000:]}")
            time.sleep(0.2)


def reaped(pid: int) -> bool:
    """``pid`` is gone from the process table: dead and waited for (not even a zombie)."""
    return not os.path.exists(f"/proc/{pid}")
