"""Wire format of the client: ids, little-endian framing, exact reads, validation, clear errors."""
from __future__ import annotations

import socket
import struct
import threading
import time

import numpy as np
import pytest

from environments.trackmania.tmi.link.client import TMIClient, TMInterfaceConnectError
from environments.trackmania.tmi.link.protocol import (
    MAX_STATE_BYTES,
    MessageType,
    TMInterfaceConnectionClosed,
    TMInterfaceError,
    TMInterfaceProtocolError,
    TMInterfaceTimeout,
    bgra_to_gray,
)

from .conftest import free_port


def pair(timeout_s: float = 1.0) -> tuple[TMIClient, socket.socket]:
    a, b = socket.socketpair()
    b.settimeout(1.0)
    return TMIClient(a, timeout_s=timeout_s), b


def test_message_ids_match_the_protocol_table():
    """All 23 ids keep the values of the wire protocol table."""
    expected = [
        "SC_RUN_STEP_SYNC", "SC_CHECKPOINT_COUNT_CHANGED_SYNC", "SC_LAP_COUNT_CHANGED_SYNC",
        "SC_REQUESTED_FRAME_SYNC", "SC_ON_CONNECT_SYNC", "C_SET_SPEED", "C_REWIND_TO_STATE",
        "C_REWIND_TO_CURRENT_STATE", "C_GET_SIMULATION_STATE", "C_SET_INPUT_STATE", "C_GIVE_UP",
        "C_PREVENT_SIMULATION_FINISH", "C_SHUTDOWN", "C_EXECUTE_COMMAND", "C_SET_TIMEOUT", "C_RACE_FINISHED",
        "C_REQUEST_FRAME", "C_RESET_CAMERA", "C_SET_ON_STEP_PERIOD", "C_UNREQUEST_FRAME", "C_TOGGLE_INTERFACE",
        "C_IS_IN_MENUS", "C_GET_INPUTS",
    ]
    assert [m.name for m in MessageType] == expected
    assert [int(m) for m in MessageType] == list(range(1, 24))


def test_commands_are_little_endian_with_exact_payloads():
    """Every command writes its int32 id and its documented payload, little-endian."""
    c, peer = pair()
    c.set_speed(2.5)
    c.rewind_to_state(b"\x01\x02\x03")
    c.rewind_to_current_state()
    c.set_input_state(left=True, right=False, accelerate=True, brake=False)
    c.give_up()
    c.prevent_simulation_finish()
    c.execute_command("map é.Gbx")
    c.set_plugin_timeout(30000)
    c.request_frame(160, 120)
    c.reset_camera()
    c.set_on_step_period(50)
    c.unrequest_frame()
    c.toggle_interface(False)
    c.respond(MessageType.SC_RUN_STEP_SYNC)
    cmd = "map é.Gbx".encode()
    expected = (
        struct.pack("<if", 6, 2.5) + struct.pack("<ii", 7, 3) + b"\x01\x02\x03" + struct.pack("<i", 8)
        + struct.pack("<i4B", 10, 1, 0, 1, 0) + struct.pack("<i", 11) + struct.pack("<i", 12)
        + struct.pack("<ii", 14, len(cmd)) + cmd + struct.pack("<iI", 15, 30000) + struct.pack("<iii", 17, 160, 120)
        + struct.pack("<i", 18) + struct.pack("<ii", 19, 50) + struct.pack("<i", 20) + struct.pack("<ii", 21, 0)
        + struct.pack("<i", 1)
    )
    got = b""
    while len(got) < len(expected):
        got += peer.recv(4096)
    assert got == expected
    c.shutdown()
    assert peer.recv(4) == struct.pack("<i", 13)


def test_sync_messages_and_replies_decode():
    """Sync messages 1-5 and the replies of 9, 16, 22, 23 decode from a stream split byte by byte."""
    c, peer = pair()
    frame = np.arange(2 * 3 * 4, dtype=np.uint8).tobytes()
    stream = (
        struct.pack("<ii", 1, -2600) + struct.pack("<iii", 2, 1, 3) + struct.pack("<iii", 3, 1, 2)
        + struct.pack("<i", 4) + frame + struct.pack("<i", 5)
        + struct.pack("<i", 4) + b"abcd" + struct.pack("<i", 1) + struct.pack("<i", 0)
        + struct.pack("<i", 14) + "0.00 press up\n".encode()
    )

    def feed() -> None:
        for i in range(len(stream)):
            peer.sendall(stream[i : i + 1])

    t = threading.Thread(target=feed)
    t.start()
    assert c.read_message().race_time_ms == -2600
    m = c.read_message()
    assert (m.type, m.current, m.target) == (MessageType.SC_CHECKPOINT_COUNT_CHANGED_SYNC, 1, 3)
    assert c.read_message().type == MessageType.SC_LAP_COUNT_CHANGED_SYNC
    c.request_frame(3, 2)
    f = c.read_message()
    assert f.type == MessageType.SC_REQUESTED_FRAME_SYNC and f.frame.shape == (2, 3) and not c.frame_requested
    assert c.read_message().type == MessageType.SC_ON_CONNECT_SYNC
    assert c.get_simulation_state() == b"abcd"
    assert c.race_finished() is True
    assert c.is_in_menus() is False
    assert c.get_inputs() == "0.00 press up\n"
    t.join()


def test_bgra_to_gray_uses_itu_601_weights():
    """Grayscale = round(0.299 R + 0.587 G + 0.114 B), vectorised, shape (H, W)."""
    rng = np.random.default_rng(0)
    bgra = rng.integers(0, 256, size=(7, 5, 4), dtype=np.uint8)
    gray = bgra_to_gray(bgra.tobytes(), 5, 7)
    b, g, r = (bgra[..., i].astype(np.float64) for i in range(3))
    np.testing.assert_array_equal(gray, np.floor(0.299 * r + 0.587 * g + 0.114 * b + 0.5).astype(np.uint8))
    assert bgra_to_gray(bytes([0, 0, 255, 255]), 1, 1)[0, 0] == 76  # pure red
    with pytest.raises(ValueError):
        bgra_to_gray(b"\x00" * 7, 1, 2)


@pytest.mark.reliability
def test_truncated_payload_names_message_and_expectation():
    """A payload cut short by a closed connection raises TMInterfaceConnectionClosed naming the id."""
    c, peer = pair()
    peer.sendall(struct.pack("<i", 2) + b"\x01\x00")
    peer.close()
    with pytest.raises(TMInterfaceConnectionClosed) as err:
        c.read_message()
    assert err.value.message_id == 2 and "int32 current" in err.value.expected
    assert "SC_CHECKPOINT_COUNT_CHANGED_SYNC (2)" in str(err.value)


@pytest.mark.parametrize("length", [-1, MAX_STATE_BYTES + 1, 2**31 - 1])
def test_invalid_state_length_is_refused(length):
    """A negative or oversized state length is an error naming C_GET_SIMULATION_STATE."""
    c, peer = pair()
    peer.sendall(struct.pack("<i", length))
    with pytest.raises(TMInterfaceProtocolError) as err:
        c.get_simulation_state()
    assert err.value.message_id == MessageType.C_GET_SIMULATION_STATE and str(length) in str(err.value)


def test_unknown_or_command_id_from_the_game_is_refused():
    """Only ids 1-5 may come from the game; anything else names the id received."""
    for bad in (0, 6, 23, 99, -5):
        c, peer = pair()
        peer.sendall(struct.pack("<i", bad))
        with pytest.raises(TMInterfaceProtocolError) as err:
            c.read_message()
        assert err.value.message_id == bad and "1-5" in err.value.expected


def test_unrequested_frame_is_refused():
    """A frame message without a pending request cannot be sized: protocol error, not a hang."""
    c, peer = pair()
    peer.sendall(struct.pack("<i", 4) + b"\x00" * 64)
    with pytest.raises(TMInterfaceProtocolError, match="never requested"):
        c.read_message()


def test_silent_game_times_out_within_the_timeout():
    """A game that sends nothing raises TMInterfaceTimeout after the socket timeout, never hangs."""
    c, _peer = pair(timeout_s=0.1)
    t0 = time.monotonic()
    with pytest.raises(TMInterfaceTimeout) as err:
        c.read_message()
    assert time.monotonic() - t0 < 1.0
    assert "message id" in err.value.expected


def test_connect_to_closed_port_fails_clearly():
    """Connecting to a port nobody listens on gives TMInterfaceConnectError mentioning custom_port."""
    port = free_port()
    with pytest.raises(TMInterfaceConnectError, match="custom_port"):
        TMIClient.connect(port, connect_timeout_s=0.3)


def test_errors_are_runtime_errors():
    """TMInterfaceError subclasses RuntimeError and carries message_id/expected."""
    err = TMInterfaceTimeout("x", message_id=9, expected="y")
    assert isinstance(err, RuntimeError) and isinstance(err, TMInterfaceError)
    assert (err.message_id, err.expected) == (9, "y")


def test_client_argument_validation():
    """Invalid arguments are refused before anything is sent."""
    c, _ = pair()
    with pytest.raises(ValueError):
        c.set_speed(float("nan"))
    with pytest.raises(ValueError):
        c.request_frame(0, 10)
    with pytest.raises(ValueError):
        c.set_on_step_period(55)
    with pytest.raises(ValueError):
        c.respond(MessageType.C_GIVE_UP)


class _RecordingTransport:
    """A transport that records each sendall and serves reads from a script (no recv_into)."""

    def __init__(self, incoming: bytes = b"") -> None:
        self.writes: list[bytes] = []
        self.incoming = bytearray(incoming)

    def sendall(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def recv(self, n: int) -> bytes:
        out = bytes(self.incoming[:n])
        del self.incoming[:n]
        return out

    def close(self) -> None:
        pass


def test_batched_commands_leave_in_one_write_and_a_read_sends_them_first():
    """Inside ``batched()`` the commands and the echo are one write (one wake-up of the game); a reply
    read inside the block sends what is pending before it waits; outside a block, one write each."""
    blob = bytes(range(40))
    t = _RecordingTransport(struct.pack("<i", len(blob)) + blob)
    c = TMIClient(t)
    with c.batched():
        c.set_input_state(left=True, right=False, accelerate=True, brake=False)
        c.set_speed(10.0)
        c.respond(MessageType.SC_REQUESTED_FRAME_SYNC)
        assert t.writes == []
    assert t.writes == [struct.pack("<i", 10) + bytes((1, 0, 1, 0)) + struct.pack("<if", 6, 10.0)
                        + struct.pack("<i", 4)]
    t.writes.clear()
    with c.batched():
        c.set_speed(0.0)
        assert c.get_simulation_state() == blob
        assert t.writes == [struct.pack("<if", 6, 0.0) + struct.pack("<i", 9)]
    assert len(t.writes) == 1  # nothing was left to send at the end
    t.writes.clear()
    c.set_speed(1.0)
    c.give_up()
    assert t.writes == [struct.pack("<if", 6, 1.0), struct.pack("<i", 11)]


def test_a_batch_that_raises_sends_nothing():
    """A block that fails drops its pending commands (the connection is being dropped anyway)."""
    t = _RecordingTransport()
    c = TMIClient(t)
    with pytest.raises(RuntimeError):
        with c.batched():
            c.set_speed(1.0)
            raise RuntimeError("boom")
    c.flush()
    assert t.writes == []


def test_buffered_reads_split_and_joined_messages_and_frames():
    """Messages read through the receive buffer decode the same whether the game's bytes arrive one
    at a time or many messages in one segment, frames larger than the buffer included."""
    w, h = 300, 200  # 240,000 bytes of BGRA: larger than the 64 KiB receive buffer
    rng = np.random.default_rng(0)
    bgra = rng.integers(0, 256, w * h * 4, dtype=np.uint8).tobytes()
    stream = (struct.pack("<ii", 1, 50) + struct.pack("<iii", 2, 1, 3) + struct.pack("<i", 4) + bgra
              + struct.pack("<ii", 1, 100))
    for chunk in (1, 7, 1 << 20):
        client, game = pair()
        client.request_frame(w, h)
        game.recv(64)
        sender = threading.Thread(target=lambda: [game.sendall(stream[k:k + chunk])
                                                  for k in range(0, len(stream), chunk)])
        sender.start()
        try:
            assert client.read_message().race_time_ms == 50
            msg = client.read_message()
            assert (msg.current, msg.target) == (1, 3)
            frame = client.read_message().frame
            assert np.array_equal(frame, bgra_to_gray(bgra, w, h))
            assert client.read_message().race_time_ms == 100
        finally:
            sender.join()
            client.close()
            game.close()


def test_bgra_to_gray_matches_the_601_formula_exactly():
    """The frame conversion is the ITU-R 601 luma with rounding to nearest, for every pixel value."""
    rng = np.random.default_rng(1)
    data = rng.integers(0, 256, 97 * 31 * 4, dtype=np.uint8)
    px = data.reshape(31, 97, 4).astype(np.int64)
    expected = (px[..., 0] * 114 + px[..., 1] * 587 + px[..., 2] * 299 + 500) // 1000
    assert np.array_equal(bgra_to_gray(data, 97, 31), expected.astype(np.uint8))


def test_state_request_travels_with_the_frame_request_and_its_reply_is_read_after():
    """The manager's action point: the state request, the frame request and the echo leave in one
    write; the state's reply is read afterwards (the plugin answers commands in order)."""
    blob = bytes(range(12))
    t = _RecordingTransport(struct.pack("<i", len(blob)) + blob)
    c = TMIClient(t)
    with c.batched():
        c.request_simulation_state()
        c.request_frame(4, 2)
        c.respond(MessageType.SC_RUN_STEP_SYNC)
    assert t.writes == [struct.pack("<i", 9) + struct.pack("<iii", 17, 4, 2) + struct.pack("<i", 1)]
    assert c.read_simulation_state() == blob
