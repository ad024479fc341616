"""A game's guard: kills the game when the process that launched it (its owner: a collector) is gone.

A launch (:mod:`.launcher`) starts one guard per game, detached from the owner (its own session, and
on POSIX not even the owner's child, so whatever kills the owner's children does not reach it), with a
pipe from the owner as its standard input. The owner writes one line per process to guard:

- ``group PID START``: the launch script, a process-group leader (its whole group is killed, as
  :meth:`.launcher.SubprocessGame.terminate` does);
- ``game PID START``: the game, once found;
- ``supervisor PID START``: the owner's parent, never killed (the learner, for a collector process;
  the node's raylet, for a Ray actor): while it runs, someone can still kill the game.

``START`` is the process's start time as :func:`.processes.process_info` gives it (psutil's creation time
in microseconds, else ``/proc`` clock ticks): a pid reused by another program is never killed.

When the pipe closes (the owner closed it after terminating the game, or the owner died in any way:
SIGKILL, its Ray node lost, its machine's raylet gone), the guard kills whatever of these still runs
under its start time, and exits; while the owner's supervisor still runs it first leaves it up to
``GRACE_S`` to do so (the learner kills a failed collector's games itself and logs their pids and
ports), and once the supervisor is gone too (a lost Ray node's raylet) it waits no longer. It also exits, killing nothing, once the game it was told of and the
launch script are gone (the game ended by other means). It watches by reading its standard input, so
it costs nothing while the owner lives.

Run as a script (``python game_guard.py``) with the standard library and, if installed, psutil; it
imports nothing of rulka, so it starts in milliseconds and needs no import path.
"""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

#: Seconds between two checks that the guarded processes still run.
CHECK_EVERY_S = 1.0
#: Seconds the guard leaves, once the owner is gone but its supervisor runs, for the learner to kill the game.
GRACE_S = 60.0


def start_time(pid: int) -> int | None:
    """As :func:`.processes.process_info`'s ``start_ticks``; None when gone or a zombie."""
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        try:
            process = psutil.Process(pid)
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            return round(process.create_time() * 1_000_000)
        except (psutil.Error, OSError, ValueError):
            return None
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if not fields or fields[0] == "Z" else int(fields[19])


def kill(kind: str, pid: int, start: int) -> None:
    """Kill ``pid`` (``group``: its process group) if it still runs under ``start``."""
    if start_time(pid) != start:
        return
    try:
        if sys.platform.startswith("win"):
            tree = ["/T"] if kind == "group" else []
            subprocess.run(["taskkill", "/PID", str(pid), *tree, "/F"], check=False, capture_output=True)
        elif kind == "group":
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def guard(lines: "queue.Queue[str | None]") -> None:
    """Read the owner's lines until the pipe closes (then kill), or until everything guarded is gone."""
    guarded: list[tuple[str, int, int]] = []
    supervisor: tuple[int, int] | None = None
    game_told = False
    while True:
        try:
            line = lines.get(timeout=CHECK_EVERY_S)
        except queue.Empty:
            if game_told and all(start_time(pid) != start for _, pid, start in guarded):
                return  # the game ended by other means: nothing left to guard
            continue
        if line is None:  # the owner closed the pipe or died
            deadline = time.monotonic() + GRACE_S
            while (supervisor is not None and start_time(supervisor[0]) == supervisor[1]
                   and any(start_time(pid) == start for _, pid, start in guarded) and time.monotonic() < deadline):
                time.sleep(0.1)
            for kind, pid, start in sorted(guarded, key=lambda g: g[0] != "game"):
                kill(kind, pid, start)
            return
        parts = line.split()
        if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
            continue
        if parts[0] == "supervisor":
            supervisor = (int(parts[1]), int(parts[2]))
        elif parts[0] in ("game", "group"):
            guarded.append((parts[0], int(parts[1]), int(parts[2])))
            game_told = game_told or parts[0] == "game"


def _read(lines: "queue.Queue[str | None]") -> None:
    for line in sys.stdin:
        lines.put(line)
    lines.put(None)


def main() -> None:
    if hasattr(os, "fork") and os.fork() > 0:
        os._exit(0)  # the owner waits for this parent; the guard goes on as nobody's child but init's
    if hasattr(signal, "SIGINT"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C to the terminal is the owner's to handle
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_read, args=(lines,), daemon=True).start()
    guard(lines)


if __name__ == "__main__":
    main()
