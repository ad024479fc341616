"""Launch one stand-in game on a port: this process becomes the game (rulka's launcher follows its pid),
or, detached (:mod:`.detach`), the game runs on and this returns once its plugin listens."""
from __future__ import annotations

import os
import sys

from .build import StandinBuildError, standin_command, standin_environment
from .detach import StandinStartError, detach_requested, log_path, start_detached, start_timeout_s


def launch_standin(port: int, *, track: str | None = None, trace: str | None = None, plugin: str | None = None,
                   extra: list[str] | None = None, detach: bool | None = None, prog: str = "rulka stand-in",
                   banner: str | None = None) -> int:
    """Start a stand-in game whose plugin listens on ``port``; returns an exit status (0: started).

    Args:
        port, track, trace, extra: see :func:`~.build.standin_command`.
        plugin: the plugin file (default ``$RULKA_STANDIN_PLUGIN``, else rulka_link.as).
        detach: start the game detached and return once it listens (default ``$RULKA_STANDIN_DETACH``);
            otherwise this process is replaced by the game (``os.execve``, same pid) and never returns.
        prog: the name in error messages.
        banner: a line printed before the game starts (not detached).
    """
    try:
        if detach is None:
            detach = detach_requested()
        timeout_s = start_timeout_s() if detach else 0.0
        command = standin_command(port, track=track, trace=trace, plugin=plugin, extra=extra or [])
    except (StandinBuildError, ValueError) as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    if detach:
        log = log_path(port)
        try:
            pid = start_detached(command, standin_environment(), port, log, timeout_s)
        except StandinStartError as error:
            print(f"{prog}: {error}", file=sys.stderr)
            return 1
        print(f"stand-in game {pid} (TmForever) listening on 127.0.0.1:{port}; log: {log}", flush=True)
        return 0
    if banner:
        print(banner, flush=True)
    sys.stdout.flush()
    os.execve(command[0], command, standin_environment())  # same pid: the launcher follows the game
    return 0  # not reached
