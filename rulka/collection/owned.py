"""Processes an environment owns (e.g. a game it launched), reported so that the learner can kill them.

The hook: an environment, or any layer of its wrapper chain (followed through ``.env``), may define

- ``owned_pids() -> tuple[int, ...]``: the processes it started and still runs (a game, its launch
  script); ``()`` when none runs;
- ``owned_ports() -> tuple[int, ...]``: the ports those processes hold (for messages);
- ``check_between_episodes() -> None``: called by a collector now and then while the environment waits
  between episodes (its collector waits for the learner): it finds a process of its own that died or
  stopped answering now, not at the next reset, and replaces it (a game relaunched).

Collector processes read both with ``getattr`` (rulka's core knows no environment) and publish them,
with each process's start time, in their :class:`~rulka.collection.shared.SharedStatus`. When the
learner replaces or kills a collector (watchdog, stop timeout, crash), it kills those processes
itself (the collector never got to close its environments), but only a pid whose start time is still
the one reported: a pid reused by another program is never killed. Where the learner cannot reach the
collector's machine (a lost Ray node), an environment must end its processes itself when its collector
is gone (TrackMania's games have a guard process for this: ``environments/trackmania/tmi/games/game_guard.py``).

Start times come from psutil (the ``tmi`` extra) on every platform; without it, from ``/proc`` on
Linux, and nowhere else: there a process cannot be told from a later one under the same pid, so it is
never killed (a warning says to install psutil).
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import Any, Iterable

log = logging.getLogger(__name__)

_MAX_WRAPPERS = 16

#: Set by the collection layer in a collector's own process (:func:`mark_collector_process`): the pid of
#: the process whose life gives the learner time to kill the collector's owned processes itself once
#: the collector is gone (a collector process's learner, a Ray actor's raylet). Unset in the learner's
#: own process, whose owned processes nobody else kills.
SUPERVISOR_ENV = "RULKA_COLLECTOR_SUPERVISOR"


def _hook_owner(env: Any, hook: str) -> Any:
    for _ in range(_MAX_WRAPPERS):
        if env is None:
            return None
        if callable(getattr(type(env), hook, None)) or callable(getattr(env, hook, None)):
            return env
        env = getattr(env, "env", None)
    return None


def owned_pids(env: Any) -> tuple[int, ...]:
    """``env.owned_pids()`` of the first layer of ``env``'s wrapper chain that has it, else ``()``."""
    owner = _hook_owner(env, "owned_pids")
    return tuple(int(p) for p in owner.owned_pids()) if owner is not None else ()


def owned_ports(env: Any) -> tuple[int, ...]:
    """``env.owned_ports()`` of the first layer of ``env``'s wrapper chain that has it, else ``()``."""
    owner = _hook_owner(env, "owned_ports")
    return tuple(int(p) for p in owner.owned_ports()) if owner is not None else ()


def check_between_episodes(env: Any) -> None:
    """``env.check_between_episodes()`` of the first layer of ``env``'s wrapper chain that has it, if any."""
    owner = _hook_owner(env, "check_between_episodes")
    if owner is not None:
        owner.check_between_episodes()


def mark_collector_process() -> None:
    """Called first in a collector process or actor: its parent is its supervisor (:data:`SUPERVISOR_ENV`)."""
    os.environ[SUPERVISOR_ENV] = str(os.getppid()) if hasattr(os, "getppid") else ""


def collector_supervisor() -> int | None:
    """The pid :func:`mark_collector_process` named in this process, None outside a collector."""
    value = os.environ.get(SUPERVISOR_ENV, "")
    return int(value) if value.isdigit() and int(value) > 1 else None


def _psutil() -> Any:
    """The psutil module, or None where it is not installed."""
    try:
        import psutil
    except ImportError:
        return None
    return psutil


_warned_no_identity = False


def process_start_time(pid: int) -> int | None:
    """When ``pid`` started, an integer that differs between two processes that held the same pid:
    psutil's creation time in microseconds after the epoch (every platform), else, on Linux without
    psutil, clock ticks after boot from ``/proc/PID/stat``. None when ``pid`` is gone or a zombie, and
    where neither source exists (the process cannot be identified, so it is never killed)."""
    psutil = _psutil()
    if psutil is not None:
        try:
            process = psutil.Process(pid)
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            return round(process.create_time() * 1_000_000)
        except (psutil.Error, OSError, ValueError):
            return None
    if sys.platform.startswith("linux"):
        return _proc_start_ticks(pid)
    global _warned_no_identity
    if not _warned_no_identity:
        _warned_no_identity = True
        log.warning("psutil is not installed: the processes of a failed collector (its games) cannot be told "
                    "from later processes under the same pid, so they are not killed; pip install psutil "
                    "(or 'rulka[tmi]')")
    return None


def _proc_start_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if not fields or fields[0] == "Z":
        return None
    return int(fields[19])


def identify(pids: Iterable[int]) -> list[tuple[int, int]]:
    """(pid, start time) of each pid that runs, each pid once."""
    out = []
    for pid in dict.fromkeys(pids):
        start = process_start_time(pid)
        if start is not None:
            out.append((int(pid), start))
    return out


def kill_reported(processes: Iterable[tuple[int, int]]) -> list[int]:
    """Kill (SIGKILL; TerminateProcess on Windows) each (pid, start time) whose pid still runs with that
    start time; the pids killed."""
    killed = []
    for pid, start in processes:
        if pid <= 0 or process_start_time(pid) != start:
            continue  # gone, or the pid now belongs to another process
        try:
            os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))
            killed.append(pid)
        except (OSError, ProcessLookupError):
            pass
    return killed


def kill_and_wait(processes: Iterable[tuple[int, int]], wait_s: float) -> list[int]:
    """:func:`kill_reported`, then wait up to ``wait_s`` seconds for the killed to be gone (their ports
    freed); the pids killed."""
    killed = kill_reported(processes)
    deadline = time.monotonic() + wait_s
    while any(process_start_time(pid) is not None for pid in killed) and time.monotonic() < deadline:
        time.sleep(0.02)
    return killed


class ProcessKiller:
    """:func:`kill_and_wait` on a machine of its own: a Ray actor (no CPU) started on each node where collector
    actors report processes, before any is needed, so that a failed collector's processes there are killed by a
    method call, not by a task that must first start a new worker process on that node (seconds on a busy
    machine). Its module imports no torch."""

    def pid(self) -> int:
        return os.getpid()

    def kill(self, processes: list[tuple[int, int]], wait_s: float) -> list[int]:
        return kill_and_wait(processes, wait_s)
