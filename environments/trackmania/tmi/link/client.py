"""Python side of the rulka link: reads the game's sync messages and sends commands.

One :class:`TMIClient` talks to one game instance over one TCP connection on 127.0.0.1. It is a
thin, strict layer: every read is exact-size with a timeout, every id and length is validated, and
every failure is a :class:`~.protocol.TMInterfaceError` naming the message and what was expected.
The rollout logic lives in :mod:`.game_instance_manager`.
"""
from __future__ import annotations

import math
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .protocol import (
    DEFAULT_HOST,
    MAX_FRAME_SIDE,
    MAX_STATE_BYTES,
    MAX_TEXT_BYTES,
    SYNC_MESSAGES,
    MessageType,
    TMInterfaceConnectionClosed,
    TMInterfaceError,
    TMInterfaceProtocolError,
    TMInterfaceTimeout,
    Transport,
    bgra_to_gray,
    pack_header,
    receive_error,
    send_all,
)

_I32 = struct.Struct("<i")
_I32_PAIR = struct.Struct("<ii")


class TMInterfaceConnectError(TMInterfaceError):
    """Nothing accepted a connection on the port within the time allowed."""


class _Reader:
    """Exact-size reads through one receive buffer: one ``recv_into`` usually brings a message's id
    and its payload (and what the game sent after it) instead of one ``recv`` per field.

    Reads ahead of the message being decoded; the client is the transport's only reader. A
    transport without ``recv_into`` (a test double) is read with ``recv``.
    """

    def __init__(self, transport: Transport, size: int = 1 << 16) -> None:
        self._transport = transport
        self._buf = bytearray(size)
        self._view = memoryview(self._buf)
        self._start = self._end = 0
        self._recv_into = getattr(transport, "recv_into", None)

    def _fill(self, target: memoryview, got: int, n: int, message_id: int | None, expected: str) -> int:
        """One receive into ``target``; returns the byte count (raises on timeout / close)."""
        try:
            if self._recv_into is not None:
                count = self._recv_into(target)
            else:
                chunk = self._transport.recv(min(len(target), 1 << 20))
                count = len(chunk)
                target[:count] = chunk
        except OSError as exc:  # socket.timeout (TimeoutError on 3.10+) is one
            raise receive_error(exc, got, n, message_id=message_id, expected=expected) from exc
        if not count:
            raise receive_error(None, got, n, message_id=message_id, expected=expected)
        return count

    def read(self, n: int, *, message_id: int | None, expected: str) -> bytes:
        """Exactly ``n`` bytes (a copy)."""
        if n <= len(self._buf):
            while self._end - self._start < n:
                if self._start and self._start + n > len(self._buf):  # keep the unread bytes, then room
                    left = self._end - self._start
                    self._buf[:left] = self._buf[self._start:self._end]
                    self._start, self._end = 0, left
                got = self._end - self._start
                self._end += self._fill(self._view[self._end:], got, n, message_id, expected)
            data = bytes(self._view[self._start:self._start + n])
            self._start += n
            if self._start == self._end:
                self._start = self._end = 0
            return data
        out = bytearray(n)
        self.read_into(memoryview(out), message_id=message_id, expected=expected)
        return bytes(out)

    def read_into(self, target: memoryview, *, message_id: int | None, expected: str) -> None:
        """Fill ``target`` exactly: buffered bytes first, then straight from the transport."""
        n = len(target)
        got = min(n, self._end - self._start)
        target[:got] = self._view[self._start:self._start + got]
        self._start += got
        if self._start == self._end:
            self._start = self._end = 0
        while got < n:
            got += self._fill(target[got:], got, n, message_id, expected)

    def int32(self, *, message_id: int | None, what: str) -> int:
        return _I32.unpack(self.read(4, message_id=message_id, expected=f"4 bytes: int32 {what}"))[0]

    def length(self, limit: int, *, message_id: int, what: str) -> int:
        """An int32 byte length, checked to be in ``[0, limit]``."""
        length = self.int32(message_id=message_id, what=f"{what} length")
        if length < 0 or length > limit:
            raise TMInterfaceProtocolError(
                f"invalid {what} length {length}", message_id=message_id, expected=f"a length in [0, {limit}]"
            )
        return length


@dataclass
class SyncMessage:
    """One game-to-client message; the game stays blocked until :meth:`TMIClient.respond`.

    Only the fields of its type are set: ``race_time_ms`` (id 1), ``current``/``target`` (ids 2, 3),
    ``frame`` (id 4, grayscale ``(H, W)`` uint8).
    """

    type: MessageType
    race_time_ms: int | None = None
    current: int | None = None
    target: int | None = None
    frame: np.ndarray | None = None


class TMIClient:
    """Speaks the protocol over a connected transport (a socket, or anything with recv/sendall).

    Args:
        transport: a connected stream; a ``socket.socket`` gets ``timeout_s`` and TCP_NODELAY.
        timeout_s: how long one read may wait for the game, seconds. ``None`` waits forever
            (never used by rulka itself).
    """

    def __init__(self, transport: Transport, *, timeout_s: float | None = 10.0) -> None:
        self._transport = transport
        self._reader = _Reader(transport)
        self._frame_size: tuple[int, int] | None = None  # (W, H) of the requested frame
        self._frame_bgra = np.empty(0, dtype=np.uint8)  # received frames land here (reused)
        self._pending = bytearray()  # commands of a batched() block, not sent yet
        self._batch_depth = 0
        self.timeout_s = timeout_s
        if isinstance(transport, socket.socket):
            transport.settimeout(timeout_s)
            if transport.family in (socket.AF_INET, socket.AF_INET6):
                transport.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # ------------------------------------------------------------------ connection
    @classmethod
    def connect(
        cls,
        port: int,
        *,
        host: str = DEFAULT_HOST,
        timeout_s: float | None = 10.0,
        connect_timeout_s: float = 5.0,
        retry_interval_s: float = 0.1,
    ) -> "TMIClient":
        """Connect to the plugin on ``host:port``, retrying while the port refuses connections.

        Raises:
            TMInterfaceConnectError: nothing accepted within ``connect_timeout_s`` seconds (the game
                is not running, or the plugin is not loaded / ``custom_port`` is not set).
        """
        deadline = time.monotonic() + connect_timeout_s
        last_error: OSError | None = None
        while True:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(max(0.05, min(2.0, deadline - time.monotonic())))
            try:
                sock.connect((host, port))
                return cls(sock, timeout_s=timeout_s)
            except OSError as exc:
                sock.close()
                last_error = exc
            if time.monotonic() >= deadline:
                raise TMInterfaceConnectError(
                    f"nothing accepted a connection on {host}:{port} within {connect_timeout_s:.1f} s "
                    f"({last_error}); is the game running with the rulka_link plugin and "
                    f"'set custom_port {port}'?",
                    expected="a listening TMInterface plugin",
                )
            time.sleep(retry_interval_s)

    def set_timeout(self, timeout_s: float | None) -> None:
        """Change how long reads wait for the game (seconds; ``None``: forever)."""
        self.timeout_s = timeout_s
        settimeout = getattr(self._transport, "settimeout", None)
        if settimeout is not None:
            settimeout(timeout_s)

    def close(self) -> None:
        """Close the transport without telling the game (see :meth:`shutdown`)."""
        try:
            self._transport.close()
        except OSError:
            pass

    # ------------------------------------------------------------------ game -> client
    def read_message(self) -> SyncMessage:
        """Block until the next sync message (ids 1-5) and decode its payload.

        Raises:
            TMInterfaceError: timeout, closed connection, an id that is not a sync message, or a
                frame that was never requested.
        """
        self.flush()
        reader = self._reader
        raw = reader.int32(message_id=None, what="message id (a game-to-client sync message, 1-5)")
        if raw not in SYNC_MESSAGES:
            raise TMInterfaceProtocolError(
                "received an id that is not a game-to-client sync message", message_id=raw, expected="an id in 1-5"
            )
        mtype = MessageType(raw)
        if mtype == MessageType.SC_RUN_STEP_SYNC:
            return SyncMessage(mtype, race_time_ms=reader.int32(message_id=raw, what="race_time_ms"))
        if mtype in (MessageType.SC_CHECKPOINT_COUNT_CHANGED_SYNC, MessageType.SC_LAP_COUNT_CHANGED_SYNC):
            current, target = _I32_PAIR.unpack(
                reader.read(8, message_id=raw, expected="8 bytes: int32 current, int32 target"))
            return SyncMessage(mtype, current=current, target=target)
        if mtype == MessageType.SC_REQUESTED_FRAME_SYNC:
            if self._frame_size is None:
                raise TMInterfaceProtocolError(
                    "received a frame that was never requested", message_id=raw, expected="C_REQUEST_FRAME first"
                )
            width, height = self._frame_size
            self._frame_size = None  # the plugin forgets the request once the frame is sent
            n = width * height * 4
            if self._frame_bgra.size != n:
                self._frame_bgra = np.empty(n, dtype=np.uint8)
            reader.read_into(memoryview(self._frame_bgra), message_id=raw,
                             expected=f"{n} bytes: BGRA frame {width}x{height}")
            return SyncMessage(mtype, frame=bgra_to_gray(self._frame_bgra, width, height))
        return SyncMessage(mtype)

    def respond(self, message_type: MessageType | int) -> None:
        """Echo a sync message id: the game resumes."""
        mtype = MessageType(message_type)
        if mtype not in SYNC_MESSAGES:
            raise ValueError(f"only sync messages (1-5) are echoed, not {mtype!r}")
        self._send(mtype)

    # ------------------------------------------------------------------ client -> game commands
    def _send(self, mtype: MessageType, payload: bytes = b"") -> None:
        if self._batch_depth:
            self._pending += pack_header(mtype)
            self._pending += payload
            return
        send_all(self._transport, pack_header(mtype) + payload, message_id=mtype)

    @contextmanager
    def batched(self) -> Iterator["TMIClient"]:
        """Send the commands and echoes written inside the block in one write (one TCP segment, one
        wake-up of the game instead of one per message). Whatever reads a reply inside the block sends
        what is pending first; the rest is sent when the block ends (dropped if it raises)."""
        self._batch_depth += 1
        try:
            yield self
        except BaseException:
            self._batch_depth -= 1
            if not self._batch_depth:
                self._pending.clear()
            raise
        self._batch_depth -= 1
        if not self._batch_depth:
            self.flush()

    def flush(self) -> None:
        """Send the commands a :meth:`batched` block has collected so far."""
        if self._pending:
            data = bytes(self._pending)
            self._pending.clear()
            send_all(self._transport, data, message_id=_I32.unpack_from(data)[0])

    def set_speed(self, speed: float) -> None:
        """Game speed multiplier; 0 freezes the simulation (the game still renders)."""
        if not math.isfinite(speed) or speed < 0:
            raise ValueError(f"speed must be finite and >= 0, got {speed}")
        self._send(MessageType.C_SET_SPEED, struct.pack("<f", speed))

    def rewind_to_state(self, state: bytes) -> None:
        """Restore a simulation state blob from :meth:`get_simulation_state`."""
        if len(state) > MAX_STATE_BYTES:
            raise ValueError(f"state of {len(state)} bytes exceeds {MAX_STATE_BYTES}")
        self._send(MessageType.C_REWIND_TO_STATE, struct.pack("<i", len(state)) + bytes(state))

    def rewind_to_current_state(self) -> None:
        """Rewind to the state the game is in (re-syncs what is rendered with the physics)."""
        self._send(MessageType.C_REWIND_TO_CURRENT_STATE)

    def get_simulation_state(self) -> bytes:
        """The raw ``SimulationState`` blob (decode it with :func:`.state.decode_state`)."""
        self.request_simulation_state()
        return self.read_simulation_state()

    def request_simulation_state(self) -> None:
        """Ask for the state blob without waiting for it: in a :meth:`batched` block, the commands
        after it travel in the same write, and :meth:`read_simulation_state` reads the reply later
        (the plugin answers commands in order, so the reply comes before anything sent after it)."""
        self._send(MessageType.C_GET_SIMULATION_STATE)

    def read_simulation_state(self) -> bytes:
        """The reply to :meth:`request_simulation_state`."""
        self.flush()
        mid = int(MessageType.C_GET_SIMULATION_STATE)
        n = self._reader.length(MAX_STATE_BYTES, message_id=mid, what="state")
        return self._reader.read(n, message_id=mid, expected=f"{n} bytes: state")

    def set_input_state(self, *, left: bool, right: bool, accelerate: bool, brake: bool) -> None:
        """Hold these keyboard inputs from now on."""
        self._send(MessageType.C_SET_INPUT_STATE, bytes((bool(left), bool(right), bool(accelerate), bool(brake))))

    def give_up(self) -> None:
        """Restart the race (with its countdown)."""
        self._send(MessageType.C_GIVE_UP)

    def prevent_simulation_finish(self) -> None:
        """Keep the game from entering the end-of-race screen after the finish line."""
        self._send(MessageType.C_PREVENT_SIMULATION_FINISH)

    def shutdown(self) -> None:
        """Tell the plugin to drop this client and listen again; then close the socket."""
        try:
            self._send(MessageType.C_SHUTDOWN)
        except TMInterfaceError:
            pass
        self.close()

    def execute_command(self, command: str) -> None:
        """Run a TMInterface console command (``map <path>``, ``set <var> <value>``...)."""
        data = command.encode("utf-8")
        if len(data) > MAX_TEXT_BYTES:
            raise ValueError(f"command of {len(data)} bytes exceeds {MAX_TEXT_BYTES}")
        self._send(MessageType.C_EXECUTE_COMMAND, struct.pack("<i", len(data)) + data)

    def set_plugin_timeout(self, timeout_ms: int) -> None:
        """How long the plugin waits for an echo before dropping this client, ms."""
        if not 0 < timeout_ms < 2**32:
            raise ValueError(f"timeout must be in (0, 2**32) ms, got {timeout_ms}")
        self._send(MessageType.C_SET_TIMEOUT, struct.pack("<I", timeout_ms))

    def race_finished(self) -> bool:
        """Whether the game considers the race finished."""
        self._send(MessageType.C_RACE_FINISHED)
        self.flush()
        value = self._reader.int32(message_id=MessageType.C_RACE_FINISHED, what="race_finished (0 or 1)")
        return value != 0

    def request_frame(self, width: int, height: int) -> None:
        """Ask for the next rendered frame at ``width`` x ``height`` (sent as id 4)."""
        if not (0 < width <= MAX_FRAME_SIDE and 0 < height <= MAX_FRAME_SIDE):
            raise ValueError(f"frame size {width}x{height} outside 1..{MAX_FRAME_SIDE}")
        self._send(MessageType.C_REQUEST_FRAME, struct.pack("<ii", width, height))
        self._frame_size = (width, height)

    def unrequest_frame(self) -> None:
        """Cancel a frame request."""
        self._send(MessageType.C_UNREQUEST_FRAME)
        self._frame_size = None

    @property
    def frame_requested(self) -> bool:
        """True between :meth:`request_frame` and the frame's arrival."""
        return self._frame_size is not None

    def reset_camera(self) -> None:
        """Put the camera back behind the car."""
        self._send(MessageType.C_RESET_CAMERA)

    def set_on_step_period(self, period_ms: int) -> None:
        """Send ``SC_RUN_STEP_SYNC`` only when race time is a multiple of ``period_ms``."""
        if period_ms <= 0 or period_ms % 10:
            raise ValueError(f"period must be a positive multiple of 10 ms, got {period_ms}")
        self._send(MessageType.C_SET_ON_STEP_PERIOD, struct.pack("<i", period_ms))

    def toggle_interface(self, visible: bool) -> None:
        """Show (True) or hide (False) the race HUD."""
        self._send(MessageType.C_TOGGLE_INTERFACE, struct.pack("<i", int(bool(visible))))

    def is_in_menus(self) -> bool:
        """Whether the game shows its menus (no map loaded)."""
        self._send(MessageType.C_IS_IN_MENUS)
        self.flush()
        return self._reader.int32(message_id=MessageType.C_IS_IN_MENUS, what="in_menus (0 or 1)") != 0

    def get_inputs(self) -> str:
        """The inputs of the current race in TMInterface script format."""
        self._send(MessageType.C_GET_INPUTS)
        self.flush()
        mid = int(MessageType.C_GET_INPUTS)
        n = self._reader.length(MAX_TEXT_BYTES, message_id=mid, what="inputs text")
        data = self._reader.read(n, message_id=mid, expected=f"{n} bytes: UTF-8 inputs text")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TMInterfaceProtocolError("inputs text is not UTF-8", message_id=mid, expected="UTF-8 text") from exc


__all__ = [
    "SyncMessage",
    "TMIClient",
    "TMInterfaceConnectError",
    "TMInterfaceConnectionClosed",
    "TMInterfaceError",
    "TMInterfaceProtocolError",
    "TMInterfaceTimeout",
]
