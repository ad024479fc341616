"""The wire protocol between rulka and its TMInterface 2 plugin (``plugin/rulka_link.as``).

Framing (all little-endian, no headers, no padding):

* every message starts with an ``int32`` message id (:class:`MessageType`);
* the payload that follows is fixed per id (see :data:`PAYLOAD_LAYOUT`); variable-size payloads
  carry their own ``int32`` byte length first; frames carry none: the client knows ``W*H*4``.

Game-to-client messages (ids 1-5) are *sync* messages: the game blocks until the client writes the
same id back (the echo). While the game is blocked it serves client commands (ids 6-23), so every
command is sent while the game waits inside one of those sync messages. Replies to commands come
back immediately, in order, before anything else.

This module holds the ids, the limits, exact-size reads with clear errors, and the frame
conversion. :mod:`.client` builds the command API on top of it.
"""
from __future__ import annotations

import enum
import socket
import struct
from typing import Protocol

import numpy as np

#: The plugin listens on loopback only.
DEFAULT_HOST = "127.0.0.1"

#: Largest simulation-state blob accepted (bytes). A TMNF state is 8344 bytes plus the checkpoint
#: arrays (8 + 12 bytes per checkpoint); 1 MiB leaves room for any map while refusing garbage.
MAX_STATE_BYTES = 1 << 20
#: Largest text payload accepted (console command sent, inputs text received), bytes.
MAX_TEXT_BYTES = 1 << 20
#: Largest frame side accepted, pixels.
MAX_FRAME_SIDE = 4096


class MessageType(enum.IntEnum):
    """Message ids of the protocol (see ``shared/reference/tmi_protocol.md``)."""

    SC_RUN_STEP_SYNC = 1
    SC_CHECKPOINT_COUNT_CHANGED_SYNC = 2
    SC_LAP_COUNT_CHANGED_SYNC = 3
    SC_REQUESTED_FRAME_SYNC = 4
    SC_ON_CONNECT_SYNC = 5
    C_SET_SPEED = 6
    C_REWIND_TO_STATE = 7
    C_REWIND_TO_CURRENT_STATE = 8
    C_GET_SIMULATION_STATE = 9
    C_SET_INPUT_STATE = 10
    C_GIVE_UP = 11
    C_PREVENT_SIMULATION_FINISH = 12
    C_SHUTDOWN = 13
    C_EXECUTE_COMMAND = 14
    C_SET_TIMEOUT = 15
    C_RACE_FINISHED = 16
    C_REQUEST_FRAME = 17
    C_RESET_CAMERA = 18
    C_SET_ON_STEP_PERIOD = 19
    C_UNREQUEST_FRAME = 20
    C_TOGGLE_INTERFACE = 21
    C_IS_IN_MENUS = 22
    C_GET_INPUTS = 23


#: Messages the game sends and that block it until echoed.
SYNC_MESSAGES = frozenset(m for m in MessageType if m <= MessageType.SC_ON_CONNECT_SYNC)
#: Messages the client sends while the game is blocked.
COMMAND_MESSAGES = frozenset(m for m in MessageType if m >= MessageType.C_SET_SPEED)

#: Human-readable payload layout per id (used in error messages and docs).
PAYLOAD_LAYOUT: dict[MessageType, str] = {
    MessageType.SC_RUN_STEP_SYNC: "int32 race_time_ms",
    MessageType.SC_CHECKPOINT_COUNT_CHANGED_SYNC: "int32 current, int32 target",
    MessageType.SC_LAP_COUNT_CHANGED_SYNC: "int32 current, int32 target",
    MessageType.SC_REQUESTED_FRAME_SYNC: "W*H*4 bytes BGRA",
    MessageType.SC_ON_CONNECT_SYNC: "nothing",
    MessageType.C_SET_SPEED: "float32 speed",
    MessageType.C_REWIND_TO_STATE: "int32 length + state bytes",
    MessageType.C_REWIND_TO_CURRENT_STATE: "nothing",
    MessageType.C_GET_SIMULATION_STATE: "nothing; reply int32 length + state bytes",
    MessageType.C_SET_INPUT_STATE: "4 x uint8 left, right, accelerate, brake",
    MessageType.C_GIVE_UP: "nothing",
    MessageType.C_PREVENT_SIMULATION_FINISH: "nothing",
    MessageType.C_SHUTDOWN: "nothing",
    MessageType.C_EXECUTE_COMMAND: "int32 length + UTF-8 command",
    MessageType.C_SET_TIMEOUT: "uint32 ms",
    MessageType.C_RACE_FINISHED: "nothing; reply int32",
    MessageType.C_REQUEST_FRAME: "int32 W, int32 H",
    MessageType.C_RESET_CAMERA: "nothing",
    MessageType.C_SET_ON_STEP_PERIOD: "int32 ms",
    MessageType.C_UNREQUEST_FRAME: "nothing",
    MessageType.C_TOGGLE_INTERFACE: "int32 bool",
    MessageType.C_IS_IN_MENUS: "nothing; reply int32",
    MessageType.C_GET_INPUTS: "nothing; reply int32 length + text",
}


def message_name(message_id: int | None) -> str:
    """``"SC_RUN_STEP_SYNC (1)"`` for a known id, ``"unknown id 77"`` otherwise."""
    if message_id is None:
        return "no message"
    try:
        return f"{MessageType(message_id).name} ({int(message_id)})"
    except ValueError:
        return f"unknown id {message_id}"


class TMInterfaceError(RuntimeError):
    """Anything that went wrong on the link: a timeout, a closed connection, a malformed message.

    Attributes:
        message_id: the id of the message being read or answered when it failed (``None`` when no
            message was involved, e.g. while connecting); for an unknown id, the value received.
        expected: what the client expected to read, in words ("4 bytes: int32 race_time_ms").
    """

    def __init__(self, detail: str, *, message_id: int | None = None, expected: str = "") -> None:
        self.message_id = None if message_id is None else int(message_id)
        self.expected = expected
        self.detail = detail
        text = f"{detail} [message: {message_name(message_id)}"
        if expected:
            text += f"; expected: {expected}"
        super().__init__(text + "]")


class TMInterfaceTimeout(TMInterfaceError):
    """The game did not send what was expected within the socket timeout: it hangs or is paused."""


class TMInterfaceConnectionClosed(TMInterfaceError):
    """The game closed the connection (plugin timeout, game exit, ``C_SHUTDOWN``)."""


class TMInterfaceProtocolError(TMInterfaceError):
    """The bytes received do not follow the protocol (unknown id, bad length, wrong message)."""


class Transport(Protocol):
    """What the client needs from a socket; ``socket.socket`` satisfies it."""

    def recv(self, bufsize: int, /) -> bytes: ...

    def sendall(self, data: bytes, /) -> None: ...

    def close(self) -> None: ...


def receive_error(exc: OSError | None, got: int, n: int, *, message_id: int | None,
                  expected: str) -> TMInterfaceError:
    """The error for a receive that failed with ``exc`` (None: the game closed the stream) after
    ``got`` of ``n`` bytes: :class:`TMInterfaceTimeout` for a timeout, else
    :class:`TMInterfaceConnectionClosed`."""
    if exc is None:
        return TMInterfaceConnectionClosed(f"connection closed by the game after {got} of {n} bytes",
                                           message_id=message_id, expected=expected)
    if isinstance(exc, socket.timeout):
        return TMInterfaceTimeout(f"timed out after receiving {got} of {n} bytes",
                                  message_id=message_id, expected=expected)
    return TMInterfaceConnectionClosed(f"socket error after {got} of {n} bytes: {exc}",
                                       message_id=message_id, expected=expected)


def recv_exactly(transport: Transport, n: int, *, message_id: int | None, expected: str) -> bytes:
    """Read exactly ``n`` bytes, looping on ``recv``.

    Raises:
        TMInterfaceTimeout: the transport's timeout expired before ``n`` bytes arrived.
        TMInterfaceConnectionClosed: the peer closed the stream (``recv`` returned ``b""``) or the
            socket failed.
    """
    if n == 0:
        return b""
    chunks: list[bytes] = []
    got = 0
    while got < n:
        try:
            chunk = transport.recv(min(n - got, 1 << 20))
        except OSError as exc:  # socket.timeout (TimeoutError on 3.10+) is one
            raise receive_error(exc, got, n, message_id=message_id, expected=expected) from exc
        if not chunk:
            raise receive_error(None, got, n, message_id=message_id, expected=expected)
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_int32(transport: Transport, *, message_id: int | None, what: str) -> int:
    """Read one little-endian int32 described as ``what`` (used in errors)."""
    return struct.unpack("<i", recv_exactly(transport, 4, message_id=message_id, expected=f"4 bytes: int32 {what}"))[0]


def read_length(transport: Transport, limit: int, *, message_id: int, what: str) -> int:
    """Read an int32 byte length and check ``0 <= length <= limit``."""
    length = read_int32(transport, message_id=message_id, what=f"{what} length")
    if length < 0 or length > limit:
        raise TMInterfaceProtocolError(
            f"invalid {what} length {length}", message_id=message_id, expected=f"a length in [0, {limit}]"
        )
    return length


def send_all(transport: Transport, data: bytes, *, message_id: int) -> None:
    """Write ``data``; socket errors and timeouts become :class:`TMInterfaceError`."""
    try:
        transport.sendall(data)
    except socket.timeout as exc:
        raise TMInterfaceTimeout("timed out while sending", message_id=message_id, expected="the game to read") from exc
    except OSError as exc:
        raise TMInterfaceConnectionClosed(
            f"socket error while sending: {exc}", message_id=message_id, expected="the game to read the command"
        ) from exc


def pack_header(message_id: MessageType) -> bytes:
    """The int32 id that starts every message."""
    return struct.pack("<i", int(message_id))


# ITU-R BT.601 luma weights in thousandths (0.299 R + 0.587 G + 0.114 B), as OpenCV's BGRA2GRAY.
_LUMA_B, _LUMA_G, _LUMA_R = 114, 587, 299


def bgra_to_gray(data: bytes | bytearray | memoryview | np.ndarray, width: int, height: int) -> np.ndarray:
    """Convert a BGRA frame (``width*height*4`` bytes, top row first) to grayscale ``(H, W)`` uint8.

    Uses the ITU-R 601 weights with rounding to nearest, vectorised over the whole frame.
    """
    expected = width * height * 4
    buf = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1)
    if buf.size != expected:
        raise ValueError(f"BGRA frame of {buf.size} bytes, expected {width}x{height}x4 = {expected}")
    px = buf.reshape(height, width, 4)
    gray = px[..., 0] * np.uint32(_LUMA_B)  # uint32 from here on, no copy of the whole frame
    gray += px[..., 1] * np.uint32(_LUMA_G)
    gray += px[..., 2] * np.uint32(_LUMA_R)
    gray += np.uint32(500)
    gray //= np.uint32(1000)
    return gray.astype(np.uint8)
