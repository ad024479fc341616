"""Helpers of the stand-in tests: launch settings, a race driver, the trace replayed on the simulator backend."""
from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

from environments.trackmania.backend import CarState, TrackManiaBackend
from environments.trackmania.sim.backend import SimBackend, SimOptions
from environments.trackmania.tmi.settings import TMISettings
from environments.trackmania.tmi.standin.build import LAUNCH_SCRIPT, StandinBuildError, host_binary
from environments.trackmania.tmi.standin.physics import restore_snapshot


def standin_available() -> None:
    """Skip (naming the reason) when the host cannot be built here."""
    try:
        host_binary()
    except StandinBuildError as error:
        pytest.skip(str(error))


def free_port_block(n: int) -> int:
    """A base port whose next ``n`` ports were free a moment ago (probing each)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        ok = True
        for port in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no block of free ports")


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
