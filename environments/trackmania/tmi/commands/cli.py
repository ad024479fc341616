"""``rulka tmi ...`` subcommands: ``install`` (copy the plugin), ``check --port N``,
``line REPLAY.Gbx OUT.npy`` (reference line from a replay) and ``standin --port N [--plugin PATH] [--detach]``
(a stand-in game, with rulka's plugin or another)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .check import check_port
from .install import default_plugins_dir, install_plugin
from ..games.settings import DEFAULT_BASE_PORT


def _install(args: argparse.Namespace) -> int:
    target = install_plugin(args.plugins_dir)
    print(f"installed {target}")
    print("restart the game (or type reload_plugins in the TMInterface console) to load it")
    return 0


def _check(args: argparse.Namespace) -> int:
    report = check_port(args.port, timeout_s=args.timeout)
    print(report)
    return 0 if report.ok else 1


def _line(args: argparse.Namespace) -> int:
    import warnings

    from ..maps.replay_to_line import read_ghost, resample_polyline

    replay = Path(args.replay)
    if not replay.is_file():
        print(f"rulka tmi line: error: no replay file at {replay}", file=sys.stderr)
        return 2
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ghost = read_ghost(replay)
        line = resample_polyline(ghost.positions, args.spacing)
    except (ImportError, ValueError) as error:
        print(f"rulka tmi line: error: {error}", file=sys.stderr)
        return 2
    for warning in caught:
        print(f"rulka tmi line: warning: {warning.message}", file=sys.stderr)
    np.save(Path(args.out), line)
    length = float(np.linalg.norm(np.diff(line, axis=0), axis=1).sum()) if len(line) > 1 else 0.0
    print(f"ghost: {len(ghost.positions)} samples every {ghost.sample_period_ms} ms, {ghost.respawns} respawn(s)")
    print(f"wrote {args.out}: {len(line)} points every {args.spacing:g} m, {length:.1f} m of line")
    return 0


def _standin(args: argparse.Namespace) -> int:
    from ..standin.launch import launch_standin
    from ..standin.tracks import write_track_files

    if args.write_line:
        for path in write_track_files(args.write_line, args.out):
            print(f"wrote {path}")
        return 0
    extra = list(args.host_options)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    return launch_standin(args.port, track=args.track, trace=args.trace, plugin=args.plugin, extra=extra,
                          detach=args.detach or None, prog="rulka tmi standin",
                          banner=f"stand-in game on port {args.port} (Ctrl-C stops it); "
                                 f"try: rulka tmi check --port {args.port}")


def register_commands(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``tmi`` with ``install`` and ``check`` to the main CLI; each sets ``func(args) -> int``."""
    tmi = subparsers.add_parser("tmi", help="the real game through TMInterface 2")
    sub = tmi.add_subparsers(dest="tmi_command", required=True)
    install = sub.add_parser("install", help="copy the rulka_link plugin into TMInterface's Plugins folder")
    install.add_argument(
        "--plugins-dir", default=None, help=f"target folder (default: {default_plugins_dir()})"
    )
    install.set_defaults(func=_install)
    check = sub.add_parser("check", help="diagnose the link to one game instance")
    check.add_argument("--port", type=int, default=DEFAULT_BASE_PORT, help="the instance's custom_port")
    check.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the handshake")
    check.set_defaults(func=_check)
    line = sub.add_parser("line", help="reference line (.npy) from a replay's fastest ghost (needs pygbx)")
    line.add_argument("replay", help="the .Replay.Gbx file")
    line.add_argument("out", help="the .npy file to write: (N, 3) positions, m")
    line.add_argument("--spacing", type=float, default=0.5,
                      help="metres between points (environment.distance_between_checkpoints; default 0.5)")
    line.set_defaults(func=_line)
    standin = sub.add_parser(
        "standin", help="start a stand-in game (our plugin in the AngelScript host, the simulator's car) on a port",
        description="A game as rulka sees TMNF + TMInterface 2 + rulka_link, without the game: the real plugin "
                    "in the AngelScript host, with the built-in simulator's car, tracks and frames. Host options "
                    "(e.g. -- --lose-input-every 7, see tmi_test_host.cpp) follow the command's own.")
    standin.add_argument("--port", type=int, default=DEFAULT_BASE_PORT, help="the plugin's custom_port")
    standin.add_argument("--track", default=None,
                         help="simulator track to load at start (built-in name, procedural:SEED or a line .npy)")
    standin.add_argument("--trace", default=None, help="append a JSON line per state read and frame to this file")
    standin.add_argument("--write-line", default=None, metavar="TRACK",
                         help="instead of starting a game: write TRACK's reference line and checkpoints "
                              "(map-cycle files for the tmi backend) into --out")
    standin.add_argument("--out", default=".", help="folder for --write-line")
    standin.add_argument("--plugin", default=None, metavar="PATH",
                         help="the TMInterface 2 plugin (.as) the game loads, e.g. Linesight's Python_Link.as "
                              "(default: $RULKA_STANDIN_PLUGIN, else rulka_link.as)")
    standin.add_argument("--detach", action="store_true",
                         help="start the game detached (process name TmForever) and return once its plugin "
                              "listens (default: $RULKA_STANDIN_DETACH)")
    standin.add_argument("host_options", nargs=argparse.REMAINDER, help="more options of the host")
    standin.set_defaults(func=_standin)
    return tmi
