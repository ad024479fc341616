"""Process facts: names, parents, environments, start times, and who listens on a port.

The launcher uses these to find the game *this* launch started (an environment marker that Wine
passes on, or the launch script's process tree) and to tell a game of ours that still holds a port
from a stranger's program. Only this user's processes can be inspected; another user's process shows
as "a listener whose owner is not visible".

psutil (the ``tmi`` extra) answers on every platform (Linux, Windows, macOS); without it, Linux reads
``/proc`` and other platforms see no process (:func:`require_process_facts` says what to install).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

#: ``/proc/net/tcp`` state of a listening socket.
_TCP_LISTEN = "0A"


class ProcessFactsUnavailable(RuntimeError):
    """Neither psutil nor ``/proc``: processes cannot be inspected (the message says what to install)."""


def _psutil() -> Any:
    """The psutil module, or None where it is not installed (tests set this to None to fake its absence)."""
    try:
        import psutil
    except ImportError:
        return None
    return psutil


def _use_proc() -> bool:
    return _psutil() is None and sys.platform.startswith("linux")


def require_process_facts() -> None:
    """Raise :class:`ProcessFactsUnavailable` where processes cannot be inspected (no psutil, not Linux):
    supervising games there (finding the game a launch started, freeing a port of our own game) needs psutil."""
    if _psutil() is None and not sys.platform.startswith("linux"):
        raise ProcessFactsUnavailable(
            f"supervising TrackMania games on {sys.platform} needs psutil: pip install psutil (or 'rulka[tmi]')")


@dataclass(frozen=True)
class ProcInfo:
    """One process (zombies are left out)."""

    pid: int
    name: str  # the executable's name (Wine sets it to the .exe name); /proc/PID/comm without psutil
    ppid: int
    session: int  # session id (POSIX); 0 on Windows
    start_ticks: int  # when it started: psutil's creation time in microseconds, else /proc clock ticks after boot (orders by age)


def list_processes() -> list[ProcInfo]:
    """Every live process of the machine that this user can see."""
    psutil = _psutil()
    if psutil is not None:
        out = []
        for process in psutil.process_iter(["name", "ppid", "create_time", "status"]):
            facts = process.info
            if facts["status"] == psutil.STATUS_ZOMBIE or facts["create_time"] is None or facts["ppid"] is None:
                continue  # a zombie, or gone while listed
            out.append(ProcInfo(process.pid, facts["name"] or "", facts["ppid"], _session(process.pid),
                                round(facts["create_time"] * 1_000_000)))
        return out
    if not _use_proc():
        return []
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = process_info(int(entry))
            if info is not None:
                out.append(info)
    return out


def process_info(pid: int) -> ProcInfo | None:
    """``pid``'s facts, or None when it is gone or a zombie."""
    psutil = _psutil()
    if psutil is not None:
        try:
            process = psutil.Process(pid)
            with process.oneshot():
                if process.status() == psutil.STATUS_ZOMBIE:
                    return None
                return ProcInfo(pid, process.name(), process.ppid(), _session(pid),
                                round(process.create_time() * 1_000_000))
        except (psutil.Error, OSError, ValueError):
            return None
    if not _use_proc():
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    if not fields or fields[0] == "Z":
        return None
    return ProcInfo(pid, name, int(fields[1]), int(fields[3]), int(fields[19]))


def _session(pid: int) -> int:
    getsid = getattr(os, "getsid", None)
    if getsid is None:
        return 0
    try:
        return int(getsid(pid))
    except OSError:
        return 0


def process_environ(pid: int) -> dict[str, str] | None:
    """The environment ``pid`` was started with, or None if it cannot be read (gone, another user)."""
    psutil = _psutil()
    if psutil is not None:
        try:
            return dict(psutil.Process(pid).environ())
        except (psutil.Error, OSError, ValueError):
            return None
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def process_cmdline(pid: int) -> str:
    """The command line of ``pid`` as one string ("" if unreadable)."""
    psutil = _psutil()
    if psutil is not None:
        try:
            return " ".join(psutil.Process(pid).cmdline()).strip()
        except (psutil.Error, OSError, ValueError):
            return ""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def descendants(root: int, processes: list[ProcInfo]) -> set[int]:
    """Pids of every process below ``root`` in the parent tree (``root`` itself excluded)."""
    children: dict[int, list[int]] = {}
    for p in processes:
        children.setdefault(p.ppid, []).append(p.pid)
    out: set[int] = set()
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo.extend(children.get(pid, ()))
    return out


def listening_socket_inodes(port: int) -> set[int]:
    """Inodes of the TCP sockets (IPv4 and IPv6) listening on ``port`` on any local address."""
    inodes: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _TCP_LISTEN:
                continue
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(int(fields[9]))
    return inodes


def pids_of_socket_inodes(inodes: set[int]) -> set[int]:
    """Pids (of this user's visible processes) that hold an open descriptor on one of ``inodes``."""
    if not inodes:
        return set()
    wanted = {f"socket:[{inode}]" for inode in inodes}
    pids: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue  # gone, or another user's
        for fd in fds:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}") in wanted:
                    pids.add(int(entry))
                    break
            except OSError:
                continue
    return pids


@dataclass(frozen=True)
class PortListeners:
    """Who listens on a TCP port: ``listening`` is True even when no owner is visible."""

    port: int
    listening: bool
    pids: frozenset[int]


def port_listeners(port: int) -> PortListeners:
    """Whether something listens on ``port`` (TCP, IPv4 or IPv6, any local address) and the visible pids
    that hold its listening socket."""
    psutil = _psutil()
    if psutil is not None:
        try:
            connections = psutil.net_connections(kind="tcp")
        except (psutil.Error, OSError):  # macOS without root: each of this user's processes instead
            connections = None
        if connections is not None:
            listening = [c for c in connections if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port]
            return PortListeners(port, bool(listening), frozenset(c.pid for c in listening if c.pid))
        pids = set()
        for process in psutil.process_iter():
            try:
                if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in process.net_connections("tcp")):
                    pids.add(process.pid)
            except (psutil.Error, OSError):
                continue
        return PortListeners(port, bool(pids), frozenset(pids))
    inodes = listening_socket_inodes(port)
    return PortListeners(port, bool(inodes), frozenset(pids_of_socket_inodes(inodes)))


__all__ = [
    "PortListeners",
    "ProcInfo",
    "ProcessFactsUnavailable",
    "descendants",
    "list_processes",
    "listening_socket_inodes",
    "pids_of_socket_inodes",
    "port_listeners",
    "process_cmdline",
    "process_environ",
    "process_info",
    "require_process_facts",
]
