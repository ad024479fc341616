"""``rulka tmi ...`` subcommands: ``install`` (copy the plugin) and ``check --port N``."""
from __future__ import annotations

import argparse

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
    return tmi
