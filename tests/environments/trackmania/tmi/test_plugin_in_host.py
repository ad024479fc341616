"""rulka_link.as compiled and run in the AngelScript test host, driven by the real Python client."""
from __future__ import annotations

import dataclasses
import struct
import time

import pytest

from environments.trackmania.backend import SURFACE_ASPHALT, SURFACE_GRASS, InputState
from environments.trackmania.tmi.backend import TMIBackend
from environments.trackmania.tmi.commands.check import PortStatus, check_port
from environments.trackmania.tmi.link.client import TMIClient
from environments.trackmania.tmi.games.game_instance_manager import GameInstanceManager
from environments.trackmania.tmi.maps.inputs_export import ACTIONS, actions_to_inputs_text
from environments.trackmania.tmi.maps.inputs_script import parse_inputs_script, script_actions
from environments.trackmania.tmi.link.protocol import MessageType, TMInterfaceConnectionClosed
from environments.trackmania.tmi.games.settings import TMISettings
from environments.trackmania.tmi.link.state import check_wheel_order, decode_state

from .conftest import PLUGIN, free_port, start_host

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
        assert script_actions(parse_inputs_script(text)).actions[:1] == [2]  # accel + right from the first action on
        m.end_race()
        r = m.start_race(MAP)
        assert r.race_time_ms == 0 and decode_state(r.state).position[2] == 0.0
        assert m.client.get_inputs() == ""
    finally:
        m.close()


def _wait_for_stderr(host, text: str, within_s: float = 5.0) -> None:
    """Assert that the host writes ``text`` to its stderr within ``within_s`` seconds (a reader thread
    collects it, so it may land just after the socket closes)."""
    deadline = time.monotonic() + within_s
    while text not in host.stderr_text and time.monotonic() < deadline:
        time.sleep(0.02)
    assert text in host.stderr_text


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
        _wait_for_stderr(host, "client dropped: no reply within 200 ms")
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
            _wait_for_stderr(host, reason)
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


# ---------------------------------------------------------------------- issue 10: the game as it behaves
ACCEL = InputState(accelerate=True, brake=False, left=False, right=False)


def drive(backend: TMIBackend, actions: list[InputState] | None = None, max_steps: int = 300):
    """Step until the finish; returns (states, frames)."""
    states, frames = [], []
    for k in range(max_steps):
        car, frame = backend.step(actions[k % len(actions)] if actions else ACCEL)
        states.append(car)
        frames.append(frame)
        if car.finished:
            return states, frames
    raise AssertionError("the car did not finish")


def test_unqualified_enum_value_fails_in_strict_mode(tmi_host_binary, tmp_path):
    """Point 8: the host requires scoped enum values (MessageType::X), as the game may; the plugin uses them."""
    text = PLUGIN.read_text()
    assert "case MessageType::CSetSpeed:" in text
    unscoped = tmp_path / "unscoped.as"
    unscoped.write_text(text.replace("case MessageType::CSetSpeed:", "case CSetSpeed:"))
    strict = start_host(tmi_host_binary, plugin=unscoped, max_seconds=2)
    strict.popen.wait(timeout=10)
    assert "TERMINATED compile-error" in strict.stdout_lines
    lax = start_host(tmi_host_binary, plugin=unscoped, max_seconds=1, extra=["--strict-enum-scope", "0"])
    try:
        assert "COMPILED" in lax.stdout_lines
    finally:
        lax.terminate()


def test_per_action_latency_with_nagle_on_by_default(host_launcher, fast_config):
    """Point 1: the host keeps Nagle's algorithm on until the plugin sets NoDelay; one action (state,
    frame, inputs, echoes) must then take a few ms, not the tens of ms of delayed ACKs."""
    host_launcher.options = {"checkpoints": "400,800"}
    config = dataclasses.replace(fast_config, running_speed=10)
    m = GameInstanceManager(settings=TMISettings(), config=config, launcher=host_launcher)
    try:
        m.start_race(MAP)
        m.step(accelerate=True, brake=False, left=False, right=False)
        n = 40
        t0 = time.perf_counter()
        for _ in range(n):
            m.step(accelerate=True, brake=False, left=False, right=False)
        per_action_ms = (time.perf_counter() - t0) / n * 1000
        assert "socket NoDelay = true" in host_launcher.hosts[0].stderr_text
        assert per_action_ms < 15.0, f"{per_action_ms:.1f} ms per action"
    finally:
        m.close()


def test_stale_port_from_an_earlier_session_is_not_bound(tmi_host_binary):
    """Point 6: TMInterface restores custom_port from an earlier session; the plugin must listen on the
    port that /configstring sets, not the stale one, whether or not the game renders frames before
    /configstring runs (the host's default renders none first; three here), without a script exception."""
    stale, port = free_port(), free_port()
    host = start_host(tmi_host_binary, port=port, max_seconds=5,
                      extra=["--saved-variables", f"custom_port={stale}", "--pre-config-renders", "3"])
    try:
        listening = [line for line in host.stdout_lines if line.startswith("LISTENING")]
        assert listening == [f"LISTENING {port}"], host.stdout_lines + [host.stderr_text]
    finally:
        host.terminate()


def test_inputs_are_sent_every_action_when_the_game_loses_some(host_launcher, fast_config):
    """Point 2: with every second SetInputState lost (inputs "sometimes not applied"), holding the same
    action still drives the car to the finish because the inputs are sent again at every action."""
    host_launcher.options = {"extra": ["--lose-input-every", "2"]}
    backend = TMIBackend(settings=TMISettings(), launcher=host_launcher, config=fast_config)
    try:
        backend.start_race(MAP, seed=0)
        states, _ = drive(backend, max_steps=150)
        assert states[-1].finished and "input lost" in host_launcher.hosts[0].stderr_text
    finally:
        backend.close()


def test_finish_is_undone_when_prevent_simulation_finish_does_nothing(host_launcher, fast_config):
    """Point 3: the host's PreventSimulationFinish does nothing in a normal race (the end screen
    follows); the manager undoes the finish by rewinding, so three races run on one game instance."""
    backend = TMIBackend(settings=TMISettings(), launcher=host_launcher, config=fast_config)
    try:
        times = []
        for race in range(3):
            backend.start_race(MAP, seed=race)
            states, _ = drive(backend)
            times.append(states[-1].race_time_ms)
        host = host_launcher.hosts[0]
        assert len(host_launcher.hosts) == 1 and "end dialog" not in host.stderr_text
        assert times[0] == times[1] == times[2] > 0
    finally:
        backend.close()


def test_console_closed_and_window_focused_once_per_launch(host_launcher, fast_config):
    """Point 4: after a launch the console (open at start, it covers the top of the frames) is closed
    and the window focused, once; a reconnection to the same game does neither again."""
    config = dataclasses.replace(fast_config, reconnect_timeout_s=3.0)  # the plugin notices the drop in 1 s
    backend = TMIBackend(settings=TMISettings(), launcher=host_launcher, config=config)
    try:
        _, frame = backend.start_race(MAP, seed=0)
        _, frame2 = backend.step(ACCEL)
        assert frame[:30].max() < 255 and frame2[:30].max() < 255, "the console covers the frame"
        backend.manager._drop_client()  # the connection drops mid-race; the game keeps running
        backend.start_race(MAP, seed=1)
        drive(backend)
        host = host_launcher.hosts[0]
        assert host.stderr_text.count("console closed") == 1 and "console opened" not in host.stderr_text
        assert host.stderr_text.count("window focused") == 1 and len(host_launcher.hosts) == 1
    finally:
        backend.close()


def test_minimised_window_is_restored_for_screenshots(host_launcher, fast_config):
    """Host: screenshots fail while the window is minimised; the plugin restores the window and
    sends the frame instead of dropping the client."""
    host_launcher.options = {"extra": ["--minimised", "1"]}
    backend = TMIBackend(settings=TMISettings(), launcher=host_launcher, config=fast_config)
    try:
        _, frame = backend.start_race(MAP, seed=0)
        assert frame.shape == (120, 160)
        drive(backend)
        host = host_launcher.hosts[0]
        assert "window restored" in host.stderr_text and "client dropped" not in host.stderr_text
    finally:
        backend.close()


def test_wheel_order_of_the_game_state(host_launcher, fast_config):
    """Point 9: the host writes wheels in the API's order (FL, FR, BR, BL) with the back-left wheel on
    grass; decoded, CarState's rear-left wheel (index 2) is the one on grass."""
    backend = TMIBackend(settings=TMISettings(), launcher=host_launcher, config=fast_config)
    try:
        car, _ = backend.start_race(MAP, seed=0)
        assert car.wheel_surface_group.tolist() == [SURFACE_ASPHALT, SURFACE_ASPHALT, SURFACE_GRASS, SURFACE_ASPHALT]
        assert car.wheel_damper_absorb.tolist() == pytest.approx([0.01, 0.02, 0.04, 0.03])
        assert check_wheel_order(backend.manager.client.get_simulation_state()) is None
    finally:
        backend.close()


def test_exported_inputs_match_the_games_own_record(host_launcher, fast_config):
    """Point 10: the inputs file written from the agent's actions lists the same key events, at the
    same race times, as the game's own input record (InputEvents.ToCommandsText) of that race."""
    backend = TMIBackend(settings=TMISettings(), launcher=host_launcher, config=fast_config)
    actions = [0, 0, 2, 2, 0, 1, 9, 0, 0, 3, 0]  # indices into inputs_export.ACTIONS
    try:
        backend.start_race(MAP, seed=0)
        played = [ACTIONS[a] for a in actions]
        inputs = [InputState(accelerate=f[0], brake=f[1], left=f[2], right=f[3]) for f in played]
        drive(backend, inputs)
        game_record = backend.race_inputs_text()
        k = len(actions)
        # The race ran past the list: it repeats, so compare the first k actions' events.
        ours = key_events(actions_to_inputs_text(actions))
        theirs = key_events(game_record)
        horizon = 10 + k * 50
        assert [e for e in theirs if e[0] < horizon] == [e for e in ours if e[0] < horizon], game_record
    finally:
        backend.close()


def key_events(text: str) -> list[tuple[int, str, bool]]:
    """(time ms, key, pressed) of an inputs script, ranges split into press and release, sorted."""
    return sorted((e.time_ms, e.key, e.pressed) for e in parse_inputs_script(text))


def test_two_map_cycle_on_one_game_instance(host_launcher, fast_config):
    """Point 11 / issue 8: one backend serves a two-map cycle on one game instance, loading each map
    when it changes; each map keeps its own start state and finish."""
    host_launcher.options = {"extra": ["--map-checkpoints", "A.Challenge.Gbx=8,20;B.Challenge.Gbx=10,30",
                                       "--map-load-ms", "50"]}
    backend = TMIBackend(settings=TMISettings(), launcher=host_launcher, config=fast_config)
    try:
        finish = {}
        for track in ["A.Challenge.Gbx", "B.Challenge.Gbx", "A.Challenge.Gbx", "B.Challenge.Gbx"]:
            car, _ = backend.start_race(track, seed=0)
            assert car.race_time_ms == 0 and car.position[2] == 0.0
            states, _ = drive(backend)
            finish.setdefault(track, []).append(states[-1].race_time_ms)
            assert states[-1].position[2] >= (20.0 if track.startswith("A") else 30.0)
        host = host_launcher.hosts[0]
        assert len(host_launcher.hosts) == 1
        assert [l.split(": ")[1] for l in host.stderr_text.splitlines() if "map loaded" in l] == [
            "A.Challenge.Gbx", "B.Challenge.Gbx", "A.Challenge.Gbx", "B.Challenge.Gbx"]
        assert finish["A.Challenge.Gbx"][0] == finish["A.Challenge.Gbx"][1] < finish["B.Challenge.Gbx"][0]
        assert finish["B.Challenge.Gbx"][0] == finish["B.Challenge.Gbx"][1]
    finally:
        backend.close()
