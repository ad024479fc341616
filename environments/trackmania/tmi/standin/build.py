"""Build the AngelScript host once per source version and give the stand-in game's command line."""
from __future__ import annotations

import functools
import hashlib
import json
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
#: Environment variable naming the plugin stand-in games load (default: rulka_link.as).
PLUGIN_ENV = "RULKA_STANDIN_PLUGIN"

#: The stand-in's defaults: a game that runs for ever, shows its menus after 0.5 s, loads a map in
#: 0.3 s and counts down 1.5 s of race time (ticks run as fast as the CPU allows), named like TMNF's
#: process so that the launcher finds it.
DEFAULT_HOST_OPTIONS = ("--max-seconds", "1e9", "--startup-ms", "500", "--map-load-ms", "300",
                        "--countdown-ms", "1500", "--process-name", "TmForever", "--physics-batch-ms", "50")


class StandinBuildError(RuntimeError):
    """The host could not be built; the message says what to install."""


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rulka" / "tmi_test_host"


_EMBED_QUERY = (
    "import json, os, sysconfig as c; v = c.get_config_var; inc = c.get_paths()['include']; "
    "ok = bool(v('Py_ENABLE_SHARED')) and os.path.exists(os.path.join(inc, 'Python.h')) "
    "and os.path.exists(os.path.join(v('LIBDIR') or '', v('LDLIBRARY') or '')); "
    "print(json.dumps({'PY_INCLUDE': inc, 'PY_LIBDIR': v('LIBDIR'), 'PY_LIB': 'python' + (v('LDVERSION') or '')} "
    "if ok else None))"
)


def embed_variables(python: str) -> tuple[tuple[str, str], ...]:
    """The Makefile variables that embed ``python`` in the host (its headers and shared libpython), or
    () when it cannot be embedded (a Python built without a shared libpython, or without headers): the
    physics then runs in a child process (``--physics-transport pipe``), as it does with
    ``RULKA_STANDIN_PHYSICS=pipe`` in the environment."""
    if os.environ.get("RULKA_STANDIN_PHYSICS", "").strip().lower() == "pipe":
        return ()
    return _embeddable(python)


@functools.lru_cache(maxsize=None)
def _embeddable(python: str) -> tuple[tuple[str, str], ...]:
    proc = subprocess.run([python, "-c", _EMBED_QUERY], capture_output=True, text=True, timeout=60)
    found = json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else None
    return (("PYTHON_EMBED", "1"), *sorted(found.items())) if found else ()


def host_binary(python: str | None = None) -> Path:
    """The compiled host (built with ``make`` on first use, cached per source version and Python),
    with the physics of ``python`` (default: this interpreter) embedded when it can be.

    Raises:
        StandinBuildError: g++, make or the AngelScript headers are missing, or the build failed.
    """
    source = HOST_DIR / "tmi_test_host.cpp"
    embed = embed_variables(python or sys.executable)
    key = source.read_bytes() + (HOST_DIR / "Makefile").read_bytes() + repr(embed).encode()
    digest = hashlib.sha256(key).hexdigest()[:16]
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
        proc = subprocess.run(["make", "-s", "-C", str(HOST_DIR), f"OUT={out}", *(f"{k}={v}" for k, v in embed)],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            hint = ("\nThe host embeds this Python (its headers and shared libpython); RULKA_STANDIN_PHYSICS=pipe "
                    "builds it without, with the physics in a child process." if embed else "")
            raise StandinBuildError(f"building the stand-in game failed:\n{proc.stdout}\n{proc.stderr}{hint}")
        out.replace(binary)  # atomic: two stand-ins starting at once both get a whole binary
    return binary


def plugin_path(plugin: str | os.PathLike | None = None) -> Path:
    """The plugin a stand-in game loads: ``plugin``, else ``$RULKA_STANDIN_PLUGIN``, else rulka_link.as.

    Raises:
        ValueError: the named file does not exist.
    """
    chosen = plugin if plugin not in (None, "") else os.environ.get(PLUGIN_ENV, "")
    if chosen in (None, ""):
        return PLUGIN
    path = Path(chosen).expanduser().resolve()
    if not path.is_file():
        raise ValueError(f"no plugin file at {path} (from {'--plugin' if plugin else PLUGIN_ENV}); "
                         "name a TMInterface 2 AngelScript plugin (.as), e.g. "
                         "../shared/peers/linesight/Python_Link.as, or leave it unset for rulka_link.as")
    return path


def standin_command(port: int, *, track: str | None = None, trace: str | None = None,
                    python: str | None = None, extra: list[str] | tuple[str, ...] = (),
                    plugin: str | os.PathLike | None = None) -> list[str]:
    """The stand-in game's command line: the plugin listens on ``port`` once the game has started.

    Args:
        port: the plugin's ``custom_port`` (the game runs ``set custom_port PORT`` at start, as
            TMLoader's ``/configstring`` does; a plugin that reads another variable gets no port).
        track: a simulator track to load at start (``map NAME``); rulka loads its own maps anyway.
        trace: a file that gets a JSON line per state read and frame (tests).
        python: the interpreter of the physics (default: this one), embedded in the host when it can be
            (see :func:`embed_variables`), else run as its child process.
        extra: more host options, e.g. ``--lose-input-every 7`` (see ``tmi_test_host.cpp``); later
            options override the defaults.
        plugin: the TMInterface 2 plugin (``.as``) the game loads (see :func:`plugin_path`; default:
            ``$RULKA_STANDIN_PLUGIN``, else rulka's ``rulka_link.as``).

    Raises:
        ValueError: a port outside 1..65535 or a plugin file that does not exist.
        StandinBuildError: the host cannot be built here.
    """
    if not 1 <= int(port) <= 65535:
        raise ValueError(f"port must be in 1..65535, got {port}")
    python = python or sys.executable
    transport = "embedded" if embed_variables(python) else "pipe"
    chosen_plugin = plugin_path(plugin)
    command = [str(host_binary(python)), "--plugin", str(chosen_plugin), "--config", f"set custom_port {int(port)}",
               "--physics", python, "--physics-transport", transport, *DEFAULT_HOST_OPTIONS]
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
