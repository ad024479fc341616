"""Starting and stopping game instances.

A *launcher* is any callable ``launcher(port) -> GameProcess``: it starts one game whose plugin
will listen on ``port`` and returns a handle. The manager never starts processes itself, so tests
inject a launcher that starts a fake game server (or the AngelScript test host) instead.

The two real launchers:

* Windows: ``TMLoader.exe run TmForever "<profile>" /configstring="set custom_port <port>"``.
* Linux: a user script run as ``<script> <port>`` that does the same under Wine.

Both were written from the documented command lines and are *not* tested against a real game here;
finding the game's process after the launcher exits is tested with a launcher that starts a detached
child and exits 0.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from .settings import TMISettings


@runtime_checkable
class GameProcess(Protocol):
    """A running game instance. ``port`` is where its plugin listens (it may differ from the port
    asked for, e.g. a test server bound to port 0)."""

    port: int

    def is_alive(self) -> bool: ...

    def terminate(self) -> None: ...


Launcher = Callable[[int], GameProcess]


class SubprocessGame:
    """A game started through a launcher process (TMLoader, or the user's Wine script).

    TMLoader exits once it has started the game, so the launcher's exit status says nothing about
    the game. As Linesight does, the game's own process is found by name among the processes that
    appeared after the launch: the one whose parent (Windows) or session (POSIX, where the launcher
    is started in a new session) is the launcher's, else the only new one. ``is_alive()`` and
    ``terminate()`` then follow that process, so a hung game is killed and frees its port.

    Args:
        popen: the launcher process.
        port: where the game's plugin will listen.
        game_process_name: prefix of the game process's name (``TmForever`` matches ``TmForever.exe``).
        pids_before: game processes that existed before the launch (never ours).
        find_grace_s: after the launcher exits, how long the game may take to appear.
    """

    def __init__(
        self,
        popen: subprocess.Popen,
        port: int,
        *,
        game_process_name: str = "TmForever",
        pids_before: set[int] | None = None,
        find_grace_s: float = 30.0,
    ) -> None:
        self.popen = popen
        self.port = port
        self.game_process_name = game_process_name
        self.pids_before = set(pids_before or ())
        self.find_grace_s = find_grace_s
        self.game_pid: int | None = None
        self._launcher_exited_at: float | None = None

    def _find_game(self) -> int | None:
        if self.game_pid is None:
            self.game_pid = find_game_process(self.game_process_name, self.popen.pid, self.pids_before)
        return self.game_pid

    def is_alive(self) -> bool:
        """The game process is running (or the launcher is still starting it)."""
        pid = self._find_game()
        if pid is not None:
            return pid_alive(pid)
        if self.popen.poll() is None:
            return True  # the launcher is still starting the game
        if self._launcher_exited_at is None:
            self._launcher_exited_at = time.monotonic()
        return time.monotonic() - self._launcher_exited_at < self.find_grace_s

    def terminate(self) -> None:
        """Kill the game process and whatever is left of the launcher; wait until the game is gone."""
        pid = self._find_game()
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


# ---------------------------------------------------------------------- processes by name
def _posix_processes() -> list[tuple[int, str, int, int]]:
    """(pid, name, parent pid, session id) of every process, from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields and fields[0] == "Z":
            continue  # a zombie is dead
        out.append((int(entry), name, int(fields[1]), int(fields[3])))
    return out


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


def game_pids(name: str) -> set[int]:
    """Pids of the running processes whose name starts with ``name`` (case-insensitive)."""
    procs = _windows_processes(name) if sys.platform.startswith("win") else _posix_processes()
    return {pid for pid, pname, _, _ in procs if pname.lower().startswith(name.lower())}


def find_game_process(name: str, launcher_pid: int, pids_before: set[int]) -> int | None:
    """The game process started by the launcher ``launcher_pid``, or None if not (yet) found."""
    procs = _windows_processes(name) if sys.platform.startswith("win") else _posix_processes()
    new = [(pid, ppid, sid) for pid, pname, ppid, sid in procs
           if pname.lower().startswith(name.lower()) and pid not in pids_before]
    ours = [pid for pid, ppid, sid in new if pid == launcher_pid or ppid == launcher_pid or sid == launcher_pid]
    if len(ours) == 1:
        return ours[0]
    if not ours and len(new) == 1:
        return new[0][0]
    return None  # nothing yet, or ambiguous (several instances starting at once)


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


def default_launcher(settings: TMISettings, platform: str | None = None) -> Launcher:
    """The launcher for this OS; checks the settings it needs first (clear error if missing)."""
    platform = platform or sys.platform
    settings.require_for_launch(platform)

    def launch(port: int) -> GameProcess:
        before = game_pids(settings.game_process_name)
        if platform.startswith("win"):
            # A single string: TMLoader parses /configstring="..." itself.
            cmd = subprocess.list2cmdline(tmloader_command(settings, port)[:4]) + " " + tmloader_command(settings, port)[4]
            popen = subprocess.Popen(cmd, creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0))
        else:
            popen = subprocess.Popen(linux_script_command(settings, port), start_new_session=True)
        return SubprocessGame(popen, port, game_process_name=settings.game_process_name, pids_before=before)

    return launch
