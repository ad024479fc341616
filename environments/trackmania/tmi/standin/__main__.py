"""``python -m environments.trackmania.tmi.standin PORT [--track NAME] [--trace FILE] [HOST OPTIONS...]``:
replace this process with a stand-in game whose plugin listens on PORT (what ``launch.sh`` runs).

``RULKA_STANDIN_TRACE`` (a file name; ``{port}`` is replaced by the port) and
``RULKA_STANDIN_OPTIONS`` (host options, shell-quoted) apply when launched by rulka's launcher.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys

from .build import StandinBuildError, standin_command, standin_environment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m environments.trackmania.tmi.standin",
                                     description="Start a stand-in game (TMNF + TMInterface + rulka_link, "
                                                 "with the simulator's car) whose plugin listens on PORT.")
    parser.add_argument("port", type=int)
    parser.add_argument("--track", default=None, help="simulator track to load at start")
    parser.add_argument("--trace", default=os.environ.get("RULKA_STANDIN_TRACE"),
                        help="append a JSON line per state read and frame to this file ({port}: the port)")
    args, extra = parser.parse_known_args(argv)
    extra = shlex.split(os.environ.get("RULKA_STANDIN_OPTIONS", "")) + extra
    trace = args.trace.replace("{port}", str(args.port)) if args.trace else None
    try:
        command = standin_command(args.port, track=args.track, trace=trace, extra=extra)
    except (StandinBuildError, ValueError) as error:
        print(f"rulka stand-in: {error}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    os.execve(command[0], command, standin_environment())  # same pid: the launcher follows the game
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
