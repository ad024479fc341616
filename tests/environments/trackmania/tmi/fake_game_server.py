"""A fake TrackMania game that speaks rulka's TMInterface protocol exactly, for tests.

It plays the role of the game plus the rulka_link plugin: listens on 127.0.0.1 (port 0, i.e.
ephemeral), sends the blocking sync messages (ids 1-5) and waits for their echo while serving the
client's commands (ids 6-23), drops the client after its own timeout (default 2000 ms, id 15),
answers with state blobs from :func:`encode_state`, BGRA frames, checkpoint and finish messages.

Behind it, a toy car on a straight line: accelerate pushes it along +z, brake slows it; the
checkpoints are distances along z, the last one is the finish. :func:`save_straight_line` writes the
matching reference line (x = 0, y = 0, z from 0, 0.5 m apart) for runs through ``TrackManiaEnv``.

Faults for tests: ``hang_at_ms`` (the game freezes at that race time: the socket stays open, nothing
more is sent), ``drop_at_ms`` (the connection is closed at that race time; the server listens
again), ``behaviour="silent"`` (accepts and never speaks), ``behaviour="raw"`` (sends ``raw_bytes``
and closes). Each fault fires once. The server stops by itself after ``max_lifetime_s``.

As in the game (and the plugin test host), ``PreventSimulationFinish`` does nothing in a normal race
unless ``prevent_finish_works=True``: a finish that is not undone (by rewinding, inside the finish's
checkpoint message, to a state whose last checkpoint time is -1) ends the race, and the game then
runs no more simulation steps. ``speeds`` records every speed the client set.

A server object is also a ``GameProcess`` (``port``, ``is_alive()``, ``terminate()``), so a test
launcher can simply return a new server.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from environments.trackmania.backend import CarState
from environments.trackmania.tmi.link.protocol import MessageType as M
from environments.trackmania.tmi.link.state import decode_state, encode_state

_MAX_PAYLOAD = 1 << 20


def straight_line(length_m: float, spacing_m: float = 0.5) -> np.ndarray:
    """The toy car's reference line: (N, 3) points x = 0, y = 0, z = 0 .. length_m."""
    z = np.arange(0.0, length_m + spacing_m / 2, spacing_m)
    return np.stack([np.zeros_like(z), np.zeros_like(z), z], axis=1)


def save_straight_line(path: str | Path, length_m: float) -> Path:
    """Save :func:`straight_line` as a reference-line ``.npy`` and return its path."""
    path = Path(path)
    np.save(path, straight_line(length_m))
    return path


class _Dropped(Exception):
    """The client is gone (timeout, closed, shutdown, protocol error)."""


@dataclass
class _Car:
    race_time: int = 0
    tick_time: int = 0
    z: float = 0.0
    x: float = 0.0
    v: float = 0.0
    finished: bool = False
    cp_times: list[int] = field(default_factory=list)
    next_cp: int = 0


class FakeGameServer:
    """See the module docstring. Use as a context manager or call :meth:`terminate`."""

    def __init__(
        self,
        *,
        checkpoints: tuple[float, ...] = (10.0, 25.0),
        countdown_ms: int = 200,
        startup_ms: int = 0,
        hang_at_ms: int | None = None,
        drop_at_ms: int | None = None,
        behaviour: str = "normal",
        raw_bytes: bytes = b"",
        max_lifetime_s: float = 30.0,
        prevent_finish_works: bool = False,
    ) -> None:
        self.checkpoints = tuple(float(c) for c in checkpoints)
        self.countdown_ms = countdown_ms
        self.startup_ms = startup_ms
        self.hang_at_ms = hang_at_ms
        self.drop_at_ms = drop_at_ms
        self.behaviour = behaviour
        self.raw_bytes = raw_bytes
        self.max_lifetime_s = max_lifetime_s
        self.prevent_finish_works = prevent_finish_works
        # observable by tests
        self.commands: list[str] = []
        self.connections = 0
        self.drops: list[str] = []
        self.frames_sent = 0
        self.rewinds = 0
        self.start_rewinds = 0  # rewinds to a state at race time 0 or earlier (a new race)
        self.give_ups = 0
        self.speeds: list[float] = []
        self.input_commands = 0
        self.races_ended = 0  # finishes that nothing undid (end screen)
        # game state
        self.in_menus = True
        self.in_race = False
        self.map: str | None = None
        self.speed = 1.0
        self.keys = [False, False, False, False]  # left, right, up, down
        self.car = _Car()
        self.prevent_finish = False
        self.inputs_text = ""
        # plugin state
        self.timeout_ms = 2000
        self.step_period = 10
        self.frame_size: tuple[int, int] | None = None
        self._client: socket.socket | None = None
        self._silent_sockets: list[socket.socket] = []
        self._stop = threading.Event()
        self._hung = False
        self._frozen = False
        #: seconds a later connection waits for its SC_ON_CONNECT_SYNC (the plugin still waiting out its
        #: timeout on the client before, as rulka_link does)
        self.reconnect_delay_s = 0.0
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(4)
        self._listener.settimeout(0.02)
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._run, name=f"fake-game-{self.port}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ GameProcess
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def freeze(self) -> None:
        """Stop the game where it is, as SIGSTOP does: nothing more is read or sent, nothing times out."""
        self._frozen = True

    def terminate(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def __enter__(self) -> "FakeGameServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate()

    # ------------------------------------------------------------------ main loop
    def _run(self) -> None:
        deadline = time.monotonic() + self.max_lifetime_s
        started = time.monotonic()
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                if self._hung or self._frozen:
                    time.sleep(0.01)
                    continue
                if self._client is None:
                    self._accept(startup_over=(time.monotonic() - started) * 1000 >= self.startup_ms)
                    continue
                try:
                    if self.in_race and self.speed > 0:
                        for _ in range(max(1, round(self.speed))):
                            self._tick()
                            if self._client is None or self._hung:
                                break
                    else:
                        time.sleep(0.0005)
                    self._render()
                except _Dropped as exc:
                    self._drop(str(exc))
        finally:
            self._drop("server stopped")
            self._listener.close()
            for sock in self._silent_sockets:
                sock.close()

    def _accept(self, startup_over: bool) -> None:
        if not startup_over:
            time.sleep(0.005)
            return
        try:
            sock, _ = self._listener.accept()
        except (socket.timeout, OSError):
            return
        self.connections += 1
        if self.behaviour == "silent":
            self._silent_sockets.append(sock)  # open, accepted, never spoken to
            return
        if self.behaviour == "raw":
            try:
                sock.sendall(self.raw_bytes)
            finally:
                sock.close()
            return
        sock.settimeout(0.05)
        self._client = sock
        if self.connections > 1:
            time.sleep(self.reconnect_delay_s)
        try:
            self._send(struct.pack("<i", M.SC_ON_CONNECT_SYNC))
            self._wait_for(M.SC_ON_CONNECT_SYNC)
        except _Dropped as exc:
            self._drop(str(exc))

    def _drop(self, why: str) -> None:
        if self._client is not None:
            self.drops.append(why)
            try:
                self._client.close()
            except OSError:
                pass
        self._client = None
        self.timeout_ms = 2000
        self.step_period = 10
        self.frame_size = None

    # ------------------------------------------------------------------ I/O
    def _send(self, data: bytes) -> None:
        assert self._client is not None
        try:
            self._client.sendall(data)
        except OSError as exc:
            raise _Dropped(f"send failed: {exc}") from exc

    def _recv_exact(self, n: int, deadline: float) -> bytes:
        assert self._client is not None
        buf = b""
        while len(buf) < n:
            if self._stop.is_set():
                raise _Dropped("server stopping")
            if self._frozen:
                time.sleep(0.01)
                continue
            if time.monotonic() > deadline:
                raise _Dropped(f"no reply within {self.timeout_ms} ms")
            try:
                chunk = self._client.recv(n - len(buf))
            except socket.timeout:
                continue
            except OSError as exc:
                raise _Dropped(f"recv failed: {exc}") from exc
            if not chunk:
                raise _Dropped("client closed the connection")
            buf += chunk
        while self._frozen and not self._stop.is_set():  # frozen while it waited in recv: a stopped game reads
            time.sleep(0.01)                              # nothing, so what came is handled only once it runs
        return buf

    def _wait_for(self, sync_id: int) -> None:
        """Block (the game is frozen) until the client echoes ``sync_id``; serve its commands."""
        while True:
            deadline = time.monotonic() + self.timeout_ms / 1000.0
            (mid,) = struct.unpack("<i", self._recv_exact(4, deadline))
            if mid == sync_id:
                return
            self._serve(mid, deadline)

    def _serve(self, mid: int, deadline: float) -> None:
        def i32() -> int:
            return struct.unpack("<i", self._recv_exact(4, deadline))[0]

        if M.SC_RUN_STEP_SYNC <= mid <= M.SC_ON_CONNECT_SYNC:
            return  # an echo of something else: ignored, like the plugin
        if mid == M.C_SET_SPEED:
            self.speed = max(0.0, struct.unpack("<f", self._recv_exact(4, deadline))[0])
            self.speeds.append(self.speed)
        elif mid == M.C_REWIND_TO_STATE:
            n = i32()
            if not 0 <= n <= _MAX_PAYLOAD:
                raise _Dropped(f"invalid state length {n}")
            blob = self._recv_exact(n, deadline)
            if self.in_race:
                car = decode_state(blob)
                self.car = _Car(car.race_time_ms, car.race_time_ms, float(car.position[2]), float(car.position[0]),
                                float(car.linear_velocity[2]), False, list(car.checkpoint_times_ms),
                                len(car.checkpoint_times_ms))
                self.rewinds += 1
                self.start_rewinds += int(car.race_time_ms <= 0)
                self.inputs_text = ""
        elif mid == M.C_REWIND_TO_CURRENT_STATE:
            pass
        elif mid == M.C_GET_SIMULATION_STATE:
            blob = self._state_blob()
            self._send(struct.pack("<i", len(blob)) + blob)
        elif mid == M.C_SET_INPUT_STATE:
            keys = [b > 0 for b in self._recv_exact(4, deadline)]
            self.input_commands += 1
            if self.in_race:
                for name, old, new in zip(("left", "right", "up", "down"), self.keys, keys):
                    if old != new:
                        t = max(0, self.car.race_time)
                        self.inputs_text += f"{t // 1000}.{(t % 1000) // 10:02d} {'press' if new else 'rel'} {name}\n"
                self.keys = keys
        elif mid == M.C_GIVE_UP:
            if self.in_race:
                self._reset_car()
                self.give_ups += 1
        elif mid == M.C_PREVENT_SIMULATION_FINISH:
            self.prevent_finish = True
        elif mid == M.C_SHUTDOWN:
            raise _Dropped("client shut down")
        elif mid == M.C_EXECUTE_COMMAND:
            n = i32()
            if not 0 <= n <= _MAX_PAYLOAD:
                raise _Dropped(f"invalid command length {n}")
            self._execute(self._recv_exact(n, deadline).decode("utf-8", "replace"))
        elif mid == M.C_SET_TIMEOUT:
            self.timeout_ms = struct.unpack("<I", self._recv_exact(4, deadline))[0]
        elif mid == M.C_RACE_FINISHED:
            self._send(struct.pack("<i", int(self.car.finished)))
        elif mid == M.C_REQUEST_FRAME:
            w, h = i32(), i32()
            if not (0 < w <= 4096 and 0 < h <= 4096):
                raise _Dropped(f"invalid frame size {w}x{h}")
            self.frame_size = (w, h)
        elif mid == M.C_RESET_CAMERA:
            pass
        elif mid == M.C_SET_ON_STEP_PERIOD:
            p = i32()
            self.step_period = p if p > 0 else 10
        elif mid == M.C_UNREQUEST_FRAME:
            self.frame_size = None
        elif mid == M.C_TOGGLE_INTERFACE:
            i32()
        elif mid == M.C_IS_IN_MENUS:
            self._send(struct.pack("<i", int(self.in_menus)))
        elif mid == M.C_GET_INPUTS:
            data = self.inputs_text.encode()
            self._send(struct.pack("<i", len(data)) + data)
        else:
            raise _Dropped(f"unknown message id {mid}")

    def _execute(self, command: str) -> None:
        self.commands.append(command)
        parts = command.split(maxsplit=1)
        if parts and parts[0] == "map" and len(parts) == 2:
            self.map = parts[1].strip().strip('"')
            self.in_menus = False
            self.in_race = True
            self._reset_car()

    # ------------------------------------------------------------------ the toy game
    def _reset_car(self) -> None:
        self.car = _Car(race_time=-self.countdown_ms, tick_time=-self.countdown_ms)
        self.prevent_finish = False

    def _state_blob(self) -> bytes:
        c = self.car
        state = CarState(
            race_time_ms=c.race_time,
            position=np.array([c.x, 0.0, c.z]),
            rotation=np.eye(3),
            linear_velocity=np.array([0.0, 0.0, c.v]),
            angular_velocity=np.zeros(3),
            gear=1 + min(4, int(c.v // 12)),
            rpm=1000.0 + 250.0 * (c.v % 12),
            gearbox_state=0,
            gear_change_counter=0.0,
            is_freewheeling=not self.keys[2],
            wheel_damper_absorb=np.full(4, 0.01, dtype=np.float32),
            wheel_has_ground_contact=np.ones(4, dtype=bool),
            wheel_surface_group=np.zeros(4, dtype=np.int8),
            wheel_is_sliding=np.zeros(4, dtype=bool),
            finished=c.finished,
            checkpoint_times_ms=list(c.cp_times),
        )
        return encode_state(state, n_checkpoints=len(self.checkpoints))

    def _fault(self, t: int) -> None:
        if self.hang_at_ms is not None and t >= self.hang_at_ms:
            self.hang_at_ms = None
            self._hung = True  # frozen: the socket stays open, nothing more is sent or read
        elif self.drop_at_ms is not None and t >= self.drop_at_ms:
            self.drop_at_ms = None
            raise _Dropped("fault injection: connection dropped")

    def _tick(self) -> None:
        """One 10 ms game tick: RUN_STEP (sync when due), physics, checkpoints."""
        c = self.car
        self._fault(c.race_time)
        if self._hung:
            return
        if c.race_time % self.step_period == 0 or c.tick_time > c.race_time:
            self._send(struct.pack("<ii", M.SC_RUN_STEP_SYNC, c.race_time))
            self._wait_for(M.SC_RUN_STEP_SYNC)
        c = self.car  # a rewind replaces the car
        if c.race_time >= 0:
            a = -0.01 * c.v + (12.0 if self.keys[2] else 0.0) - (20.0 if self.keys[3] and c.v > 0 else 0.0)
            c.v = max(0.0, c.v + a * 0.01)
            c.z += c.v * 0.01
            c.x += (0.05 if self.keys[0] else 0.0) * c.v * 0.01 - (0.05 if self.keys[1] else 0.0) * c.v * 0.01
        if not c.finished:
            c.race_time += 10
        c.tick_time += 10
        if not c.finished and c.next_cp < len(self.checkpoints) and c.z >= self.checkpoints[c.next_cp]:
            c.next_cp += 1
            c.cp_times.append(c.race_time)
            current, target = len(c.cp_times), len(self.checkpoints)
            self.prevent_finish = False
            self._send(struct.pack("<iii", M.SC_CHECKPOINT_COUNT_CHANGED_SYNC, current, target))
            self._wait_for(M.SC_CHECKPOINT_COUNT_CHANGED_SYNC)
            c = self.car  # a rewind inside the message replaces the car
            if current == target and len(c.cp_times) == target:
                if self.prevent_finish and self.prevent_finish_works:
                    c.cp_times.pop()
                    c.next_cp = len(c.cp_times)
                else:
                    c.finished = True
                    self.in_race = False  # end screen: no more simulation steps
                    self.races_ended += 1

    def _render(self) -> None:
        """One rendered frame: send the requested screenshot, if any, and wait for its echo."""
        if self._client is None or self.frame_size is None:
            return
        w, h = self.frame_size
        self.frame_size = None
        self._send(struct.pack("<i", M.SC_REQUESTED_FRAME_SYNC) + self.frame_bgra(w, h))
        self.frames_sent += 1
        self._wait_for(M.SC_REQUESTED_FRAME_SYNC)

    def frame_bgra(self, w: int, h: int) -> bytes:
        """The BGRA screenshot of the toy world (rows scroll with z)."""
        rows = (np.arange(h)[:, None] + int(self.car.z * 8)) & 0xFF
        cols = (np.arange(w)[None, :] * 2) & 0xFF
        img = np.empty((h, w, 4), dtype=np.uint8)
        img[..., 0] = rows
        img[..., 1] = cols
        img[..., 2] = int(self.car.v * 4) & 0xFF
        img[..., 3] = 255
        return img.tobytes()
