"""The platform branches of game supervision, run on Linux by faking the platform: the launch lock through
Windows' ``msvcrt.locking`` (a fake with the same contract), process facts and identity without psutil (Linux
reads /proc; elsewhere nothing is inspected, named clearly, and no pid is killed unverified), and with psutil
the same facts as /proc gives."""
from __future__ import annotations

import fcntl
import logging
import os
import socket
import subprocess
import sys

import pytest

from environments.trackmania.tmi.games import launch_lock, processes
from environments.trackmania.tmi.games.launch_lock import WINDOWS_LOCK_OFFSET, LaunchLock, LaunchLockTimeout
from rulka.collection import owned

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fakes other platforms on Linux")


class FakeMsvcrt:
    """``msvcrt.locking``'s contract: LK_NBLCK locks ``nbytes`` from the file position or raises OSError at
    once; LK_UNLCK unlocks. Backed by flock (per open file, so two descriptors of one process conflict), it
    also records the positions locked, to check the lock byte is not the pid's."""

    LK_UNLCK, LK_NBLCK = 0, 2

    def __init__(self) -> None:
        self.positions: list[int] = []

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        self.positions.append(os.lseek(fd, 0, os.SEEK_CUR))
        if mode == self.LK_NBLCK:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise PermissionError(13, "Permission denied") from None
        elif mode == self.LK_UNLCK:
            fcntl.flock(fd, fcntl.LOCK_UN)
        else:
            raise ValueError(mode)


def test_the_launch_lock_serialises_launches_through_msvcrt_on_windows(tmp_path, monkeypatch):
    """Windows (no fcntl): a second launch waits for the lock byte and times out naming the holder's pid;
    once released it gets it. Only the lock byte, past the pid, is ever locked."""
    fake = FakeMsvcrt()
    monkeypatch.setattr(launch_lock, "fcntl", None)
    monkeypatch.setattr(launch_lock, "msvcrt", fake)
    path = tmp_path / "launch.lock"
    first = LaunchLock(path, timeout_s=5)
    first.acquire()
    with pytest.raises(LaunchLockTimeout, match=f"another game launch \\(pid {os.getpid()}\\) held the launch lock"):
        LaunchLock(path, timeout_s=0.2, poll_s=0.05).acquire()
    first.release()
    with LaunchLock(path, timeout_s=0.2):
        assert path.read_bytes()[:32].strip() == str(os.getpid()).encode()
    assert fake.positions and set(fake.positions) == {WINDOWS_LOCK_OFFSET}


def test_without_any_file_locking_a_launch_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(launch_lock, "fcntl", None)
    monkeypatch.setattr(launch_lock, "msvcrt", None)
    with pytest.raises(RuntimeError, match="no file locking on this platform"):
        LaunchLock(tmp_path / "launch.lock").acquire()


def test_psutil_and_proc_give_the_same_process_facts(monkeypatch):
    """A child process (its parent, session, environment, command line) and a listening socket read
    through psutil and, without it, through /proc; psutil's start times tell processes apart as /proc's do."""
    pytest.importorskip("psutil")
    child = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                             env=dict(os.environ, RULKA_FACT="1"), stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "ready\n"  # exec'd: before it, /proc shows the parent's environment
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        with_psutil = (processes.process_info(child.pid), processes.process_environ(child.pid)["RULKA_FACT"],
                       processes.process_cmdline(child.pid), processes.port_listeners(port))
        assert child.pid in {p.pid for p in processes.list_processes()}
        monkeypatch.setattr(processes, "_psutil", lambda: None)
        without = (processes.process_info(child.pid), processes.process_environ(child.pid)["RULKA_FACT"],
                   processes.process_cmdline(child.pid), processes.port_listeners(port))
        assert child.pid in {p.pid for p in processes.list_processes()}
        a, b = with_psutil[0], without[0]
        assert (a.pid, a.ppid, a.session) == (b.pid, b.ppid, b.session) == (child.pid, os.getpid(), os.getsid(0))
        assert with_psutil[1:] == without[1:]
        assert with_psutil[3].pids == {os.getpid()} and with_psutil[3].listening
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
        server.close()
    assert processes.process_info(child.pid) is None


def test_without_psutil_other_platforms_inspect_nothing_and_say_so(monkeypatch):
    """No psutil and not Linux (a faked Windows): no process is seen, supervision is refused naming the fix."""
    monkeypatch.setattr(processes, "_psutil", lambda: None)
    monkeypatch.setattr(processes.sys, "platform", "win32")
    assert processes.list_processes() == [] and processes.process_info(os.getpid()) is None
    with pytest.raises(processes.ProcessFactsUnavailable, match=r"needs psutil: pip install psutil"):
        processes.require_process_facts()


def test_identity_by_creation_time_with_psutil_and_proc_and_never_unverified(monkeypatch, caplog):
    """The owned-process identity: psutil's creation time (every platform); without psutil /proc's start
    ticks on Linux; on another platform without psutil no identity, so a collector's reported process is
    never killed (a reused pid could belong to someone else), with a warning naming psutil."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        if owned._psutil() is not None:
            start = owned.process_start_time(child.pid)
            assert start is not None and owned.identify([child.pid]) == [(child.pid, start)]
        monkeypatch.setattr(owned, "_psutil", lambda: None)
        monkeypatch.setattr(processes, "_psutil", lambda: None)
        ticks = owned.process_start_time(child.pid)
        assert ticks is not None and ticks == processes.process_info(child.pid).start_ticks  # /proc's field 22
        monkeypatch.setattr(owned.sys, "platform", "win32")
        monkeypatch.setattr(owned, "_warned_no_identity", False)
        with caplog.at_level(logging.WARNING, logger=owned.__name__):
            assert owned.process_start_time(child.pid) is None and owned.identify([child.pid]) == []
        assert "pip install psutil" in caplog.text
        assert owned.kill_reported([(child.pid, ticks)]) == [] and child.poll() is None
    finally:
        child.kill()
        child.wait()
