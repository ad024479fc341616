"""Processes an environment owns (e.g. a game it launched), reported so that the learner can kill them.

The hook: an environment, or any layer of its wrapper chain (followed through ``.env``), may define

- ``owned_pids() -> tuple[int, ...]``: the processes it started and still runs (a game, its launch
  script); ``()`` when none runs;
- ``owned_ports() -> tuple[int, ...]``: the ports those processes hold (for messages).

Collector processes read both with ``getattr`` (rulka's core knows no environment) and publish them,
with each process's start time, in their :class:`~rulka.collection.shared.SharedStatus`. When the
learner replaces or kills a collector (watchdog, stop timeout, crash), it kills those processes
itself (the collector never got to close its environments), but only a pid whose start time is still
the one reported: a pid reused by another program is never killed.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any, Iterable

_MAX_WRAPPERS = 16


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


def process_start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks after boot, ``/proc/PID/stat``); None when it is gone or a
    zombie; 0 where ``/proc`` does not exist (identity cannot be checked there)."""
    if not os.path.isdir("/proc"):
        return 0 if _alive_no_proc(pid) else None
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if not fields or fields[0] == "Z":
        return None
    return int(fields[19])


def _alive_no_proc(pid: int) -> bool:
    if sys.platform.startswith("win"):
        return True  # cannot tell cheaply; a kill of a gone pid is harmless
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def identify(pids: Iterable[int]) -> list[tuple[int, int]]:
    """(pid, start time) of each pid that runs, each pid once."""
    out = []
    for pid in dict.fromkeys(pids):
        start = process_start_time(pid)
        if start is not None:
            out.append((int(pid), start))
    return out


def kill_reported(processes: Iterable[tuple[int, int]]) -> list[int]:
    """SIGKILL each (pid, start time) whose pid still runs with that start time; the pids killed."""
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
