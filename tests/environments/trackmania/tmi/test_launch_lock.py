"""Linux launches: one at a time (the launch lock), the game found by this launch's marker, a port
freed of our own orphan but never taken from a stranger. No game: launch scripts start fake games
(Python processes that name themselves like the game and listen on 127.0.0.1)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from environments.trackmania.tmi.games.launch_lock import LaunchLock
from environments.trackmania.tmi.games.launcher import (
    LAUNCH_MARKER,
    GameLaunchError,
    PortHeldError,
    default_launcher,
    game_pids,
    launch_linux_script,
    pid_alive,
)
from environments.trackmania.tmi.games.processes import port_listeners
from environments.trackmania.tmi.games.settings import TMISettings

from .conftest import free_port

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the launch lock and /proc are Linux's"),
]

GAME_NAME = "RulkaLockGame"

# A "game": names itself like the game's process, waits, listens on the port, records when it
# listens and its pid, then waits to be killed.
GAME = textwrap.dedent(
    """
    import os, socket, sys, time
    port, name, pidfile, delay, timeline = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
    with open("/proc/self/comm", "w") as f:
        f.write(name)
    time.sleep(delay)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(port)))
    s.listen(1)
    with open(timeline, "a") as f:
        f.write(f"listen {port} {time.time()}\\n")
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(pidfile + ".tmp", pidfile)
    time.sleep(120)
    """
)

# A launch script like TMLoader under Wine: records its start, starts the game detached from its own
# process tree (double fork: the game's parent is not the script) and exits 0.
LAUNCH = textwrap.dedent(
    """
    #!{python}
    import os, sys, time
    port = sys.argv[1]
    with open({timeline!r}, "a") as f:
        f.write(f"start {{port}} {{time.time()}}\\n")
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.execv({python!r}, [{python!r}, {game!r}, port, {name!r}, {pidfile!r} + port, {delay!r}, {timeline!r}])
        os._exit(0)
    os.wait()
    sys.exit({status})
    """
).lstrip()


class Scene:
    """Launch scripts, fake games and strangers of one test; every process is killed afterwards
    and checked gone by pid."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.game = tmp_path / "game.py"
        self.game.write_text(GAME)
        self.timeline = tmp_path / "timeline.txt"
        self.timeline.touch()
        self.lock_path = tmp_path / "launch.lock"
        self.pids: list[int] = []
        self.popens: list[subprocess.Popen] = []

    def script(self, delay: float = 0.0, status: int = 0) -> Path:
        path = self.tmp / f"launch_{delay}_{status}.py"
        path.write_text(LAUNCH.format(python=sys.executable, timeline=str(self.timeline), game=str(self.game),
                                      name=GAME_NAME, pidfile=str(self.tmp / "game.pid."), delay=str(delay),
                                      status=status))
        path.chmod(0o755)
        return path

    def settings(self, script: Path) -> TMISettings:
        return TMISettings(account_name="bot", linux_launch_script=str(script), game_process_name=GAME_NAME,
                           start_timeout_s=20.0)

    def launched_pid(self, port: int) -> int:
        pid = int((self.tmp / f"game.pid.{port}").read_text())
        self.pids.append(pid)
        return pid

    def other_game(self, port: int, *, marker: str | None, delay: float = 0.0) -> int:
        """A process named like the game, started by the test (not by a launch), listening on ``port``;
        with ``marker``, it carries a launch marker as a game of an earlier run would."""
        env = dict(os.environ)
        env.pop(LAUNCH_MARKER, None)
        if marker is not None:
            env[LAUNCH_MARKER] = marker
        pidfile = self.tmp / f"other.pid.{port}"
        popen = subprocess.Popen([sys.executable, str(self.game), str(port), GAME_NAME, str(pidfile), str(delay),
                                  str(self.tmp / "other_timeline.txt")], env=env, start_new_session=True,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.popens.append(popen)
        self.pids.append(popen.pid)
        if delay == 0.0:
            deadline = time.monotonic() + 10
            while not pidfile.exists():
                assert time.monotonic() < deadline, "the other game did not start"
                time.sleep(0.02)
        return popen.pid

    def events(self) -> list[tuple[str, int, float]]:
        out = []
        for line in self.timeline.read_text().splitlines():
            kind, port, t = line.split()
            out.append((kind, int(port), float(t)))
        return out

    def cleanup(self) -> list[int]:
        for pidfile in self.tmp.glob("game.pid.*"):
            if pidfile.suffix != ".tmp":
                self.pids.append(int(pidfile.read_text()))
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for popen in self.popens:
            popen.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(pid_alive(p) for p in self.pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        return [p for p in self.pids if pid_alive(p)]


@pytest.fixture
def scene(tmp_path):
    s = Scene(tmp_path)
    yield s
    left = s.cleanup()
    assert not left, f"processes left behind: {left}"


@pytest.mark.reliability
def test_lock_serialises_two_concurrent_launches(scene):
    """Two collectors launch at the same moment: the second launch script starts only after the
    first game serves its port (one launch at a time per machine; the lock is an flock)."""
    script = scene.script(delay=0.4)
    ports = [free_port(), free_port()]
    games, errors = [], []

    def launch(port: int) -> None:
        try:
            games.append(default_launcher(scene.settings(script), platform="linux", lock_path=scene.lock_path)(port))
        except Exception as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=launch, args=(p,)) for p in ports]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    events = scene.events()
    start = {port: t for kind, port, t in events if kind == "start"}
    listen = {port: t for kind, port, t in events if kind == "listen"}
    first, second = sorted(ports, key=lambda p: start[p])
    assert listen[first] <= start[second], f"the launches overlapped: {events}"
    for game in games:
        assert game.game_pid == scene.launched_pid(game.port)
        game.terminate()
        assert not pid_alive(game.game_pid) and not port_listeners(game.port).listening


@pytest.mark.reliability
def test_discovery_ignores_a_stranger_started_at_the_same_time(scene):
    """A process with the game's name that another program starts during our launch (not in the
    launch's process tree either, as a game that Wine detaches) is never taken for our game: the game
    is the one carrying this launch's marker. terminate() kills ours and leaves the stranger alive."""
    port = free_port()
    stranger = scene.other_game(free_port(), marker=None, delay=0.2)
    game = default_launcher(scene.settings(scene.script(delay=0.2)), platform="linux",
                            lock_path=scene.lock_path)(port)
    ours = scene.launched_pid(port)
    assert game.game_pid == ours != stranger
    assert ours in game.pids
    game.terminate()
    assert not pid_alive(ours) and pid_alive(stranger)


@pytest.mark.reliability
def test_an_orphan_of_ours_holding_the_port_is_killed_before_the_launch(scene):
    """A game left by an earlier collector or run (it carries a launch marker) still listens on the
    port: the launch kills it, then starts and finds the new game on that port."""
    port = free_port()
    orphan = scene.other_game(port, marker="earlier-run")
    assert port_listeners(port).pids == {orphan}
    game = default_launcher(scene.settings(scene.script()), platform="linux", lock_path=scene.lock_path)(port)
    assert not pid_alive(orphan)
    new = scene.launched_pid(port)
    assert game.game_pid == new != orphan and port_listeners(port).pids == {new}
    game.terminate()
    assert not port_listeners(port).listening


@pytest.mark.reliability
def test_a_stranger_holding_the_port_is_reported_and_left_alive(scene):
    """A program that rulka did not launch listens on the port: the launch refuses with an error that
    names its pid and the fix; the stranger is not killed, no launch script runs, the lock is free."""
    port = free_port()
    stranger = scene.other_game(port, marker=None)
    with pytest.raises(PortHeldError) as info:
        default_launcher(scene.settings(scene.script()), platform="linux", lock_path=scene.lock_path)(port)
    message = str(info.value)
    assert f"pid {stranger}" in message and f"kill {stranger}" in message and "TMI_BASE_PORT" in message
    assert pid_alive(stranger) and port_listeners(port).pids == {stranger}
    assert scene.events() == [], "no launch script may run on a port held by a stranger"
    with LaunchLock(scene.lock_path, timeout_s=0.5):
        pass


@pytest.mark.reliability
def test_a_stranger_taking_the_port_during_the_launch_is_reported_at_once(scene):
    """The port is free when the launch looks, then a program that rulka did not launch listens on it
    before the game does (a Ray soak of 2026-12-07: the client then waited on the stranger for 64 s
    before the next launch named it). The launch refuses as soon as the stranger listens, naming its
    pid; the game it started is killed, the stranger is left alive."""
    port = free_port()
    stranger = scene.other_game(port, marker=None, delay=0.5)
    t0 = time.monotonic()
    with pytest.raises(PortHeldError) as info:
        default_launcher(scene.settings(scene.script(delay=4.0)), platform="linux", lock_path=scene.lock_path)(port)
    assert time.monotonic() - t0 < 3.5, "refused only after the game's own start"
    message = str(info.value)
    assert f"pid {stranger}" in message and f"kill {stranger}" in message and "while rulka was launching" in message
    assert [kind for kind, _, _ in scene.events()] == ["start"], "the launch script ran once"
    assert pid_alive(stranger) and port_listeners(port).pids == {stranger}
    deadline = time.monotonic() + 10
    while game_pids(GAME_NAME) - {stranger} and time.monotonic() < deadline:
        time.sleep(0.05)
    assert game_pids(GAME_NAME) == {stranger}, "the launched game is killed"


@pytest.mark.reliability
def test_a_failed_launch_raises_and_releases_the_lock(scene):
    """A launch script that exits 1 and starts no game (wrong path in it, say): the launch fails with
    GameLaunchError naming the status, within the grace period, and the lock is released."""
    script = scene.tmp / "broken.sh"
    script.write_text("#!/bin/sh\nexit 1\n")
    script.chmod(0o755)
    t0 = time.monotonic()
    with pytest.raises(GameLaunchError, match="status 1"):
        launch_linux_script([str(script), "1"], free_port(), game_process_name=GAME_NAME, ready_timeout_s=10,
                            lock_path=scene.lock_path, find_grace_s=0.3)
    assert time.monotonic() - t0 < 5
    with LaunchLock(scene.lock_path, timeout_s=0.5):
        pass


@pytest.mark.reliability
def test_the_lock_waits_for_its_holder_and_times_out_with_the_holders_pid(tmp_path):
    """While one launch holds the lock another waits; past its timeout it fails naming the holder."""
    path = tmp_path / "launch.lock"
    with LaunchLock(path):
        with pytest.raises(TimeoutError, match=f"pid {os.getpid()}"):
            LaunchLock(path, timeout_s=0.2).acquire()


def test_manager_reports_the_pids_and_port_of_its_game(scene):
    """GameInstanceManager.game_pids and .port (and TMIBackend.game_pids / game_port) say which game it launched (what a collector reports so
    that its games can be killed when it is replaced); () once the game is stopped."""
    from environments.trackmania.tmi.backend import TMIBackend
    from environments.trackmania.tmi.games.game_instance_manager import GameInstanceManager

    port = free_port()
    settings = scene.settings(scene.script())
    manager = GameInstanceManager(settings=settings, port=port,
                                  launcher=default_launcher(settings, platform="linux", lock_path=scene.lock_path))
    assert manager.game_pids == ()
    manager._launch()  # the launch step of start_race, without the protocol that a fake game lacks
    game = scene.launched_pid(port)
    assert game in manager.game_pids and manager.port == port
    backend = TMIBackend(manager=manager)
    assert backend.game_pids == manager.game_pids and backend.game_port == port
    manager.close()
    assert manager.game_pids == () and not pid_alive(game)


@pytest.mark.reliability
def test_a_reused_game_pid_is_neither_followed_nor_killed(scene):
    """Our game died and another program got its pid: the handle sees a dead game and terminate()
    leaves that program alive (a pid is ours only while it carries this launch's marker)."""
    from environments.trackmania.tmi.games.launcher import SubprocessGame

    launcher = subprocess.Popen(["true"])
    launcher.wait(timeout=10)
    stranger = scene.other_game(free_port(), marker=None)
    game = SubprocessGame(launcher, free_port(), game_process_name=GAME_NAME, launch_id="this-launch")
    game.game_pid = stranger  # as if the game's pid had been reused by the stranger
    assert not game.is_alive() and game.pids == ()
    game.terminate()
    assert pid_alive(stranger)


# ---------------------------------------------------------------------- the Windows branch, platform faked
def _fake_tmloader(monkeypatch, script: Path, pass_marker: bool = True) -> None:
    """Run TMLoader's command line on Linux: the launch script gets the port of ``/configstring="set
    custom_port N"`` (and exits after detaching the game, as TMLoader does); ``pass_marker`` False drops the
    launch marker from the game's environment (a TMLoader that does not pass it on)."""
    import re

    from environments.trackmania.tmi.games import launcher

    def start(command: str, env: dict[str, str]) -> subprocess.Popen:
        assert command.endswith('"') and "/configstring=" in command  # one string, as TMLoader parses it
        port = re.search(r"custom_port (\d+)", command).group(1)
        env = dict(env) if pass_marker else {k: v for k, v in env.items() if k != LAUNCH_MARKER}
        return subprocess.Popen([str(script), port], env=env, start_new_session=True, stdin=subprocess.DEVNULL)

    monkeypatch.setattr(launcher, "_start_windows", start)


def _windows_settings(scene: Scene, script: Path) -> TMISettings:
    return TMISettings(account_name="bot", tmloader_path=str(script), tmloader_profile="rulka",
                       game_process_name=GAME_NAME, start_timeout_s=20.0)


@pytest.mark.reliability
def test_windows_launches_take_the_lock_and_reclaim_our_own_game_on_the_port(scene, monkeypatch):
    """Windows (faked): two launches at once run one at a time (the launch lock); a game of ours left on
    one port by an earlier run is killed first; each new game is found by the launch marker and followed
    by its creation time (a pid whose creation time differs is not ours: not alive, not killed)."""
    script = scene.script(delay=0.4)
    _fake_tmloader(monkeypatch, script)
    ports = [free_port(), free_port()]
    orphan = scene.other_game(ports[0], marker="an-earlier-run")
    games, errors = [], []

    def launch(port: int) -> None:
        try:
            games.append(default_launcher(_windows_settings(scene, script), platform="win32",
                                          lock_path=scene.lock_path)(port))
        except Exception as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=launch, args=(p,)) for p in ports]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    assert not pid_alive(orphan)
    events = scene.events()
    start = {port: t for kind, port, t in events if kind == "start"}
    listen = {port: t for kind, port, t in events if kind == "listen"}
    first, second = sorted(ports, key=lambda p: start[p])
    assert listen[first] <= start[second], f"the launches overlapped: {events}"
    for game in games:
        assert game.game_pid == scene.launched_pid(game.port) and game.is_alive()
    impostor, real = games
    impostor.game_started += 1  # as if the pid now named a later process
    assert not impostor.is_alive() and impostor.game_pid not in impostor.pids
    real.terminate()
    assert not pid_alive(real.game_pid) and not port_listeners(real.port).listening
    impostor.terminate()
    assert pid_alive(impostor.game_pid), "a pid whose creation time changed was killed"


@pytest.mark.reliability
def test_windows_finds_a_game_without_the_marker_and_refuses_a_strangers_port(scene, monkeypatch):
    """Windows (faked), a TMLoader that does not pass the marker on: the game is found as the launch's
    new process of the game's name. A program rulka did not launch on the port is named, not killed."""
    script = scene.script()
    _fake_tmloader(monkeypatch, script, pass_marker=False)
    port = free_port()
    game = default_launcher(_windows_settings(scene, script), platform="win32", lock_path=scene.lock_path)(port)
    assert game.game_pid == scene.launched_pid(port) and game.is_alive()
    game.terminate()
    assert not pid_alive(game.game_pid)
    held = free_port()
    stranger = scene.other_game(held, marker=None)
    with pytest.raises(PortHeldError, match=f"kill {stranger}"):
        default_launcher(_windows_settings(scene, script), platform="win32", lock_path=scene.lock_path)(held)
    assert pid_alive(stranger)
