"""``python -m environments.trackmania.tmi.standin PORT [--track NAME] [--trace FILE] [--plugin FILE.as]
[--detach] [HOST OPTIONS...]``: a stand-in game whose plugin listens on PORT (what ``launch.sh`` runs).

By default this process becomes the game. Environment, read when launched by any client:

- ``RULKA_STANDIN_PLUGIN``: the TMInterface 2 plugin to load (default: rulka_link.as);
- ``RULKA_STANDIN_DETACH=1``: start the game detached and return once its plugin listens (for clients
  that run the launch script, wait for it, then find the game by process name, as Linesight does);
  ``RULKA_STANDIN_LOG`` and ``RULKA_STANDIN_START_TIMEOUT_S`` go with it (see :mod:`.detach`);
- ``RULKA_STANDIN_TRACE`` (a file name; ``{port}`` is replaced by the port) and
  ``RULKA_STANDIN_OPTIONS`` (host options, shell-quoted).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys

from .launch import launch_standin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m environments.trackmania.tmi.standin",
                                     description="Start a stand-in game (TMNF + TMInterface + a plugin, "
                                                 "with the simulator's car) whose plugin listens on PORT.")
    parser.add_argument("port", type=int)
    parser.add_argument("--track", default=None, help="simulator track to load at start")
    parser.add_argument("--trace", default=os.environ.get("RULKA_STANDIN_TRACE"),
                        help="append a JSON line per state read and frame to this file ({port}: the port)")
    parser.add_argument("--plugin", default=None,
                        help="TMInterface 2 plugin (.as) to load (default: $RULKA_STANDIN_PLUGIN, else rulka_link.as)")
    parser.add_argument("--detach", action="store_true", default=None,
                        help="start the game detached and return once its plugin listens "
                             "(default: $RULKA_STANDIN_DETACH)")
    args, extra = parser.parse_known_args(argv)
    extra = shlex.split(os.environ.get("RULKA_STANDIN_OPTIONS", "")) + extra
    trace = args.trace.replace("{port}", str(args.port)) if args.trace else None
    return launch_standin(args.port, track=args.track, trace=trace, plugin=args.plugin, extra=extra,
                          detach=args.detach, prog="rulka stand-in")


if __name__ == "__main__":
    sys.exit(main())
