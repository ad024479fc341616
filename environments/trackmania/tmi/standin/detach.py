"""Start a stand-in game the way clients that wait for their launch script expect (Linesight's launch).

Such a client runs ``os.system("<launch script> <port>")``, waits for it to return, then looks for the
new process named ``TmForever`` (``psutil.Process.name()``) and later kills that pid. With
``RULKA_STANDIN_DETACH=1`` (or ``--detach``) the stand-in's launch starts the game in its own session,
its output in a log file, and returns (status 0) once the plugin listens on the port, or fails
(status 1, with the log's end) if the game exits or does not listen within the start timeout. The
game process is named ``TmForever`` (its ``/proc/PID/comm``) from before it listens.

Environment (read at each launch):

- ``RULKA_STANDIN_DETACH``: ``1``/``true``/``yes``/``on`` to detach (default: off: the launch becomes
  the game, as rulka's own launcher expects);
- ``RULKA_STANDIN_LOG``: the game's log file (``{port}`` is replaced; default
  ``$TMPDIR/rulka-standin-{port}.log``), overwritten at each launch;
- ``RULKA_STANDIN_START_TIMEOUT_S``: seconds to wait for the plugin to listen (default 60; building
  the host on first use comes before and is not counted).
"""
from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

DETACH_ENV = "RULKA_STANDIN_DETACH"
LOG_ENV = "RULKA_STANDIN_LOG"
START_TIMEOUT_ENV = "RULKA_STANDIN_START_TIMEOUT_S"
DEFAULT_START_TIMEOUT_S = 60.0

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


class StandinStartError(RuntimeError):
    """A detached stand-in game exited or did not listen in time; the message ends with its log."""


def detach_requested(environ: dict[str, str] | None = None) -> bool:
    """Whether ``RULKA_STANDIN_DETACH`` asks for a detached launch.

    Raises:
        ValueError: a value that is neither true nor false.
    """
    value = (environ if environ is not None else os.environ).get(DETACH_ENV, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{DETACH_ENV}={value!r} is neither on nor off; use 1 (detach) or 0 (the launch becomes the game)")


def log_path(port: int, environ: dict[str, str] | None = None) -> Path:
    """The log file of the detached game on ``port`` (``RULKA_STANDIN_LOG`` with ``{port}`` replaced)."""
    pattern = (environ if environ is not None else os.environ).get(LOG_ENV, "")
    if pattern:
        return Path(pattern.replace("{port}", str(int(port)))).expanduser()
    return Path(tempfile.gettempdir()) / f"rulka-standin-{int(port)}.log"


def start_timeout_s(environ: dict[str, str] | None = None) -> float:
    """``RULKA_STANDIN_START_TIMEOUT_S`` (seconds, > 0), else 60.

    Raises:
        ValueError: not a positive number.
    """
    text = (environ if environ is not None else os.environ).get(START_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_START_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise ValueError(f"{START_TIMEOUT_ENV}={text!r} must be a positive number of seconds, e.g. 120")
    return value


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start_detached(command: list[str], env: dict[str, str], port: int, log: Path,
                   timeout_s: float = DEFAULT_START_TIMEOUT_S, poll_s: float = 0.02) -> int:
    """Start ``command`` (a stand-in game) in its own session, stdout and stderr into ``log``, and
    return its pid once it prints ``LISTENING <port>`` (its plugin listens on 127.0.0.1:``port``).

    Raises:
        StandinStartError: the game exited first, or ``timeout_s`` passed (the game is then killed).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        game = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    ready = f"LISTENING {int(port)}"
    deadline = time.monotonic() + timeout_s
    while True:
        text = log.read_text(errors="replace")
        if any(line.strip() == ready for line in text.splitlines()):
            return game.pid
        if game.poll() is not None:
            raise StandinStartError(f"the stand-in game exited (status {game.returncode}) before its plugin "
                                    f"listened on port {port}; the end of {log}:\n{_tail(log)}")
        if time.monotonic() > deadline:
            game.kill()
            game.wait()
            raise StandinStartError(f"the stand-in game's plugin did not listen on port {port} within {timeout_s:g} s "
                                    f"(killed; {START_TIMEOUT_ENV} sets the limit); the end of {log}:\n{_tail(log)}")
        time.sleep(poll_s)
