"""One game launch at a time on this machine (for this user): a lock on a lock file.

Several collectors start their game instances at the same moment; a launch holds the lock from
spawning the launch script until the game's plugin serves its port (or the launch fails or times
out), so Wine prefixes, TMLoader and the window focus of one start never race another's. The
kernel drops the lock when its holder dies, so a crashed collector never leaves it held.

Linux and macOS lock the whole file with ``fcntl.flock``; Windows locks one byte of it (at
``WINDOWS_LOCK_OFFSET``, past the holder's pid written at its start) with ``msvcrt.locking``, which
Windows likewise drops when the holder's handle closes or the holder dies.
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from types import TracebackType

try:
    import fcntl
except ImportError:  # Windows: msvcrt below
    fcntl = None  # type: ignore[assignment]
try:
    import msvcrt
except ImportError:  # POSIX: fcntl above
    msvcrt = None  # type: ignore[assignment]

#: Seconds a launch waits for the lock by default: other instances' launches, each bounded by the
#: start deadline (600 s), may be ahead of it.
DEFAULT_LOCK_TIMEOUT_S = 3600.0
#: Where the Windows lock byte lies in the lock file (past the pid written at its start, which a waiter reads).
WINDOWS_LOCK_OFFSET = 1024
#: Bytes of the holder's pid at the start of the file (space-padded).
_PID_BYTES = 32


def default_lock_path() -> Path:
    """``$XDG_RUNTIME_DIR/rulka-tmi-launch.lock``, else ``<temp dir>/rulka-tmi-launch-<uid>.lock``
    (``<temp dir>/rulka-tmi-launch-<user name>.lock`` on Windows, which has no uid)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        return Path(runtime) / "rulka-tmi-launch.lock"
    user = str(os.getuid()) if hasattr(os, "getuid") else (os.environ.get("USERNAME") or "0")
    return Path(tempfile.gettempdir()) / f"rulka-tmi-launch-{user}.lock"


class LaunchLockTimeout(TimeoutError):
    """Another launch held the lock for longer than allowed; the message names the file and holder."""


class LaunchLock:
    """``with LaunchLock(): ...`` runs the body while no other launch of this user runs.

    Args:
        path: the lock file (created if missing); default :func:`default_lock_path`.
        timeout_s: how long to wait for the lock before :class:`LaunchLockTimeout`.
        poll_s: how often to retry while another launch holds it.
    """

    def __init__(self, path: str | Path | None = None, timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
                 poll_s: float = 0.05) -> None:
        self.path = Path(path) if path is not None else default_lock_path()
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self._fd: int | None = None

    def acquire(self) -> None:
        """Wait for the lock; write our pid into the file (for the error message of a waiter).

        Raises:
            LaunchLockTimeout: another launch held it for ``timeout_s``.
            RuntimeError: this platform has neither ``fcntl`` nor ``msvcrt``.
        """
        if fcntl is None and msvcrt is None:
            raise RuntimeError("no file locking on this platform (neither fcntl nor msvcrt): game launches "
                               "cannot be serialised")
        # os.open gives a non-inheritable descriptor: the launched game never holds the lock.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)
        deadline = time.monotonic() + self.timeout_s
        while not _try_lock(fd):
            if time.monotonic() >= deadline:
                os.lseek(fd, 0, os.SEEK_SET)
                holder = os.read(fd, _PID_BYTES).decode("ascii", "replace").strip("\0 \r\n") or "unknown"
                os.close(fd)
                raise LaunchLockTimeout(
                    f"another game launch (pid {holder}) held the launch lock {self.path} for more than "
                    f"{self.timeout_s:.0f} s; if that process hangs, kill it (the lock is released "
                    "when its holder dies)"
                ) from None
            time.sleep(self.poll_s)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, str(os.getpid()).encode("ascii").ljust(_PID_BYTES))
        self._fd = fd

    def release(self) -> None:
        """Release the lock (no error if not held)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            _unlock(fd)
        finally:
            os.close(fd)

    def __enter__(self) -> "LaunchLock":
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def _try_lock(fd: int) -> bool:
    """Take the lock on ``fd`` if free; False when another launch holds it."""
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
    os.lseek(fd, WINDOWS_LOCK_OFFSET, os.SEEK_SET)
    try:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[union-attr]
        return True
    except OSError:  # held by another launch
        return False


def _unlock(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return
    os.lseek(fd, WINDOWS_LOCK_OFFSET, os.SEEK_SET)
    msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[union-attr]


__all__ = ["DEFAULT_LOCK_TIMEOUT_S", "WINDOWS_LOCK_OFFSET", "LaunchLock", "LaunchLockTimeout", "default_lock_path"]
