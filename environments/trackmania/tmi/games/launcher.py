"""Starting and stopping game instances.

A *launcher* is any callable ``launcher(port) -> GameProcess``: it starts one game whose plugin
will listen on ``port`` and returns a handle. The manager never starts processes itself, so tests
inject a launcher that starts a fake game server (or the AngelScript test host) instead.

The two real launchers:

* Windows: ``TMLoader.exe run TmForever "<profile>" /configstring="set custom_port <port>"``.
* Linux: a user script run as ``<script> <port>`` that does the same under Wine.

On Linux a launch (:func:`launch_linux_script`):

1. takes the machine's launch lock (:mod:`.launch_lock`): one launch at a time;
2. frees the port of a game of ours left over from an earlier collector or run (killed), and refuses
   a port held by anything else (:class:`PortHeldError`, which names the pid; it is not killed);
3. runs the script with an environment marker, ``RULKA_TMI_LAUNCH_ID=<unique id>`` (and
   ``RULKA_TMI_PORT``), which the game inherits (Wine passes the Unix environment on);
4. finds the game by that marker in ``/proc/PID/environ`` (or in the script's process tree), never as
   "a new process of that name", so a game another program starts at the same time is never taken;
5. releases the lock once the port is served, or when the launch fails or times out
   (:class:`GameLaunchError`; what it started is killed).

Every launch also starts the game's guard (:class:`GameGuard`, :mod:`.game_guard`): a small process,
detached from the launching one, that kills the launch script's process group and the game when the
launching process (a collector, a Ray actor) is gone, whatever ended it (SIGKILL, its Ray node lost),
after a grace in which the learner kills them itself where it can, so that no game outlives its
collector even where nobody else can reach the machine to kill it.

On Windows a launch (:func:`launch_windows_tmloader`) takes the same lock, frees the port of a game of
ours the same way and passes the same marker to TMLoader; the game is found by the marker if TMLoader
passes its environment on, else as the launch's new process of the game's name. Process facts come
from psutil (the ``tmi`` extra; without it Windows refuses to launch, naming it).

Everywhere, a game found is followed by its pid *and* its creation time, so a pid that a later program
reuses is never followed or killed.

Written from the documented command lines; *not* tested against a real game, Wine or Windows here.
Both platforms' steps are tested on Linux with launch scripts that start detached fake games (the
Windows branch with the platform faked).
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from rulka.collection.owned import collector_supervisor, process_start_time

from ..link.client import TMInterfaceConnectError
from .launch_lock import DEFAULT_LOCK_TIMEOUT_S, LaunchLock
from .processes import (
    descendants,
    list_processes,
    port_listeners,
    process_cmdline,
    process_environ,
    process_info,
    require_process_facts,
)
from .settings import TMISettings

log = logging.getLogger(__name__)

#: Environment variable that marks every process a launch started; its value is unique per launch.
LAUNCH_MARKER = "RULKA_TMI_LAUNCH_ID"
#: Environment variable with the port the launch was for.
PORT_MARKER = "RULKA_TMI_PORT"
#: Default deadline for a launched game to serve its port (a first start under Wine takes minutes).
DEFAULT_READY_TIMEOUT_S = 600.0


@runtime_checkable
class GameProcess(Protocol):
    """A running game instance. ``port`` is where its plugin listens (it may differ from the port
    asked for, e.g. a test server bound to port 0). A handle may also expose ``pids`` (a tuple of
    the processes it runs); :func:`process_pids` reads it."""

    port: int

    def is_alive(self) -> bool: ...

    def terminate(self) -> None: ...


Launcher = Callable[[int], GameProcess]


class GameLaunchError(TMInterfaceConnectError):
    """The launched game did not serve its port: the script failed, the game died, or the deadline
    passed. What the launch started has been killed; the manager may retry with a new launch."""


class PortHeldError(RuntimeError):
    """The port is held by a process that is not a game rulka launched; rulka does not kill it."""


def process_pids(process: GameProcess | None) -> tuple[int, ...]:
    """The pids a game handle runs: its ``pids`` if it has them, else its ``popen``'s pid while that
    runs, else ``()`` (e.g. an in-process fake server)."""
    if process is None:
        return ()
    pids = getattr(process, "pids", None)
    if pids is not None:
        return tuple(int(p) for p in pids)
    popen = getattr(process, "popen", None)
    if popen is not None and popen.poll() is None:
        return (int(popen.pid),)
    return ()


class GameGuard:
    """The owner's end of a game's guard (:mod:`.game_guard`): a process, detached from this one, that
    kills the game when this process is gone (killed, its Ray node lost) or closes the guard.

    Start it before the launch, :meth:`watch` the launch script's group and the game once found, and
    :meth:`close` it once the game is terminated. Never raises: a guard that cannot start or has gone
    only costs that protection (logged once)."""

    SCRIPT = Path(__file__).with_name("game_guard.py")

    def __init__(self) -> None:
        """The guard is told of this process's supervisor, a process whose life gives the learner time to
        kill the game itself (the guard never kills it): the one the collection layer named in a collector's
        process (its learner, or its Ray node's raylet: :func:`rulka.collection.owned.collector_supervisor`);
        none in the learner's own process, where the guard kills the game as soon as the process is gone."""
        self.pipe = None
        try:
            flags = 0
            if sys.platform.startswith("win"):
                flags = getattr(subprocess, "DETACHED_PROCESS", 0) | getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
            starter = subprocess.Popen([sys.executable, str(self.SCRIPT)], stdin=subprocess.PIPE,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=not sys.platform.startswith("win"), creationflags=flags)
            self.pipe = starter.stdin
            if hasattr(os, "fork"):
                starter.wait(10)  # it forks the guard and exits at once
        except (OSError, subprocess.TimeoutExpired) as error:
            log.warning("the game's guard did not start (%s): if this process dies, its game is left running", error)
        supervisor = collector_supervisor()
        if supervisor is not None:
            self.watch("supervisor", supervisor, process_start_time(supervisor))

    def watch(self, kind: str, pid: int | None, start: int | None) -> None:
        """Guard ``pid`` (``kind``: ``group`` for the launch script, ``game``; ``supervisor``: the process
        named at construction, never killed, whose life gives the learner time to kill the game itself) under its start time."""
        if self.pipe is None or pid is None or start is None:
            return
        try:
            self.pipe.write(f"{kind} {int(pid)} {int(start)}\n".encode())
            self.pipe.flush()
        except OSError:
            self.pipe = None

    def close(self) -> None:
        """Release the guard: it kills what it watches that still runs, and exits."""
        if self.pipe is not None:
            try:
                self.pipe.close()
            except OSError:
                pass
            self.pipe = None


class SubprocessGame:
    """A game started through a launcher process (TMLoader, or the user's Wine script).

    TMLoader exits once it has started the game, so the launcher's exit status says nothing about
    the game. The game's own process is found by name among the processes this launch started: on
    Linux those carrying this launch's marker (``launch_id``) or below the launcher in the process
    tree; on Windows (no marker can be read there) the launcher's child, else the only new process of
    that name. ``is_alive()`` and ``terminate()`` then follow that process, so a hung game is killed
    and frees its port.

    Args:
        popen: the launcher process.
        port: where the game's plugin will listen.
        game_process_name: prefix of the game process's name (``TmForever`` matches ``TmForever.exe``).
        pids_before: game processes that existed before the launch (never ours; Windows only).
        find_grace_s: after the launcher exits, how long the game may take to appear.
        launch_id: this launch's marker value (``RULKA_TMI_LAUNCH_ID``); None on Windows.
        guard: the launch's :class:`GameGuard` (told of the launcher now and the game once found,
            closed by :meth:`terminate`); None for no guard.
    """

    def __init__(
        self,
        popen: subprocess.Popen,
        port: int,
        *,
        game_process_name: str = "TmForever",
        pids_before: set[int] | None = None,
        find_grace_s: float = 30.0,
        launch_id: str | None = None,
        guard: GameGuard | None = None,
    ) -> None:
        self.popen = popen
        self.guard = guard
        self.port = port
        self.game_process_name = game_process_name
        self.pids_before = set(pids_before or ())
        self.find_by_name = pids_before is not None  # Windows: the game may carry no marker
        self.find_grace_s = find_grace_s
        self.launch_id = launch_id
        self.game_pid: int | None = None
        self.game_started: int | None = None  # the game's creation time when found (processes.ProcInfo.start_ticks)
        self._launcher_exited_at: float | None = None
        if guard is not None:
            guard.watch("group", popen.pid, process_start_time(popen.pid))

    @property
    def pids(self) -> tuple[int, ...]:
        """Live processes of this launch that rulka follows: the game (once found) and the
        launcher while it runs (once: a launch script that execs the game is the game)."""
        pids = []
        if self._game_running():
            pids.append(int(self.game_pid))  # type: ignore[arg-type]
        if self.popen.poll() is None and int(self.popen.pid) not in pids:
            pids.append(int(self.popen.pid))
        return tuple(pids)

    def _find_game(self) -> int | None:
        if self.game_pid is None:
            pid = None
            if self.launch_id is not None:
                pid = find_launched_game(self.game_process_name, self.launch_id, self.popen.pid)
            if pid is None and (self.launch_id is None or self.find_by_name):
                # Windows: TMLoader may not pass the marker on; the launch's new process of that name
                pid = find_game_process(self.game_process_name, self.popen.pid, self.pids_before)
            info = process_info(pid) if pid is not None else None
            if info is not None:
                self.game_pid, self.game_started = pid, info.start_ticks
                if self.guard is not None:
                    self.guard.watch("game", pid, info.start_ticks)
        return self.game_pid

    def _game_running(self) -> bool:
        """The game was found and its pid is still our game: the process under that pid has the
        creation time the game had when found, so a pid reused by another program is never followed
        or killed."""
        pid = self._find_game()
        if pid is None:
            return False
        info = process_info(pid)
        return info is not None and info.start_ticks == self.game_started

    def is_alive(self) -> bool:
        """The game process is running (or the launcher is still starting it)."""
        if self._find_game() is not None:
            return self._game_running()
        if self.popen.poll() is None:
            return True  # the launcher is still starting the game
        if self._launcher_exited_at is None:
            self._launcher_exited_at = time.monotonic()
        return time.monotonic() - self._launcher_exited_at < self.find_grace_s

    def wait_until_served(self, timeout_s: float, poll_s: float = 0.05) -> None:
        """Block until something listens on ``port`` (Linux: ``/proc/net/tcp``, no connection made,
        so the plugin sees no client).

        Raises:
            GameLaunchError: the launcher failed, the game died or was never found, or ``timeout_s``
                passed. The caller kills what was started.
            PortHeldError: a process that rulka did not launch took the port during the launch (it is
                not killed; the caller kills what was started).
        """
        deadline = time.monotonic() + timeout_s
        while True:
            listeners = port_listeners(self.port)
            if listeners.listening:
                self._find_game()
                strangers = sorted(pid for pid in listeners.pids if pid not in self.pids and not is_our_game(pid))
                if strangers:  # it took the port after free_port_of_our_games looked; our game cannot listen
                    raise stranger_holds_port(self.port, strangers, " (it took the port while rulka was "
                                              "launching a game there)")
                if self.game_pid is None:
                    log.warning("port %d is served but no process named %s* of this launch was found: "
                                "check TMI_GAME_PROCESS_NAME", self.port, self.game_process_name)
                return
            if not self.is_alive():
                code = self.popen.poll()
                raise GameLaunchError(
                    f"the game launched for port {self.port} "
                    + ("exited" if self.game_pid is not None else
                       f"was not found (no process named {self.game_process_name}* started by this launch)")
                    + f" before its plugin listened; the launch script exited with status {code}. Run it by hand "
                    f"({process_cmdline_of(self.popen)}) and check TMI_GAME_PROCESS_NAME and the plugin "
                    "(rulka tmi install)"
                )
            if time.monotonic() >= deadline:
                raise GameLaunchError(
                    f"nothing listened on port {self.port} within {timeout_s:.0f} s of the launch: the plugin is "
                    "not loaded (the game console says 'Unknown variable: custom_port'), or the start takes "
                    "longer (raise TMI_START_TIMEOUT_S)"
                )
            time.sleep(poll_s)

    def terminate(self) -> None:
        """Kill the game process and whatever is left of the launcher; wait until the game is gone.

        Only the game and the launcher's process group are killed, not every process carrying the
        launch marker: Wine's ``wineserver`` inherits the marker of the launch that started it and is
        shared by every instance of the prefix."""
        pid = self._find_game() if self._game_running() else None
        if pid is not None:
            kill_pid(pid)
        if self.popen.poll() is None:
            try:
                if sys.platform.startswith("win"):
                    subprocess.run(["taskkill", "/PID", str(self.popen.pid), "/T", "/F"], check=False, capture_output=True)
                else:
                    os.killpg(self.popen.pid, signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 10
        while pid is not None and pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.guard is not None:
            self.guard.close()


def process_cmdline_of(popen: subprocess.Popen) -> str:
    """The launcher's command line, for messages."""
    args = popen.args
    return args if isinstance(args, str) else " ".join(str(a) for a in args)


# ---------------------------------------------------------------------- processes by name
def _posix_processes() -> list[tuple[int, str, int, int]]:
    """(pid, name, parent pid, session id) of every process, from /proc."""
    return [(p.pid, p.name, p.ppid, p.session) for p in list_processes()]


def _windows_processes(name: str) -> list[tuple[int, str, int, int]]:
    """(pid, name, parent pid, 0) of the processes whose name starts with ``name`` (PowerShell/CIM)."""
    command = (
        "Get-CimInstance Win32_Process | Where-Object { $_.Name -like '" + name.replace("'", "") + "*' } | "
        'ForEach-Object { "$($_.ProcessId) $($_.ParentProcessId) $($_.Name)" }'
    )
    result = subprocess.run(["powershell", "-NoProfile", "-Command", command], capture_output=True, text=True, check=False)
    return parse_windows_process_lines(result.stdout)


def parse_windows_process_lines(text: str) -> list[tuple[int, str, int, int]]:
    """Parse ``"<pid> <parent pid> <name>"`` lines (the PowerShell query of :func:`_windows_processes`)."""
    out = []
    for line in text.splitlines():
        parts = line.strip().split(maxsplit=2)
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
            out.append((int(parts[0]), parts[2], int(parts[1]), 0))
    return out


def _named_processes(name: str) -> list[tuple[int, str, int, int]]:
    """(pid, name, parent pid, session id) of the processes (psutil or /proc; PowerShell on Windows without psutil)."""
    procs = _posix_processes()
    if not procs and sys.platform.startswith("win"):
        return _windows_processes(name)
    return procs


def game_pids(name: str) -> set[int]:
    """Pids of the running processes whose name starts with ``name`` (case-insensitive)."""
    return {pid for pid, pname, _, _ in _named_processes(name) if pname.lower().startswith(name.lower())}


def find_game_process(name: str, launcher_pid: int, pids_before: set[int]) -> int | None:
    """Windows: the game process started by the launcher ``launcher_pid`` (its child, else the only
    new process of that name), or None if not (yet) found or ambiguous; the fallback when the game
    carries no launch marker. :func:`find_launched_game` cannot take a stranger's process."""
    procs = _named_processes(name)
    new = [(pid, ppid, sid) for pid, pname, ppid, sid in procs
           if pname.lower().startswith(name.lower()) and pid not in pids_before]
    ours = [pid for pid, ppid, sid in new if pid == launcher_pid or ppid == launcher_pid or sid == launcher_pid]
    if len(ours) == 1:
        return ours[0]
    if not ours and len(new) == 1:
        return new[0][0]
    return None  # nothing yet, or ambiguous (several instances starting at once)


def launched_pids(launch_id: str, launcher_pid: int | None = None) -> set[int]:
    """Linux: pids of the processes a launch started: those whose environment carries
    ``RULKA_TMI_LAUNCH_ID=launch_id``, and those below ``launcher_pid`` in the process tree."""
    processes = list_processes()
    ours = descendants(launcher_pid, processes) if launcher_pid is not None else set()
    for p in processes:
        if p.pid not in ours and (process_environ(p.pid) or {}).get(LAUNCH_MARKER) == launch_id:
            ours.add(p.pid)
    return ours


def find_launched_game(name: str, launch_id: str, launcher_pid: int | None = None) -> int | None:
    """Linux: the game process (name starting with ``name``) that this launch started, or None.

    Among this launch's processes (:func:`launched_pids`) with the game's name, the top one (whose
    parent is not one of them; the oldest if several), so a helper process the game starts under the
    same name is not taken for it. Processes of other launches or programs are never candidates."""
    candidates = {}
    for pid in launched_pids(launch_id, launcher_pid):
        info = process_info(pid)
        if info is not None and info.name.lower().startswith(name.lower()):
            candidates[pid] = info
    tops = [info for info in candidates.values() if info.ppid not in candidates]
    if not tops:
        return None
    return min(tops, key=lambda info: (info.start_ticks, info.pid)).pid


def is_our_game(pid: int) -> bool:
    """Whether ``pid`` was started by a rulka launch (its environment carries ``RULKA_TMI_LAUNCH_ID``)."""
    return LAUNCH_MARKER in (process_environ(pid) or {})


def stranger_holds_port(port: int, strangers: list[int], when: str = "") -> PortHeldError:
    """The error for ``port`` held by processes rulka did not launch: their pids and command lines, and the fix."""
    named = "; ".join(f"pid {pid}: {process_cmdline(pid) or '?'}" for pid in strangers)
    return PortHeldError(
        f"port {port} is held by a process that rulka did not launch ({named}){when}. rulka does not kill it: "
        f"stop it (kill {strangers[0]}) or choose other ports (TMI_BASE_PORT)"
    )


def free_port_of_our_games(port: int, timeout_s: float = 10.0) -> list[int]:
    """Before a launch (Linux and Windows), kill a game of ours that still listens on ``port``; returns its pids.

    A game of ours is a process carrying ``RULKA_TMI_LAUNCH_ID`` (left by an earlier collector or
    run). Anything else is not killed.

    Raises:
        PortHeldError: a process that is not a game of ours listens on ``port`` (named by pid and
            command line), or a listener whose owner this user cannot see.
    """
    listeners = port_listeners(port)
    if not listeners.listening:
        return []
    if not listeners.pids:
        raise PortHeldError(
            f"port {port} is held by a process this user cannot see (another user's program?). Find it with "
            f"`sudo ss -ltnp 'sport = :{port}'` and stop it, or choose other ports (TMI_BASE_PORT)"
        )
    strangers = sorted(pid for pid in listeners.pids if not is_our_game(pid))
    if strangers:
        raise stranger_holds_port(port, strangers)
    killed = sorted(listeners.pids)
    log.warning("port %d is held by a game of ours left from an earlier run (pids %s): killing it", port, killed)
    for pid in killed:
        kill_pid(pid)
    deadline = time.monotonic() + timeout_s
    while port_listeners(port).listening:
        if time.monotonic() >= deadline:
            raise PortHeldError(f"port {port} is still held {timeout_s:.0f} s after killing pids {killed}")
        time.sleep(0.02)
    return killed


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    if sys.platform.startswith("win"):
        result = subprocess.run(["tasklist", "/FI", f"PID eq {pid}", "/NH"], capture_output=True, text=True, check=False)
        return str(pid) in result.stdout
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] != "Z"


def kill_pid(pid: int) -> None:
    """Kill process ``pid`` (SIGKILL / taskkill /F); no error if it is gone."""
    try:
        if sys.platform.startswith("win"):
            subprocess.run(["taskkill", "/PID", str(pid), "/F"], check=False, capture_output=True)
        else:
            os.kill(pid, signal.SIGKILL)
    except (OSError, ProcessLookupError):
        pass


def tmloader_command(settings: TMISettings, port: int) -> list[str]:
    """The Windows command line that starts TMNF with TMInterface and ``custom_port`` set."""
    settings.require("tmloader_path", "tmloader_profile")
    return [
        str(settings.tmloader_path),
        "run",
        "TmForever",
        str(settings.tmloader_profile),
        f'/configstring="set custom_port {int(port)}"',
    ]


def linux_script_command(settings: TMISettings, port: int) -> list[str]:
    """The Linux command line: the user's Wine launch script with the port as only argument."""
    settings.require("linux_launch_script")
    return [str(settings.linux_launch_script), str(int(port))]


def launch_linux_script(
    command: list[str],
    port: int,
    *,
    game_process_name: str = "TmForever",
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    lock_path: str | Path | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    find_grace_s: float = 30.0,
) -> SubprocessGame:
    """Linux: run ``command`` (the launch script and its arguments) to start a game on ``port``.

    Under the machine's launch lock: frees the port of a game of ours (:func:`free_port_of_our_games`),
    starts the script in its own session with ``RULKA_TMI_LAUNCH_ID`` / ``RULKA_TMI_PORT`` in its
    environment, and waits until the port is served; the lock is released then or on failure.

    Raises:
        PortHeldError: a stranger's process holds the port (left alive).
        GameLaunchError: no game served the port within ``ready_timeout_s`` (what was started is killed).
        LaunchLockTimeout: other launches held the lock for ``lock_timeout_s``.
    """
    return _launch_under_lock(
        lambda env: subprocess.Popen(command, start_new_session=True, env=env, stdin=subprocess.DEVNULL),
        port, game_process_name=game_process_name, ready_timeout_s=ready_timeout_s, lock_path=lock_path,
        lock_timeout_s=lock_timeout_s, find_grace_s=find_grace_s, count_games_before=False)


def _launch_under_lock(
    start: Callable[[dict[str, str]], subprocess.Popen],
    port: int,
    *,
    game_process_name: str,
    ready_timeout_s: float,
    lock_path: str | Path | None,
    lock_timeout_s: float,
    find_grace_s: float,
    count_games_before: bool,
) -> SubprocessGame:
    """The launch both platforms share: under the launch lock, free the port of a game of ours, start the
    launcher (``start(env)``, ``env`` carrying the launch marker and port) with a guard, and wait until the
    port is served (what was started is killed on failure). ``count_games_before``: remember the running
    ``game_process_name`` pids, so the game can be found as the only new one when it does not carry the
    marker (TMLoader on Windows)."""
    launch_id = uuid.uuid4().hex
    with LaunchLock(lock_path, timeout_s=lock_timeout_s):
        free_port_of_our_games(port)
        before = game_pids(game_process_name) if count_games_before else None
        env = dict(os.environ, **{LAUNCH_MARKER: launch_id, PORT_MARKER: str(int(port))})
        guard = GameGuard()
        popen = start(env)
        game = SubprocessGame(popen, port, game_process_name=game_process_name, pids_before=before,
                              launch_id=launch_id, find_grace_s=find_grace_s, guard=guard)
        try:
            game.wait_until_served(ready_timeout_s)
        except BaseException:
            game.terminate()
            raise
    log.info("game for port %d is served (game pid %s, launch %s)", port, game.game_pid, launch_id)
    return game


def _start_windows(command: str, env: dict[str, str]) -> subprocess.Popen:
    """Start TMLoader's command line (one string: TMLoader parses /configstring="..." itself)."""
    return subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                            creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0))


def launch_windows_tmloader(
    command: str,
    port: int,
    *,
    game_process_name: str = "TmForever",
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    lock_path: str | Path | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    find_grace_s: float = 30.0,
) -> SubprocessGame:
    """Windows: run TMLoader's ``command`` to start a game on ``port``, as :func:`launch_linux_script` does
    on Linux: under the launch lock, the port freed of a game of ours, the launch marker in TMLoader's
    environment, the game waited for until its port is served.

    Raises:
        ProcessFactsUnavailable: psutil is missing (processes cannot be inspected).
        PortHeldError: a stranger's process holds the port (left alive).
        GameLaunchError: no game served the port within ``ready_timeout_s`` (what was started is killed).
        LaunchLockTimeout: other launches held the lock for ``lock_timeout_s``.
    """
    require_process_facts()
    return _launch_under_lock(
        lambda env: _start_windows(command, env), port, game_process_name=game_process_name,
        ready_timeout_s=ready_timeout_s, lock_path=lock_path, lock_timeout_s=lock_timeout_s,
        find_grace_s=find_grace_s, count_games_before=True)


def default_launcher(settings: TMISettings, platform: str | None = None, *,
                     lock_path: str | Path | None = None) -> Launcher:
    """The launcher for this OS; checks the settings it needs first (clear error if missing).

    Launches go through :func:`launch_linux_script` on Linux and :func:`launch_windows_tmloader` on
    Windows (lock, orphan check, marker; the port must be served within ``settings.start_timeout_s``,
    default 600 s); ``lock_path`` overrides the lock file (tests)."""
    platform = platform or sys.platform
    settings.require_for_launch(platform)
    ready_timeout_s = settings.start_timeout_s or DEFAULT_READY_TIMEOUT_S

    def launch(port: int) -> GameProcess:
        if platform.startswith("win"):
            # A single string: TMLoader parses /configstring="..." itself.
            cmd = subprocess.list2cmdline(tmloader_command(settings, port)[:4]) + " " + tmloader_command(settings, port)[4]
            return launch_windows_tmloader(cmd, port, game_process_name=settings.game_process_name,
                                           ready_timeout_s=ready_timeout_s, lock_path=lock_path)
        return launch_linux_script(linux_script_command(settings, port), port,
                                   game_process_name=settings.game_process_name,
                                   ready_timeout_s=ready_timeout_s, lock_path=lock_path)

    return launch
