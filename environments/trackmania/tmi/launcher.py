"""Starting and stopping game instances.

A *launcher* is any callable ``launcher(port) -> GameProcess``: it starts one game whose plugin
will listen on ``port`` and returns a handle. The manager never starts processes itself, so tests
inject a launcher that starts a fake game server (or the AngelScript test host) instead.

The two real launchers:

* Windows: ``TMLoader.exe run TmForever "<profile>" /configstring="set custom_port <port>"``.
* Linux: a user script run as ``<script> <port>`` that does the same under Wine.

Both were written from the documented command lines and are *not* tested against a real game here.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
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
    """A game started as a child process (and its process group / tree)."""

    def __init__(self, popen: subprocess.Popen, port: int) -> None:
        self.popen = popen
        self.port = port

    def is_alive(self) -> bool:
        # TMLoader may exit after starting TmForever; a finished launcher is not a dead game, so a
        # process that exited with status 0 counts as alive and hangs are caught by socket timeouts.
        code = self.popen.poll()
        return code is None or code == 0

    def terminate(self) -> None:
        """Kill the whole tree: ``taskkill /T /F`` on Windows, the process group elsewhere."""
        if self.popen.poll() is not None and sys.platform.startswith("win"):
            return
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
        if platform.startswith("win"):
            # A single string: TMLoader parses /configstring="..." itself.
            cmd = subprocess.list2cmdline(tmloader_command(settings, port)[:4]) + " " + tmloader_command(settings, port)[4]
            popen = subprocess.Popen(cmd, creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0))
        else:
            popen = subprocess.Popen(linux_script_command(settings, port), start_new_session=True)
        return SubprocessGame(popen, port)

    return launch
