"""Linux process facts read from ``/proc``: names, parents, environments, and who listens on a port.

The launcher uses these to find the game *this* launch started (an environment marker that Wine
passes on, or the launch script's process tree) and to tell a game of ours that still holds a port
from a stranger's program. Only this user's processes can be inspected; another user's process shows
as "a listener whose owner is not visible".
"""
from __future__ import annotations

import os
from dataclasses import dataclass

#: ``/proc/net/tcp`` state of a listening socket.
_TCP_LISTEN = "0A"


@dataclass(frozen=True)
class ProcInfo:
    """One process as ``/proc/PID/stat`` shows it (zombies are left out)."""

    pid: int
    name: str  # /proc/PID/comm: at most 15 characters (Wine sets it to the .exe name)
    ppid: int
    session: int
    start_ticks: int  # start time after boot, clock ticks (orders processes by age)


def list_processes() -> list[ProcInfo]:
    """Every live process of the machine (that ``/proc`` lists)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = process_info(int(entry))
            if info is not None:
                out.append(info)
    return out


def process_info(pid: int) -> ProcInfo | None:
    """``/proc/PID/stat`` of ``pid``, or None when it is gone or a zombie."""
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


def process_environ(pid: int) -> dict[str, str] | None:
    """The environment ``pid`` was started with, or None if it cannot be read (gone, another user)."""
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
    """Whether something listens on ``port`` and the visible pids that hold its listening socket."""
    inodes = listening_socket_inodes(port)
    return PortListeners(port, bool(inodes), frozenset(pids_of_socket_inodes(inodes)))


__all__ = [
    "PortListeners",
    "ProcInfo",
    "descendants",
    "list_processes",
    "listening_socket_inodes",
    "pids_of_socket_inodes",
    "port_listeners",
    "process_cmdline",
    "process_environ",
    "process_info",
]
