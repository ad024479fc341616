"""``rulka tmi ...`` subcommands: ``install`` (copy the plugin), ``check --port N`` and
``line REPLAY.Gbx OUT.npy`` (reference line from a replay)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .check import check_port
from .install import default_plugins_dir, install_plugin
from .settings import DEFAULT_BASE_PORT


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
    from .replay_to_line import replay_to_line

    replay = Path(args.replay)
    if not replay.is_file():
        print(f"rulka tmi line: error: no replay file at {replay}", file=sys.stderr)
        return 2
    try:
        line = replay_to_line(replay, args.out, distance_between_checkpoints=args.spacing)
    except (ImportError, ValueError) as error:
        print(f"rulka tmi line: error: {error}", file=sys.stderr)
        return 2
    length = float(np.linalg.norm(np.diff(line, axis=0), axis=1).sum()) if len(line) > 1 else 0.0
    print(f"wrote {args.out}: {len(line)} points every {args.spacing:g} m, {length:.1f} m of line")
    return 0


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
    return tmi
