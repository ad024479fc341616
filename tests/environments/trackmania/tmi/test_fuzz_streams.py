"""Malformed, truncated and random byte streams: only TMInterfaceError, never a crash or a hang."""
from __future__ import annotations

import random
import socket
import struct
import time

import pytest

from environments.trackmania.tmi.link.client import TMIClient
from environments.trackmania.tmi.link.protocol import TMInterfaceError
from environments.trackmania.tmi.link.state import MIN_STATE_SIZE, decode_state


class BytesTransport:
    """An in-memory stream: recv serves the bytes in random-sized chunks, then EOF or a timeout."""

    def __init__(self, data: bytes, rng: random.Random, eof: str) -> None:
        self.data = data
        self.pos = 0
        self.rng = rng
        self.eof = eof
        self.sent = bytearray()

    def recv(self, n: int) -> bytes:
        if self.pos >= len(self.data):
            if self.eof == "timeout":
                raise socket.timeout("timed out")
            if self.eof == "reset":
                raise ConnectionResetError("reset by peer")
            return b""
        k = min(n, self.rng.randint(1, 64))
        chunk = self.data[self.pos : self.pos + k]
        self.pos += len(chunk)
        return chunk

    def sendall(self, data: bytes) -> None:
        self.sent += data

    def close(self) -> None:
        pass


def random_stream(rng: random.Random) -> bytes:
    """Random bytes, or a plausible message prefix followed by corruption or truncation."""
    kind = rng.randrange(4)
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 48))
    mid = rng.randint(-2, 25)
    head = struct.pack("<i", mid)
    if kind == 1:
        return head + rng.randbytes(rng.randrange(0, 16))
    if kind == 2:  # a length prefix, plausible or not, and a truncated body
        length = rng.choice([-1, 0, 3, 100, 9000, 2**31 - 1, rng.randint(-(2**31), 2**31 - 1)])
        return struct.pack("<i", length) + rng.randbytes(rng.randrange(0, 64))
    # valid messages then garbage
    valid = struct.pack("<ii", 1, rng.randint(-3000, 9000)) * rng.randrange(0, 3)
    return valid + head + rng.randbytes(rng.randrange(0, 12))


def exercise(client: TMIClient, rng: random.Random) -> None:
    """One random read path of the client; must end in TMInterfaceError or return normally."""
    op = rng.randrange(6)
    if op == 0:
        for _ in range(20):
            client.read_message()
    elif op == 1:
        blob = client.get_simulation_state()
        decode_state(blob)
    elif op == 2:
        client.get_inputs()
    elif op == 3:
        client.race_finished()
        client.is_in_menus()
    elif op == 4:
        client.request_frame(rng.randint(1, 4), rng.randint(1, 4))
        for _ in range(5):
            client.read_message()
    else:
        decode_state(client._transport.data)  # the stream itself as a state blob


def test_ten_thousand_random_streams_only_raise_tminterface_errors():
    """10,000 random streams through the client's read path raise only TMInterfaceError, quickly."""
    rng = random.Random(1234)
    outcomes = {"error": 0, "ok": 0}
    t0 = time.monotonic()
    for _ in range(10_000):
        data = random_stream(rng)
        transport = BytesTransport(data, rng, rng.choice(["eof", "timeout", "reset"]))
        client = TMIClient(transport, timeout_s=0.01)  # type: ignore[arg-type]
        try:
            exercise(client, rng)
            outcomes["ok"] += 1
        except TMInterfaceError as err:
            outcomes["error"] += 1
            assert err.expected or err.detail, err
            assert "message:" in str(err)
        # any other exception type fails the test
    assert time.monotonic() - t0 < 20.0
    assert outcomes["error"] > 5000  # most streams are broken; the rest parse by chance


def test_random_streams_over_real_sockets_end_within_the_timeout():
    """Truncated streams over a socket pair end in TMInterfaceError within the timeout, never a hang."""
    rng = random.Random(99)
    t0 = time.monotonic()
    for i in range(200):
        a, b = socket.socketpair()
        with a, b:
            b.sendall(random_stream(rng))
            if i % 20:  # mostly closed streams; every 20th stays open (timeout path)
                b.shutdown(socket.SHUT_WR)
            client = TMIClient(a, timeout_s=0.02)
            with pytest.raises(TMInterfaceError):
                for _ in range(20):
                    client.read_message()
    assert time.monotonic() - t0 < 10.0


def test_random_state_blobs_decode_or_raise():
    """Random blobs of plausible sizes either decode or raise the state decode error."""
    rng = random.Random(7)
    for _ in range(300):
        blob = bytearray(rng.randbytes(MIN_STATE_SIZE + rng.randrange(0, 64)))
        if rng.random() < 0.5:
            struct.pack_into("<ii", blob, 8344 + 4, rng.randrange(0, 3), 0)
        try:
            decode_state(bytes(blob))
        except TMInterfaceError:
            pass
