"""The stand-in's physics process (standin/physics.py) on its own: the fast state blob and tick batches.

These protect the two shortcuts that make a stand-in tick cheaper without changing what the plugin
sees: the blob written straight from the car must equal ``encode_state`` of the SimBackend's
CarState byte for byte, and a batch of ticks (``B``, with ``U`` to take unused ticks back) must put
the car exactly where one request per tick (``T``) puts it, stopping at checkpoints and the finish.
"""
from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from environments.trackmania.actions import action_to_inputs
from environments.trackmania.tools.baseline import BaselineDriver
from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.tmi.standin.physics import (SNAPSHOT_MAGIC, SNAPSHOT_OFFSET, _SNAPSHOT,
                                                         StandinPhysics, car_snapshot)
from environments.trackmania.tmi.standin.build import PLUGIN, embed_variables, standin_command, standin_environment
from environments.trackmania.tmi.link.state import encode_state
from environments.trackmania.tracks import get_track

TICK = struct.Struct("<iiB")


def keys_of(action: int) -> int:
    inputs = action_to_inputs(action)
    return (1 if inputs.accelerate else 0) | (2 if inputs.brake else 0) | (4 if inputs.left else 0) | (
        8 if inputs.right else 0)


@pytest.fixture(scope="module")
def classical_keys() -> list[int]:
    """The classical driver's keys per action on `short` (simulator backend, no start jitter)."""
    env = TrackManiaEnv(TrackManiaEnvironmentParameters(H_downsized=48, W_downsized=64), track=get_track("short"),
                        backend="sim", backend_options={"start_lateral_jitter_m": 0.0,
                                                        "start_heading_jitter_rad": 0.0})
    driver = BaselineDriver(get_track("short"))
    keys = []
    env.reset(seed=0)
    try:
        for _ in range(3000):
            action = driver.act(env.state)
            keys.append(keys_of(action))
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
    finally:
        env.close()
    return keys


def reference_blob(physics: StandinPhysics) -> bytes:
    """The blob as the stand-in wrote it before BlobEncoder: encode_state of the SimBackend's CarState."""
    state = physics.sim._state()
    times = list(physics.sim.car.checkpoint_times_ms)
    if physics.sim.car.finished:
        times.append(physics.finish_time_ms if physics.finish_time_ms is not None else physics.sim.car.time_ms)
    state.checkpoint_times_ms = times
    blob = bytearray(encode_state(state, n_checkpoints=physics.n_gates() + 1))
    _SNAPSHOT.pack_into(blob, SNAPSHOT_OFFSET, SNAPSHOT_MAGIC, *car_snapshot(physics.sim.car))
    return bytes(blob)


def batch_length(race_time_ms: int, period_ms: int = 50) -> int:
    """What the host asks for: ticks up to the next race time that is a multiple of the period or 10 ms past one."""
    n = 1
    while (race_time_ms + 10 * n) % period_ms not in (0, 10):
        n += 1
    return n


def test_state_blob_equals_encode_state_of_the_sim_backends_car_state(classical_keys):
    """Every action point of a finished race (and a car upside down) gives the reference blob, byte for byte."""
    physics = StandinPhysics()
    physics.load("short")
    checked = 0
    for keys in classical_keys:
        for _ in range(5):
            physics.tick(keys)
        assert physics.state_blob() == reference_blob(physics)
        checked += 1
        if physics.sim.car.finished:
            break
    assert physics.sim.car.finished and physics.checkpoints_passed() == physics.n_gates() + 1
    physics.sim.car.psi, physics.sim.car.pitch = 2.5, 3.0  # the quaternion's other branch
    assert physics.state_blob() == reference_blob(physics)
    assert checked > 100


def test_tick_batches_put_the_car_where_single_ticks_do(classical_keys):
    """Batches to the 50 ms / +10 ms marks give the same tick replies and blobs as one tick per request,
    and stop right after a checkpoint and at the finish."""
    single, batched = StandinPhysics(), StandinPhysics()
    single.load("short")
    batched.load("short")
    stopped_early = 0
    pending: list[tuple[int, int, bool]] = []
    for keys in classical_keys:
        # the tick after the state read keeps the last action's keys in the game; here the same keys
        for _ in range(5):
            single.tick(keys)
            want = (single.sim.car.time_ms, single.checkpoints_passed(), single.sim.car.finished)
            if not pending:
                n = batch_length(batched.sim.car.time_ms)
                pending = batched.tick_batch(keys, n)
                stopped_early += len(pending) < n
            assert pending.pop(0) == want
        assert not pending
        assert batched.state_blob() == single.state_blob()
        if single.sim.car.finished:
            break
    assert single.sim.car.finished
    assert stopped_early >= single.n_gates()  # one per checkpoint at least, and the finish


def test_undo_batch_takes_back_the_ticks_the_host_did_not_use(classical_keys):
    """``undo_batch(k)`` leaves the car as after k ticks of the batch; the race goes on from there."""
    single, batched = StandinPhysics(), StandinPhysics()
    single.load("short")
    batched.load("short")
    for k, keys in enumerate(classical_keys[:200]):
        used = k % 4 + 1
        replies = batched.tick_batch(keys, 4)
        batched.undo_batch(used)
        for _ in range(used):
            single.tick(keys)
        assert replies[used - 1] == (single.sim.car.time_ms, single.checkpoints_passed(), single.sim.car.finished)
        assert batched.state_blob() == single.state_blob()


def test_batch_and_undo_requests_over_the_pipe():
    """The ``B`` and ``U`` requests: framing of the replies, as tmi_test_host.cpp reads them."""
    requests = io.BytesIO(b"M" + struct.pack("<H", 5) + b"short" + b"B" + bytes((1, 4)) + b"U" + bytes((2,))
                          + b"T" + bytes((1,)))
    replies = io.BytesIO()
    StandinPhysics().serve(io.BufferedReader(requests), replies)
    data = replies.getvalue()
    count, error_len = struct.unpack_from("<iH", data)
    assert count == 3 and error_len == 0
    off = 6
    assert data[off] == 4
    ticks = [TICK.unpack_from(data, off + 1 + 9 * i) for i in range(4)]
    assert [t[0] for t in ticks] == [10, 20, 30, 40]
    off += 1 + 9 * 4
    assert TICK.unpack_from(data, off)[0] == 20  # back after 2 ticks
    assert TICK.unpack_from(data, off + 9)[0] == 30
    assert len(data) == off + 18
    assert np.all(np.diff([t[0] for t in ticks]) == 10)


def _race_through_standin(monkeypatch, options: str, ms_per_action: int, actions: int) -> list[tuple[bytes, bytes]]:
    """(state blob, frame bytes) per action of one race through a stand-in game started with the host
    ``options``."""
    from environments.trackmania.backend import InputState
    from environments.trackmania.tmi.backend import TMIBackend
    from environments.trackmania.tmi.games.game_instance_manager import ManagerConfig

    from .standin_helpers import standin_available, standin_environ, standin_settings

    standin_available()
    for key, value in standin_environ().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("RULKA_STANDIN_OPTIONS", options)
    config = ManagerConfig(running_speed=100, ms_per_action=ms_per_action, frame_width=64, frame_height=48,
                           start_timeout_s=60, connect_timeout_s=60)
    backend = TMIBackend(settings=standin_settings(1), config=config)
    out = []
    try:
        backend.start_race("short", None)
        for k in range(actions):
            inputs = InputState(accelerate=k % 7 != 0, brake=k % 7 == 0, left=k % 5 < 2, right=k % 5 == 4)
            result = backend.manager.step(accelerate=inputs.accelerate, brake=inputs.brake, left=inputs.left,
                                          right=inputs.right)
            out.append((bytes(result.state), result.frame.tobytes()))
    finally:
        backend.close()
    return out


def test_a_period_the_batches_do_not_fit_gives_the_same_race(monkeypatch):
    """With a 30 ms action period the host's 50 ms batches are cut short (``U``) at most actions; the
    states and frames rulka receives are the same as with one physics request per tick."""
    per_tick = _race_through_standin(monkeypatch, "--physics-batch-ms 0", 30, 60)
    batched = _race_through_standin(monkeypatch, "--physics-batch-ms 50", 30, 60)
    _assert_same_race(per_tick, batched, 60)


def _assert_same_race(a: list[tuple[bytes, bytes]], b: list[tuple[bytes, bytes]], actions: int) -> None:
    """Both races have ``actions`` equal states and frames, and the car moved at every action."""
    assert len(a) == len(b) == actions
    for (blob_a, frame_a), (blob_b, frame_b) in zip(a, b):
        assert blob_a == blob_b
        assert frame_a == frame_b
    assert len({blob for blob, _ in a}) == actions


def _skip_unless_embeddable() -> None:
    if not embed_variables(sys.executable):
        pytest.skip(f"{sys.executable} has no headers or shared libpython to embed: the stand-in uses the pipe")


def test_embedded_physics_gives_the_race_the_physics_process_gives(monkeypatch):
    """The stand-in runs its physics in an interpreter embedded in the game process when this Python
    can be embedded (the default); the states and frames rulka receives are those of the physics run
    as a child process over the pipe, byte for byte."""
    _skip_unless_embeddable()
    piped = _race_through_standin(monkeypatch, "--physics-transport pipe", 50, 80)
    embedded = _race_through_standin(monkeypatch, "--physics-transport embedded", 50, 80)
    _assert_same_race(piped, embedded, 80)


def test_standin_game_is_one_process_when_its_physics_is_embedded():
    """With the embedded physics a stand-in game is one process, as TmForever is; with the pipe, the
    game and its physics child."""
    from .standin_helpers import free_port_block, standin_available

    standin_available()
    _skip_unless_embeddable()
    for transport, children in (("embedded", 0), ("pipe", 1)):
        command = standin_command(free_port_block(1), extra=["--physics-transport", transport, "--max-seconds", "30"])
        game = subprocess.Popen(command, env=standin_environment(), stdout=subprocess.PIPE, text=True)
        try:
            assert game.stdout is not None
            lines = [game.stdout.readline() for _ in range(2)]
            assert lines[-1].startswith("LISTENING"), lines
            found = [int(c) for task in Path(f"/proc/{game.pid}/task").iterdir()
                     for c in (task / "children").read_text().split()]
            assert len(found) == children, (transport, found)
        finally:
            game.kill()
            game.wait(timeout=10)


def test_a_host_without_an_embedded_python_says_how_to_get_one(tmi_host_binary):
    """The plugin tests' host is built without Python: asked for the embedded physics it stops with
    what to do instead; an unknown transport is refused before anything starts."""
    base = [str(tmi_host_binary), "--plugin", str(PLUGIN), "--config", "set custom_port 1", "--max-seconds", "5",
            "--physics", sys.executable]
    refused = subprocess.run([*base, "--physics-transport", "embedded"], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 6
    assert "TERMINATED physics-error" in refused.stdout
    assert "built without an embedded Python" in refused.stderr and "--physics-transport pipe" in refused.stderr
    unknown = subprocess.run([*base, "--physics-transport", "socket"], capture_output=True, text=True, timeout=30)
    assert unknown.returncode == 2
    assert "--physics-transport must be pipe or embedded" in unknown.stderr
    assert "COMPILED" not in unknown.stdout  # refused before the plugin is even compiled
