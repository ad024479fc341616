"""A plugin nobody here wrote: Linesight's ``Python_Link.as``, unchanged, in a stand-in game.

Linesight's plugin works in the real game, so wherever it fails in the stand-in, the stand-in's model
of TMInterface 2 is wrong. The game is launched the way Linesight launches it (the launch script runs,
returns, and the game is then found by its process name ``TmForever``), and a client written here
speaks Linesight's message ids and payloads (``Python_Link.as``'s ``MessageType``; Linesight's
``tminterface2.py`` sends them as native int32, float32 and uint8). Needs ``../shared`` (the plugin
copy) and the AngelScript host.
"""
from __future__ import annotations

import math
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from enum import IntEnum
from pathlib import Path

import numpy as np
import pytest

from environments.trackmania.actions import action_to_inputs
from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.tmi.games.processes import process_cmdline, process_info
from environments.trackmania.tmi.standin.build import LAUNCH_SCRIPT, REPO_ROOT
from environments.trackmania.tmi.standin.ports import free_port_block
from environments.trackmania.tmi.link.state import decode_state
from environments.trackmania.tools.baseline import BaselineDriver
from environments.trackmania.tracks import get_track

from .conftest import start_host
from .standin_helpers import drive, processes_mentioning, standin_available

LINESIGHT_PLUGIN = REPO_ROOT.parent / "shared" / "peers" / "linesight" / "Python_Link.as"
FRAME_W, FRAME_H = 160, 120  # Linesight's W_downsized, H_downsized


class Msg(IntEnum):
    """Python_Link.as's MessageType, by value."""
    SC_RUN_STEP_SYNC = 1
    SC_CHECKPOINT_COUNT_CHANGED_SYNC = 2
    SC_LAP_COUNT_CHANGED_SYNC = 3
    SC_REQUESTED_FRAME_SYNC = 4
    SC_ON_CONNECT_SYNC = 5
    C_SET_SPEED = 6
    C_REWIND_TO_STATE = 7
    C_REWIND_TO_CURRENT_STATE = 8
    C_GET_SIMULATION_STATE = 9
    C_SET_INPUT_STATE = 10
    C_GIVE_UP = 11
    C_PREVENT_SIMULATION_FINISH = 12
    C_SHUTDOWN = 13
    C_EXECUTE_COMMAND = 14
    C_SET_TIMEOUT = 15
    C_RACE_FINISHED = 16
    C_REQUEST_FRAME = 17
    C_RESET_CAMERA = 18
    C_SET_ON_STEP_PERIOD = 19
    C_UNREQUEST_FRAME = 20
    C_TOGGLE_INTERFACE = 21
    C_IS_IN_MENUS = 22
    C_GET_INPUTS = 23


def read_blob(blob: bytes) -> dict:
    """The fields a Linesight-style client reads, at the game's byte offsets (SimStateData of the
    ``tminterface`` package): race time, position, speed and the checkpoint times (-1: not passed)."""
    race_time = struct.unpack_from("<i", blob, 7892)[0]
    position = struct.unpack_from("<3f", blob, 724)
    speed = math.sqrt(sum(v * v for v in struct.unpack_from("<3f", blob, 736)))
    n_states = struct.unpack_from("<i", blob, 8344 + 4)[0]
    at = 8344 + 8 + 4 * n_states
    n_times = struct.unpack_from("<i", blob, at)[0]
    times = [struct.unpack_from("<i", blob, at + 4 + 8 * k)[0] for k in range(n_times)]
    return {"race_time": race_time, "position": position, "speed": speed, "cp_times": times}


def without_finish(blob: bytes) -> bytes:
    """``blob`` with its last checkpoint time set to -1: Linesight's way to undo a finish."""
    out = bytearray(blob)
    n_states = struct.unpack_from("<i", out, 8344 + 4)[0]
    at = 8344 + 8 + 4 * n_states
    n_times = struct.unpack_from("<i", out, at)[0]
    struct.pack_into("<i", out, at + 4 + 8 * (n_times - 1), -1)
    return bytes(out)


class LinesightStyleClient:
    """A client of Python_Link.as: Linesight's message ids and payloads, native byte order."""

    def __init__(self, port: int, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, fmt: str, *values) -> None:
        self.sock.sendall(struct.pack(fmt, *values))

    def read_exact(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError(f"the game closed the connection after {len(data)} of {n} bytes")
            data += chunk
        return bytes(data)

    def read_i32(self) -> int:
        return struct.unpack("i", self.read_exact(4))[0]

    def respond(self, msg: Msg) -> None:
        self.send("i", msg)

    def get_state(self) -> bytes:
        self.send("i", Msg.C_GET_SIMULATION_STATE)
        return self.read_exact(self.read_i32())

    def rewind_to_state(self, blob: bytes) -> None:
        self.send("ii", Msg.C_REWIND_TO_STATE, len(blob))
        self.sock.sendall(blob)

    def set_inputs(self, left: bool, right: bool, accelerate: bool, brake: bool) -> None:
        self.send("iBBBB", Msg.C_SET_INPUT_STATE, left, right, accelerate, brake)

    def execute_command(self, command: str) -> None:
        self.send("ii", Msg.C_EXECUTE_COMMAND, len(command.encode()))
        self.sock.sendall(command.encode())

    def ask_i32(self, msg: Msg) -> int:
        self.send("i", msg)
        return self.read_i32()

    def close(self) -> None:
        try:
            self.send("i", Msg.C_SHUTDOWN)
        finally:
            self.sock.close()


def tm_pids() -> set[int]:
    """Processes named TmForever (not zombies), found as Linesight finds them (by name)."""
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (info := process_info(int(entry))) is not None and info.name.startswith("TmForever"):
            try:
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                pids.add(int(entry))
    return pids


def _need_linesight_plugin() -> None:
    if not LINESIGHT_PLUGIN.is_file():
        pytest.skip(f"Linesight's plugin is not at {LINESIGHT_PLUGIN} (../shared absent: the test needs "
                    "../shared/peers/linesight/Python_Link.as beside the repository)")


def test_linesight_plugin_races_in_a_standin_game_launched_as_linesight_launches(tmp_path):
    """Items 1-3 of issue 42 together: Linesight's unchanged plugin compiles and runs in the stand-in
    (Main's queued command runs before the first Render), the launch script returns once the game
    listens (RULKA_STANDIN_DETACH) and the game is the new ``TmForever`` process; a client with
    Linesight's ids loads a map, races with inputs, reads position, speed, race time and checkpoint
    times from the state blob, gets a frame, sees the checkpoints and the finish, rewinds to a saved
    state, disconnects, and after ``kill -9`` of that pid (Linesight's close) no process is left."""
    _need_linesight_plugin()
    standin_available()
    port = free_port_block(1)
    log = tmp_path / "game_{port}.log"
    env = dict(os.environ, RULKA_STANDIN_PYTHON=sys.executable, RULKA_STANDIN_PLUGIN=str(LINESIGHT_PLUGIN),
               RULKA_STANDIN_DETACH="1", RULKA_STANDIN_LOG=str(log))
    env.pop("RULKA_STANDIN_OPTIONS", None)
    before = tm_pids()
    launched = subprocess.run(f"{LAUNCH_SCRIPT} {port}", shell=True, env=env, timeout=300,  # os.system's way
                              capture_output=True, text=True)
    game_log = Path(str(log).replace("{port}", str(port)))
    # Other stand-in games may start on this machine meanwhile: ours is the new one serving our port.
    new = [pid for pid in tm_pids() - before if f"custom_port {port}" in process_cmdline(pid)]
    try:
        assert launched.returncode == 0, (launched.stdout, launched.stderr,
                                          game_log.read_text() if game_log.exists() else "")
        assert len(new) == 1, (new, launched.stdout)
        assert f"stand-in game {new[0]} (TmForever)" in launched.stdout
        finish = _race_with_linesight_ids(port)
        deadline = time.monotonic() + 10  # the second C_SHUTDOWN is read at the plugin's next step
        while time.monotonic() < deadline and _disconnects(game_log) < 2:
            time.sleep(0.05)
    finally:
        for pid in new:
            os.kill(pid, signal.SIGKILL)  # Linesight's close_game: kill -9 <pid>
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (set(new) & tm_pids() or processes_mentioning(f"custom_port {port}")):
        time.sleep(0.05)
    assert not set(new) & tm_pids() and processes_mentioning(f"custom_port {port}") == []
    text = game_log.read_text()
    assert "script exception" not in text, text
    # Both disconnects were C_SHUTDOWN read by the plugin, not its timeout.
    assert _disconnects(game_log) == 2, text
    assert "due to timeout" not in text, text
    # The same driver on the simulator backend: same finish, to the 50 ms action (the game times the
    # finish to the 10 ms tick), so the rewound second changed nothing.
    sim_env = TrackManiaEnv(TrackManiaEnvironmentParameters(H_downsized=48, W_downsized=64), track=get_track("short"),
                            backend="sim", backend_options={"start_lateral_jitter_m": 0.0,
                                                            "start_heading_jitter_rad": 0.0})
    try:
        sim = drive(sim_env, lambda e, d=BaselineDriver(get_track("short")): d.act(e.state))["infos"][-1]
    finally:
        sim_env.close()
    assert sim["finished"] and abs(finish["race_time"] - sim["race_time_ms"]) <= 50, (finish, sim["race_time_ms"])
    for game_time, sim_time in zip(finish["cp_times"], sim["checkpoint_times_ms"]):
        assert abs(game_time - sim_time) <= 50, (finish["cp_times"], sim["checkpoint_times_ms"])


def _disconnects(game_log: Path) -> int:
    """How many clients the plugin logged as disconnected by their C_SHUTDOWN."""
    return [line.strip() for line in game_log.read_text().splitlines()].count("[plugin] Client disconnected")


def _race_with_linesight_ids(port: int) -> dict:
    """One race of the classical driver on ``short``; returns the state blob's fields at the finish."""
    client = LinesightStyleClient(port)
    try:
        assert client.read_i32() == Msg.SC_ON_CONNECT_SYNC  # sent once the game shows its menus
        client.send("iI", Msg.C_SET_TIMEOUT, 20000)
        client.send("if", Msg.C_SET_SPEED, 10.0)
        client.send("ii", Msg.C_SET_ON_STEP_PERIOD, 50)
        assert client.ask_i32(Msg.C_IS_IN_MENUS) == 1
        client.execute_command("map short")
        client.respond(Msg.SC_ON_CONNECT_SYNC)

        driver = BaselineDriver(get_track("short"))
        saved: tuple[bytes, dict] | None = None
        rewound = frame_requested = False
        frame = None
        checkpoints: list[tuple[int, int, dict]] = []
        top_speed = 0.0
        steps = 0
        while True:
            msg = client.read_i32()
            if msg == Msg.SC_RUN_STEP_SYNC:
                race_time = client.read_i32()
                if race_time >= 0:
                    steps += 1
                    blob = client.get_state()
                    fields = read_blob(blob)
                    assert fields["race_time"] == race_time
                    top_speed = max(top_speed, fields["speed"])
                    if race_time == 3000 and saved is None:
                        saved = (blob, fields)
                        client.send("iii", Msg.C_REQUEST_FRAME, FRAME_W, FRAME_H)
                        frame_requested = True
                    elif race_time == 4000 and saved is not None and not rewound:
                        client.rewind_to_state(saved[0])
                        rewound = True
                        back = read_blob(client.get_state())
                        assert back["race_time"] == 3000
                        assert np.allclose(back["position"], saved[1]["position"])
                        assert back["position"] != fields["position"]
                        blob = client.get_state()
                    inputs = action_to_inputs(driver.act(decode_state(blob)))
                    client.set_inputs(inputs.left, inputs.right, inputs.accelerate, inputs.brake)
                    assert race_time < 60_000, "no finish within 60 s of race time"
                client.respond(Msg.SC_RUN_STEP_SYNC)
            elif msg == Msg.SC_CHECKPOINT_COUNT_CHANGED_SYNC:
                current, target = client.read_i32(), client.read_i32()
                blob = client.get_state()
                checkpoints.append((current, target, read_blob(blob)))
                if current < target:
                    assert client.ask_i32(Msg.C_RACE_FINISHED) == 0
                else:  # as Linesight: undo the finish so that the game shows no end screen
                    client.rewind_to_state(without_finish(blob))
                client.respond(Msg.SC_CHECKPOINT_COUNT_CHANGED_SYNC)
                if current == target:
                    break
            elif msg == Msg.SC_REQUESTED_FRAME_SYNC:
                frame = np.frombuffer(client.read_exact(FRAME_W * FRAME_H * 4), np.uint8).reshape(FRAME_H, FRAME_W, 4)
                client.respond(Msg.SC_REQUESTED_FRAME_SYNC)
            elif msg == Msg.SC_LAP_COUNT_CHANGED_SYNC:
                client.read_i32(), client.read_i32()
                client.respond(Msg.SC_LAP_COUNT_CHANGED_SYNC)
            else:
                pytest.fail(f"unexpected message id {msg} from the plugin")

        # The undone finish leaves the race running: the next step comes; disconnect inside it. The
        # plugin then drops the client and takes a new one (its OnConnect in the running race).
        assert client.read_i32() == Msg.SC_RUN_STEP_SYNC
        assert client.read_i32() >= checkpoints[-1][2]["race_time"]
        client.close()
        client = LinesightStyleClient(port)
        assert client.read_i32() == Msg.SC_ON_CONNECT_SYNC
        assert client.ask_i32(Msg.C_IS_IN_MENUS) == 0
        client.respond(Msg.SC_ON_CONNECT_SYNC)
        # Disconnect while the plugin waits for an answer (closing while it is about to write makes
        # its write meet a reset, and it drops the client after its 2 s timeout instead).
        assert client.read_i32() == Msg.SC_RUN_STEP_SYNC
        client.read_i32()
        assert rewound and frame_requested and frame is not None
        assert np.array_equal(frame[..., 0], frame[..., 1]) and np.array_equal(frame[..., 1], frame[..., 2])
        assert frame[..., 0].std() > 5.0  # a picture, not a blank
        assert top_speed > 20.0, top_speed
        assert [c[:2] for c in checkpoints] == [(1, 3), (2, 3), (3, 3)], [c[:2] for c in checkpoints]
        finish = checkpoints[-1][2]
        assert len(finish["cp_times"]) == 3 and all(t > 0 for t in finish["cp_times"])
        assert finish["cp_times"] == sorted(finish["cp_times"]) and finish["cp_times"][-1] == finish["race_time"]
        for k, (current, _, fields) in enumerate(checkpoints[:-1]):
            assert fields["cp_times"][:current] == finish["cp_times"][:current]
            assert all(t == -1 for t in fields["cp_times"][current:])
        assert steps > finish["race_time"] // 50  # the rewound second was raced twice
        return finish
    finally:
        client.close()


def test_script_exception_in_a_callback_ends_that_call_only(tmi_host_binary, tmp_path):
    """The host treats a script exception as the modelled TMInterface 2 does (docs/real_game.md): the
    callback's call ends, the exception is logged with its callback and line, the plugin keeps
    running; ``--script-exceptions exit`` (what our own plugin's tests use) ends the game instead."""
    plugin = tmp_path / "throws.as"
    plugin.write_text(
        "Net::Socket@ sock = null;\n"
        "int renders = 0;\n"
        "void Render() { renders++; Net::Socket@ client = sock.Accept(0); }\n"
        "void OnQueued(int a, int b, const string &in c, const array<string> &in d) {\n"
        "    @sock = Net::Socket(); sock.Listen(\"127.0.0.1\", uint16(GetVariableDouble(\"custom_port\"))); }\n"
        "void Main() { RegisterVariable(\"custom_port\", 0); RegisterCustomCommand(\"q\", \"q\", OnQueued);\n"
        "    CommandList l; l.Content = \"q\"; l.Process(); }\n"
        "PluginInfo@ GetPluginInfo() { PluginInfo i; i.Name = \"throws\"; return i; }\n")
    # The socket is created by Main()'s queued command: a frame rendered before it runs throws.
    host = start_host(tmi_host_binary, plugin=plugin, max_seconds=1.5,
                      extra=["--pre-config-renders", "1", "--script-exceptions", "continue"])
    try:
        host.popen.wait(timeout=20)
        time.sleep(0.2)
    finally:
        host.terminate()
    assert f"LISTENING {host.port}" in host.stdout_lines, host.stdout_lines + [host.stderr_text]
    assert "TERMINATED timeout" in host.stdout_lines
    assert "script exception in void Render(): Null pointer access" in host.stderr_text
    assert "throws.as line 3" in host.stderr_text and "script exceptions: 1" in host.stderr_text

    strict = start_host(tmi_host_binary, plugin=plugin, max_seconds=1.5,
                        extra=["--pre-config-renders", "1", "--script-exceptions", "exit"])
    try:
        strict.popen.wait(timeout=20)
        time.sleep(0.2)
    finally:
        strict.terminate()
    assert "TERMINATED script-error" in strict.stdout_lines and strict.popen.returncode == 5
    assert not any(line.startswith("LISTENING") for line in strict.stdout_lines)


def test_linesight_plugin_runs_whichever_order_the_game_renders_in(tmi_host_binary):
    """Linesight's plugin touches its socket in Render() before Main()'s queued command has created it.
    The host's default (no frame before the queue runs) lets it listen without an exception, and so
    does the other order a game could have (frames first) with the exceptions logged, not fatal."""
    _need_linesight_plugin()
    for extra, exceptions in (([], 0), (["--pre-config-renders", "3"], 3)):
        host = start_host(tmi_host_binary, plugin=LINESIGHT_PLUGIN, max_seconds=1.0,
                          extra=[*extra, "--script-exceptions", "continue"])
        try:
            host.popen.wait(timeout=20)
            time.sleep(0.2)
        finally:
            host.terminate()
        assert f"LISTENING {host.port}" in host.stdout_lines, host.stdout_lines + [host.stderr_text]
        assert host.stderr_text.count("script exception in void Render(): Null pointer access") == exceptions


def test_bad_plugin_or_launch_settings_are_refused_with_a_fix(tmp_path, monkeypatch, capsys):
    """A missing plugin file and unreadable detach settings are refused before anything starts, each
    with a message that names the setting and a fix."""
    from environments.trackmania.tmi.standin.__main__ import main

    for key in ("RULKA_STANDIN_PLUGIN", "RULKA_STANDIN_DETACH", "RULKA_STANDIN_START_TIMEOUT_S"):
        monkeypatch.delenv(key, raising=False)
    assert main(["8478", "--plugin", str(tmp_path / "missing.as")]) == 2
    assert "no plugin file at" in capsys.readouterr().err
    monkeypatch.setenv("RULKA_STANDIN_PLUGIN", str(tmp_path / "missing.as"))
    assert main(["8478"]) == 2
    assert "RULKA_STANDIN_PLUGIN" in capsys.readouterr().err
    monkeypatch.delenv("RULKA_STANDIN_PLUGIN")
    monkeypatch.setenv("RULKA_STANDIN_DETACH", "maybe")
    assert main(["8478"]) == 2
    assert "RULKA_STANDIN_DETACH='maybe'" in capsys.readouterr().err
    monkeypatch.setenv("RULKA_STANDIN_DETACH", "1")
    monkeypatch.setenv("RULKA_STANDIN_START_TIMEOUT_S", "-3")
    assert main(["8478"]) == 2
    assert "must be a positive number of seconds" in capsys.readouterr().err


def test_detached_launch_of_a_game_that_dies_fails_with_its_log(tmp_path, monkeypatch, capsys):
    """A detached launch whose game exits before its plugin listens (here: the plugin does not compile)
    returns 1 with the end of the game's log, and leaves no process."""
    from environments.trackmania.tmi.standin.__main__ import main

    standin_available()
    broken = tmp_path / "broken.as"
    broken.write_text("void Main() { this does not compile }\n")
    port = free_port_block(1)
    monkeypatch.setenv("RULKA_STANDIN_LOG", str(tmp_path / "game_{port}.log"))
    monkeypatch.delenv("RULKA_STANDIN_OPTIONS", raising=False)
    assert main([str(port), "--plugin", str(broken), "--detach"]) == 1
    err = capsys.readouterr().err
    assert "exited (status 1) before its plugin listened" in err and "TERMINATED compile-error" in err, err
    assert processes_mentioning(f"custom_port {port}") == []
