"""The launcher's game process: found after a TMLoader-like launcher exits, followed, and killed."""
from __future__ import annotations

import os
import signal
import socket
import sys
import textwrap
import time
from pathlib import Path

import pytest

from environments.trackmania.tmi.games.launcher import default_launcher, parse_windows_process_lines, pid_alive
from environments.trackmania.tmi.games.settings import TMISettings

from .conftest import free_port

GAME_NAME = "RulkaFakeGame"

# A "game": names itself like the game's process, listens on the port, writes its pid, waits.
GAME = textwrap.dedent(
    """
    import socket, sys, time
    with open("/proc/self/comm", "w") as f:
        f.write(sys.argv[2])
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen(1)
    open(sys.argv[3], "w").write(str(__import__("os").getpid()))
    time.sleep(120)
    """
)

# A launcher like TMLoader: starts the game as a detached child (its own process group) and exits 0.
LAUNCHER = textwrap.dedent(
    """
    #!{python}
    import os, subprocess, sys
    subprocess.Popen([{python!r}, {game!r}, sys.argv[1], {name!r}, {pidfile!r}],
                     preexec_fn=os.setpgrp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    sys.exit(0)
    """
).lstrip()


@pytest.fixture
def detached_launch(tmp_path):
    if not sys.platform.startswith("linux"):
        pytest.skip("the fake game names itself through /proc")
    game = tmp_path / "game.py"
    game.write_text(GAME)
    started: list[int] = []

    def launch():
        pidfile = tmp_path / f"game{len(started)}.pid"
        script = tmp_path / "launch.py"
        script.write_text(LAUNCHER.format(python=sys.executable, game=str(game), name=GAME_NAME, pidfile=str(pidfile)))
        script.chmod(0o755)
        settings = TMISettings(account_name="bot", linux_launch_script=str(script), game_process_name=GAME_NAME)
        port = free_port()
        process = default_launcher(settings, platform="linux", lock_path=tmp_path / "launch.lock")(port)
        deadline = time.monotonic() + 10
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline, "the fake game did not start"
            time.sleep(0.02)
        pid = int(pidfile.read_text())
        started.append(pid)
        process.popen.wait(timeout=10)
        return process, pid, port

    yield launch
    for pid in started:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_game_is_followed_after_the_launcher_exits(detached_launch):
    """Point 5: the launcher exits 0 once the game runs; is_alive() follows the game, not the launcher."""
    process, pid, _ = detached_launch()
    assert process.popen.returncode == 0
    assert process.is_alive() and process.game_pid == pid
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not process.is_alive(), "a dead game must not count as alive because its launcher exited 0"


def test_terminate_kills_the_game_and_frees_its_port(detached_launch):
    """Point 5: terminate() kills the game process itself (not only the launcher's group), so the
    port is free for the relaunch."""
    process, pid, port = detached_launch()
    assert not port_is_free(port)
    process.terminate()
    assert not pid_alive(pid) and port_is_free(port)


def test_windows_process_listing_is_parsed():
    """The PowerShell query's lines ("pid parent name") parse into (pid, name, parent, 0)."""
    text = "4242 1000 TmForever.exe\r\n\r\nbad line\r\n17 4242 TmForever.exe\r\n"
    assert parse_windows_process_lines(text) == [(4242, "TmForever.exe", 1000, 0), (17, "TmForever.exe", 4242, 0)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_launch_script_that_execs_the_game_is_one_pid():
    """A launch script that execs the game (as the stand-in's launch.sh does) is the game: its pid is
    reported once, not as game and launcher (it appeared twice in the hung-game warning)."""
    import subprocess

    from environments.trackmania.tmi.games.launcher import LAUNCH_MARKER, SubprocessGame

    popen = subprocess.Popen(["sleep", "30"], env=dict(os.environ, **{LAUNCH_MARKER: "exec-test"}))
    try:
        game = SubprocessGame(popen, 1, game_process_name="sleep", launch_id="exec-test")
        deadline = time.monotonic() + 10
        while game.game_pid is None and time.monotonic() < deadline:
            game.is_alive()
            time.sleep(0.05)
        assert game.pids == (popen.pid,)
    finally:
        popen.kill()
        popen.wait()
