"""Build the AngelScript host once per source version and give the stand-in game's command line."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TMI_DIR = Path(__file__).resolve().parents[1]
HOST_DIR = TMI_DIR / "test_host"
PLUGIN = TMI_DIR / "plugin" / "rulka_link.as"
LAUNCH_SCRIPT = Path(__file__).resolve().parent / "launch.sh"
REPO_ROOT = TMI_DIR.parents[2]

#: The stand-in's defaults: a game that runs for ever, shows its menus after 0.5 s, loads a map in
#: 0.3 s and counts down 1.5 s of race time (ticks run as fast as the CPU allows), named like TMNF's
#: process so that the launcher finds it.
DEFAULT_HOST_OPTIONS = ("--max-seconds", "1e9", "--startup-ms", "500", "--map-load-ms", "300",
                        "--countdown-ms", "1500", "--process-name", "TmForever", "--physics-batch-ms", "50")


class StandinBuildError(RuntimeError):
    """The host could not be built; the message says what to install."""


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rulka" / "tmi_test_host"


def host_binary() -> Path:
    """The compiled host (built with ``make`` on first use, cached per source version).

    Raises:
        StandinBuildError: g++, make or the AngelScript headers are missing, or the build failed.
    """
    source = HOST_DIR / "tmi_test_host.cpp"
    digest = hashlib.sha256(source.read_bytes() + (HOST_DIR / "Makefile").read_bytes()).hexdigest()[:16]
    binary = _cache_dir() / digest / "tmi_test_host"
    if binary.exists():
        return binary
    missing = [tool for tool in ("g++", "make") if shutil.which(tool) is None]
    if missing or not (Path("/usr/include/angelscript.h").exists() or os.environ.get("ANGELSCRIPT_INCLUDE")):
        raise StandinBuildError(
            f"cannot build the stand-in game: {', '.join(missing) or 'the AngelScript headers'} missing; "
            "install them with: apt-get install -y angelscript-dev g++ make")
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=binary.parent) as tmp:
        out = Path(tmp) / "tmi_test_host"
        proc = subprocess.run(["make", "-s", "-C", str(HOST_DIR), f"OUT={out}"], capture_output=True, text=True,
                              timeout=300)
        if proc.returncode != 0:
            raise StandinBuildError(f"building the stand-in game failed:\n{proc.stdout}\n{proc.stderr}")
        out.replace(binary)  # atomic: two stand-ins starting at once both get a whole binary
    return binary


def standin_command(port: int, *, track: str | None = None, trace: str | None = None,
                    python: str | None = None, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The stand-in game's command line: the plugin listens on ``port`` once the game has started.

    Args:
        port: the plugin's ``custom_port``.
        track: a simulator track to load at start (``map NAME``); rulka loads its own maps anyway.
        trace: a file that gets a JSON line per state read and frame (tests).
        python: the interpreter of the physics process (default: this one).
        extra: more host options, e.g. ``--lose-input-every 7`` (see ``tmi_test_host.cpp``); later
            options override the defaults.
    """
    if not 1 <= int(port) <= 65535:
        raise ValueError(f"port must be in 1..65535, got {port}")
    command = [str(host_binary()), "--plugin", str(PLUGIN), "--config", f"set custom_port {int(port)}",
               "--physics", python or sys.executable, *DEFAULT_HOST_OPTIONS]
    if track:
        command += ["--start-map", track]
    if trace:
        command += ["--physics-trace", str(trace)]
    return command + list(extra)


def standin_environment() -> dict[str, str]:
    """This process's environment with the repository on PYTHONPATH (the physics process imports it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env
