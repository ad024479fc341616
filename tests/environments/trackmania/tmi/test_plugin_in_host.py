"""rulka_link.as compiled and run in the AngelScript test host, driven by the real Python client."""
from __future__ import annotations

import struct
import time

import pytest

from environments.trackmania.backend import InputState
from environments.trackmania.tmi.backend import TMIBackend
from environments.trackmania.tmi.check import PortStatus, check_port
from environments.trackmania.tmi.client import TMIClient
from environments.trackmania.tmi.game_instance_manager import GameInstanceManager
from environments.trackmania.tmi.inputs_export import parse_inputs_text
from environments.trackmania.tmi.protocol import MessageType, TMInterfaceConnectionClosed
from environments.trackmania.tmi.settings import TMISettings
from environments.trackmania.tmi.state import decode_state

from .conftest import PLUGIN, start_host

MAP = "Campaign/A02-Race.Challenge.Gbx"


def test_plugin_compiles_and_listens(tmi_host_binary):
    """The plugin builds against the TMInterface API stub and listens on custom_port."""
    host = start_host(tmi_host_binary, max_seconds=5)
    try:
        assert host.stdout_lines[:2] == ["COMPILED", f"LISTENING {host.port}"], host.stderr_text
        assert "ERROR" not in host.stderr_text and "WARN" not in host.stderr_text, host.stderr_text
    finally:
        host.terminate()


def test_broken_plugin_is_reported_as_compile_error(tmi_host_binary, tmp_path):
    """The host really compiles the script: a syntax error is reported, not ignored."""
    broken = tmp_path / "broken.as"
    broken.write_text(PLUGIN.read_text() + "\nvoid Oops( {\n")
    host = start_host(tmi_host_binary, plugin=broken, max_seconds=5)
    host.popen.wait(timeout=10)
    assert "TERMINATED compile-error" in host.stdout_lines


def test_two_whole_rollouts_through_the_plugin(host_launcher, fast_config):
    """Connect, configure, race to the finish, rewind, race again: all through rulka_link.as."""
    backend = TMIBackend(settings=TMISettings(account_name="bot"), launcher=host_launcher, config=fast_config)
    try:
        finish_times = []
        for race in range(2):
            car, frame = backend.start_race(MAP, seed=race)
            assert car.race_time_ms == 0 and frame.shape == (120, 160) and car.position[2] == 0.0
            times = []
            for _ in range(200):
                car, frame = backend.step(InputState(accelerate=True, brake=False, left=False, right=False))
                if car.finished:
                    break
                times.append(car.race_time_ms)
            assert car.finished, "the car must reach the finish"
            assert times == list(range(50, 50 * len(times) + 1, 50))
            assert len(car.checkpoint_times_ms) == 2 and car.position[2] >= 20.0
            finish_times.append(car.race_time_ms)
        assert finish_times[0] == finish_times[1], "a rewound race replays exactly"
        host = host_launcher.hosts[0]
        assert "map loaded: " + MAP in host.stderr_text
        assert len(host_launcher.hosts) == 1
    finally:
        backend.close()


def test_cut_off_and_inputs_record_through_the_plugin(host_launcher, fast_config):
    """A cut-off race restarts from the saved start; C_GET_INPUTS returns the inputs held so far."""
    m = GameInstanceManager(settings=TMISettings(), config=fast_config, launcher=host_launcher)
    try:
        m.start_race(MAP)
        actions = [(True, False), (True, False), (False, True), (False, False)]
        for accel, brake in actions:
            m.step(accelerate=accel, brake=brake, left=False, right=True)
        text = m.client.get_inputs()
        assert "press up" in text and "press right" in text and "rel up" in text and "press down" in text
        assert parse_inputs_text(text)[:1] == [2]  # accel + right from the first action on
        m.end_race()
        r = m.start_race(MAP)
        assert r.race_time_ms == 0 and decode_state(r.state).position[2] == 0.0
        assert m.client.get_inputs() == ""
    finally:
        m.close()


def test_plugin_drops_silent_client_after_its_timeout(tmi_host_binary):
    """The plugin's own timeout (id 15) drops a client that stops answering, then accepts a new one."""
    host = start_host(tmi_host_binary, max_seconds=20)
    try:
        c = TMIClient.connect(host.port, timeout_s=3.0)
        assert c.read_message().type == MessageType.SC_ON_CONNECT_SYNC
        c.set_plugin_timeout(200)  # then never echo
        t0 = time.monotonic()
        with pytest.raises(TMInterfaceConnectionClosed):
            c.read_message()
        assert time.monotonic() - t0 < 2.5
        assert "client dropped: no reply within 200 ms" in host.stderr_text
        c2 = TMIClient.connect(host.port, timeout_s=3.0)
        assert c2.read_message().type == MessageType.SC_ON_CONNECT_SYNC
        c2.shutdown()
    finally:
        host.terminate()


def test_plugin_drops_client_on_unknown_id_and_bad_length(tmi_host_binary):
    """Unknown ids and invalid lengths make the plugin drop the client instead of desynchronising."""
    host = start_host(tmi_host_binary, max_seconds=20)
    try:
        for payload, reason in [
            (struct.pack("<i", 99), "unknown message id 99"),
            (struct.pack("<ii", MessageType.C_EXECUTE_COMMAND, -4), "invalid command length -4"),
        ]:
            c = TMIClient.connect(host.port, timeout_s=3.0)
            assert c.read_message().type == MessageType.SC_ON_CONNECT_SYNC
            c._transport.sendall(payload)
            with pytest.raises(TMInterfaceConnectionClosed):
                c.read_message()
            deadline = time.monotonic() + 2
            while reason not in host.stderr_text and time.monotonic() < deadline:
                time.sleep(0.02)
            assert reason in host.stderr_text
    finally:
        host.terminate()


def test_check_port_against_the_plugin(tmi_host_binary):
    """`rulka tmi check` succeeds against the real plugin and leaves it listening."""
    host = start_host(tmi_host_binary, max_seconds=20)
    try:
        assert check_port(host.port, timeout_s=3.0).status == PortStatus.OK
        c = TMIClient.connect(host.port, timeout_s=3.0)
        assert c.read_message().type == MessageType.SC_ON_CONNECT_SYNC
        c.shutdown()
    finally:
        host.terminate()


def test_missing_custom_port_is_reported(tmi_host_binary):
    """Without /configstring the plugin says how to set custom_port instead of failing silently."""
    host = start_host(tmi_host_binary, config="", max_seconds=1)
    host.popen.wait(timeout=10)
    time.sleep(0.1)
    assert "custom_port is not set" in host.stderr_text
    assert not any(l.startswith("LISTENING") for l in host.stdout_lines)
