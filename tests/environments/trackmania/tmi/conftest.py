"""Fixtures for the real-game link tests: fake game launchers, manager settings, the plugin host."""
from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from environments.trackmania.tmi.games.game_instance_manager import ManagerConfig

from .fake_game_server import FakeGameServer

TMI_DIR = Path(__file__).resolve().parents[4] / "environments" / "trackmania" / "tmi"
PLUGIN = TMI_DIR / "plugin" / "rulka_link.as"
HOST_DIR = TMI_DIR / "test_host"


class FakeLauncher:
    """``launcher(port)`` that starts a :class:`FakeGameServer`; the i-th launch uses ``per_launch[i]``
    kwargs (faults usually only on the first), later launches use ``default``."""

    def __init__(self, per_launch: list[dict] | None = None, **default: object) -> None:
        self.per_launch = list(per_launch or [])
        self.default = default
        self.servers: list[FakeGameServer] = []

    def __call__(self, port: int) -> FakeGameServer:
        kwargs = dict(self.default)
        if len(self.servers) < len(self.per_launch):
            kwargs.update(self.per_launch[len(self.servers)])
        server = FakeGameServer(**kwargs)  # type: ignore[arg-type]
        self.servers.append(server)
        return server

    def stop_all(self) -> None:
        for s in self.servers:
            s.terminate()


@pytest.fixture
def fake_launcher():
    """Factory of :class:`FakeLauncher`; every server it started is stopped after the test."""
    made: list[FakeLauncher] = []

    def make(per_launch: list[dict] | None = None, **default: object) -> FakeLauncher:
        launcher = FakeLauncher(per_launch, **default)
        made.append(launcher)
        return launcher

    yield make
    for launcher in made:
        launcher.stop_all()


@pytest.fixture
def fast_config() -> ManagerConfig:
    """Short timeouts so that failures are detected in about a second."""
    return ManagerConfig(
        start_timeout_s=5.0,
        connect_timeout_s=3.0,
        reconnect_timeout_s=0.5,
        timeout_during_run_ms=1000,
        timeout_between_runs_ms=5000,
    )


# ---------------------------------------------------------------------- AngelScript test host
def _host_binary() -> Path | None:
    """Build (once per source version) the C++ test host; None if the toolchain is missing."""
    if shutil.which("g++") is None or not Path("/usr/include/angelscript.h").exists() and not os.environ.get(
        "ANGELSCRIPT_INCLUDE"
    ):
        return None
    source = HOST_DIR / "tmi_test_host.cpp"
    digest = hashlib.sha256(source.read_bytes() + (HOST_DIR / "Makefile").read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rulka" / "tmi_test_host" / digest
    binary = cache / "tmi_test_host"
    if binary.exists():
        return binary
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        out = Path(tmp) / "tmi_test_host"
        proc = subprocess.run(
            ["make", "-s", "-C", str(HOST_DIR), f"OUT={out}"], capture_output=True, text=True, timeout=180
        )
        if proc.returncode != 0:
            pytest.fail(f"building the plugin test host failed:\n{proc.stdout}\n{proc.stderr}")
        out.replace(binary)
    return binary


@pytest.fixture(scope="session")
def tmi_host_binary() -> Path:
    """Path of the compiled test host (skips when the AngelScript headers are missing)."""
    binary = _host_binary()
    if binary is None:
        pytest.skip("AngelScript headers or g++ missing: apt-get install -y angelscript-dev g++ make")
    return binary


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HostProcess:
    """A running test host (a ``GameProcess``)."""

    def __init__(self, popen: subprocess.Popen, port: int) -> None:
        self.popen = popen
        self.port = port
        self.stdout_lines: list[str] = []
        self.stderr_text = ""

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def terminate(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=10)


def start_host(binary: Path, *, plugin: Path = PLUGIN, checkpoints: str = "8,20", max_seconds: float = 60.0,
               config: str | None = None, startup_ms: int = 50, extra: list[str] | None = None,
               port: int | None = None) -> HostProcess:
    """Start the host (on a free port unless ``port``) and wait until the plugin listens (or fails to
    compile). ``extra``: more host options (see tmi_test_host.cpp). A script exception ends the game
    (``--script-exceptions exit``, so that a fault of our plugin fails its test) unless ``extra`` says
    ``--script-exceptions continue`` (TMInterface 2's behaviour as the host models it)."""
    port = port or free_port()
    popen = subprocess.Popen(
        [str(binary), "--plugin", str(plugin), "--config", config if config is not None else f"set custom_port {port}",
         "--checkpoints", checkpoints, "--max-seconds", str(max_seconds), "--startup-ms", str(startup_ms),
         "--script-exceptions", "exit", *(extra or [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    host = HostProcess(popen, port)
    ready = threading.Event()

    def pump_stdout() -> None:
        assert popen.stdout is not None
        for line in popen.stdout:
            host.stdout_lines.append(line.strip())
            if line.startswith(("LISTENING", "TERMINATED")):
                ready.set()
        ready.set()

    def pump_stderr() -> None:
        assert popen.stderr is not None
        for line in popen.stderr:
            host.stderr_text += line

    threading.Thread(target=pump_stdout, daemon=True).start()
    threading.Thread(target=pump_stderr, daemon=True).start()
    ready.wait(timeout=10)
    return host


@pytest.fixture
def host_launcher(tmi_host_binary):
    """``launcher(port)`` that starts the plugin in the test host; hosts are killed after the test.

    ``launch.options`` (a dict of :func:`start_host` keywords) applies to every later launch."""
    hosts: list[HostProcess] = []

    def launch(_port: int) -> HostProcess:
        host = start_host(tmi_host_binary, **launch.options)  # type: ignore[attr-defined]
        hosts.append(host)
        assert any(l.startswith("LISTENING") for l in host.stdout_lines), host.stdout_lines + [host.stderr_text]
        return host

    launch.hosts = hosts  # type: ignore[attr-defined]
    launch.options = {}  # type: ignore[attr-defined]
    yield launch
    for h in hosts:
        h.terminate()
