"""One game launch at a time on this machine (for this user): an ``fcntl.flock`` on a lock file.

Several collectors start their game instances at the same moment; a launch holds the lock from
spawning the launch script until the game's plugin serves its port (or the launch fails or times
out), so Wine prefixes, TMLoader and the window focus of one start never race another's. The
kernel drops the lock when its holder dies, so a crashed collector never leaves it held.
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from types import TracebackType

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: launches there are not serialised
    fcntl = None  # type: ignore[assignment]

#: Seconds a launch waits for the lock by default: other instances' launches, each bounded by the
#: start deadline (600 s), may be ahead of it.
DEFAULT_LOCK_TIMEOUT_S = 3600.0


def default_lock_path() -> Path:
    """``$XDG_RUNTIME_DIR/rulka-tmi-launch.lock``, else ``<temp dir>/rulka-tmi-launch-<uid>.lock``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        return Path(runtime) / "rulka-tmi-launch.lock"
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"rulka-tmi-launch-{uid}.lock"


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
        """Wait for the lock; write our pid into the file (for the error message of a waiter)."""
        if fcntl is None:
            return
        # os.open gives a non-inheritable descriptor: the launched game never holds the lock.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                    os.close(fd)
                    raise LaunchLockTimeout(
                        f"another game launch (pid {holder}) held the launch lock {self.path} for more than "
                        f"{self.timeout_s:.0f} s; if that process hangs, kill it (the lock is released "
                        "when its holder dies)"
                    ) from None
                time.sleep(self.poll_s)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
        self._fd = fd

    def release(self) -> None:
        """Release the lock (no error if not held)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)  # type: ignore[union-attr]
        finally:
            os.close(fd)

    def __enter__(self) -> "LaunchLock":
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


__all__ = ["DEFAULT_LOCK_TIMEOUT_S", "LaunchLock", "LaunchLockTimeout", "default_lock_path"]
