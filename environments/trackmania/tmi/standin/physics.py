"""The stand-in game's physics: the simulator's car and renderer, served to the C++ host.

The AngelScript host (``test_host/tmi_test_host.cpp`` with ``--physics``) runs this module in an
interpreter embedded in its own process (``--physics-transport embedded``: each request's bytes go to
:func:`embedded_answerer`'s function, which returns the reply's bytes) or starts it as a child process
and talks to it over stdin / stdout (``pipe``), with one compact binary message per request
(little-endian; every request gets exactly one reply, so the stream never loses its place):

======  ============================  ==========================================================
byte    request (after the byte)      reply
======  ============================  ==========================================================
``M``   u16 n + n bytes: map name     i32 n_checkpoints (finish included) or -1, then u16 n + error
``G``   nothing: race start           TICK reply (car at the start, race time 0)
``T``   u8 keys (1 up, 2 down,        TICK reply: i32 race time ms, i32 checkpoints passed
        4 left, 8 right)              (finish included), u8 finished
``S``   nothing                       i32 n + n bytes: the state blob (tmi/link/state.py offsets)
``R``   i32 n + n bytes: a blob       TICK reply (the car restored from the blob)
``F``   i32 W, i32 H                  W*H bytes: grayscale first-person frame, top row first
``C``   i32 camera number             u8 1 if known, else 0
``B``   u8 keys, u8 n: up to n ticks  u8 count + count TICK replies: the ticks run, the last one
        with the same keys            being the n-th or the first that passed a checkpoint or
                                      the finish (the host serves its next ticks from them)
``U``   u8 k: the host used only k    TICK reply: the car back at the start of the last ``B``,
        ticks of the last ``B``       then k of its ticks run again (inputs changed mid-batch)
======  ============================  ==========================================================

Maps are simulator tracks (:func:`environments.trackmania.tracks.get_track`: a built-in name, a
procedural seed or a reference-line ``.npy``). The car starts on the line with no jitter. The blob
is :func:`~environments.trackmania.tmi.link.state.encode_state` of exactly the
:class:`~environments.trackmania.backend.CarState` that :class:`~environments.trackmania.sim.backend.SimBackend`
reports for the car, plus the car's exact (float64) state in bytes 224-671 (the game's dyna history,
which rulka never reads), so a rewind restores the car bit for bit; the checkpoint times are read
from the blob's own arrays (a finish marked unreached, -1, is not finished).

``--trace FILE`` appends one line per state read and per frame (JSON: kind, race time, the exact car
state) for tests that compare the link with the simulator backend.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import operator
import struct
import sys
from collections.abc import Callable
from typing import BinaryIO

import numpy as np

from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.sim.backend import SimBackend, SimOptions
from environments.trackmania.sim.car import CarPhysics
from environments.trackmania.sim.render import Renderer
from environments.trackmania.backend import CarState
from environments.trackmania.tmi.link import state as blob
from environments.trackmania.tmi.link.materials import representative_material
from environments.trackmania.tmi.link.state import decode_checkpoints, encode_state
from environments.trackmania.tracks import get_track

#: Where the car's exact state lives in the blob (bytes the agent never reads), and its marker.
SNAPSHOT_OFFSET = 224
SNAPSHOT_MAGIC = 0x52554C4B  # "RULK"
#: CarPhysics scalars saved in a blob (ints and bools are exact in float64).
SNAPSHOT_SCALARS = (
    "idx", "x", "z", "y", "psi", "pitch", "u", "w", "vy", "r", "delta", "vx", "vz", "along", "gear", "rpm",
    "gearbox_state", "shift_timer", "since_shift", "turbo_timer", "airborne", "landing", "freewheeling",
    "time_ms", "lat", "s", "wall_hits",
)
SNAPSHOT_LISTS = ("surfaces", "sliding", "damper")  # 4 values each
_N_DOUBLES = len(SNAPSHOT_SCALARS) + 4 * len(SNAPSHOT_LISTS)
_SNAPSHOT = struct.Struct(f"<I{_N_DOUBLES}d")
assert SNAPSHOT_OFFSET + _SNAPSHOT.size <= 672  # stays before the dyna's current state
_INT_FIELDS = {"idx", "gear", "gearbox_state", "time_ms", "wall_hits"}
_BOOL_FIELDS = {"airborne", "freewheeling"}


_SCALARS = operator.attrgetter(*SNAPSHOT_SCALARS)
_LISTS = operator.attrgetter(*SNAPSHOT_LISTS)


def car_snapshot(car: CarPhysics) -> list[float]:
    """The car's exact state as floats (order: SNAPSHOT_SCALARS then SNAPSHOT_LISTS)."""
    values = [float(v) for v in _SCALARS(car)]
    for values_of_list in _LISTS(car):
        values.extend(float(v) for v in values_of_list)
    return values


class BlobEncoder:
    """:func:`~environments.trackmania.tmi.link.state.encode_state` of the SimBackend's CarState of a car,
    byte for byte, written straight from the car into a copy of a template (the constant fields,
    filled once per track) with one ``pack_into`` per field group: no CarState, no numpy per call.
    """

    _HEAD = struct.Struct("<i")
    _DYNA = struct.Struct("<4f9f3f3f12x3f")  # quaternion, rotation, position, speed, (12), angular speed
    _WHEEL = struct.Struct("<f108xiii")  # damper absorb (180), ground contact (292), material, sliding

    def __init__(self, n_gates: int) -> None:
        self.n_times = n_gates + 1  # the finish is the last checkpoint
        template = CarState(race_time_ms=0, position=np.zeros(3), rotation=np.eye(3),
                            linear_velocity=np.zeros(3), angular_velocity=np.zeros(3), gear=0, rpm=0.0,
                            gearbox_state=0, gear_change_counter=0.0, is_freewheeling=False,
                            wheel_damper_absorb=np.zeros(4, dtype=np.float32),
                            wheel_has_ground_contact=np.zeros(4, dtype=bool),
                            wheel_surface_group=np.zeros(4, dtype=np.int8),
                            wheel_is_sliding=np.zeros(4, dtype=bool), finished=False, checkpoint_times_ms=[])
        self.template = bytearray(encode_state(template, n_checkpoints=self.n_times))
        assert blob.OFF_ROTATION == blob.OFF_QUAT + 16 and blob.OFF_POSITION == blob.OFF_ROTATION + 36
        assert blob.OFF_LINEAR_SPEED == blob.OFF_POSITION + 12 and blob.OFF_ANGULAR_SPEED == blob.OFF_LINEAR_SPEED + 24
        self._cp_flags = blob.OFF_CP_DATA + 8
        self._cp_times = self._cp_flags + 4 * self.n_times + 4

    def encode(self, car: CarPhysics, times: list[int]) -> bytearray:
        """The blob of ``car`` with ``times`` the checkpoint times passed (finish included when finished)."""
        b = bytearray(self.template)
        sp, cp = math.sin(car.psi), math.cos(car.psi)
        st, ct = math.sin(car.pitch), math.cos(car.pitch)
        f0, f1, f2 = sp * ct, st, cp * ct
        l0, l1, l2 = cp, 0.0, -sp
        u0, u1, u2 = f1 * l2 - f2 * l1, f2 * l0 - f0 * l2, f0 * l1 - f1 * l0
        rot = (l0, u0, f0, l1, u1, f1, l2, u2, f2)
        self._DYNA.pack_into(b, blob.OFF_QUAT, *_quaternion(rot), *rot, car.x, car.y, car.z,
                             car.vx, car.vy, car.vz, 0.0, car.r, 0.0)
        race_time = int(car.time_ms)
        self._HEAD.pack_into(b, blob.OFF_TIMERS + 4, race_time)
        struct.pack_into("<i", b, blob.OFF_GEARBOX_STATE, int(car.gearbox_state))
        struct.pack_into("<f", b, blob.OFF_ACTUAL_RPM, float(car.rpm))
        struct.pack_into("<i", b, blob.OFF_GEAR, int(car.gear))
        struct.pack_into("<i", b, blob.OFF_IS_FREEWHEELING, int(bool(car.freewheeling)))
        contact = int(not car.airborne)
        damper, surfaces, sliding = car.damper, car.surfaces, car.sliding
        for i in range(blob.N_WHEELS):
            self._WHEEL.pack_into(b, blob.OFF_WHEELS + blob.WHEEL_SIZE * blob.WHEEL_BLOB_INDEX[i]
                                  + blob.WHEEL_DAMPER_ABSORB, float(damper[i]), contact,
                                  representative_material(int(surfaces[i])), int(bool(sliding[i])))
        struct.pack_into("<i", b, blob.OFF_RACE_TIME, race_time)
        struct.pack_into("<i", b, blob.OFF_CUR_CP_COUNT, len(times))
        struct.pack_into("<i", b, blob.OFF_RACE_FINISHED, int(bool(car.finished)))
        for i, t in enumerate(times):
            struct.pack_into("<i", b, self._cp_flags + 4 * i, 1)
            struct.pack_into("<i", b, self._cp_times + 8 * i, t)
        return b


def _quaternion(m: tuple[float, ...]) -> tuple[float, float, float, float]:
    """:func:`~environments.trackmania.tmi.link.state._rotation_to_quaternion` of the row-major 3x3 ``m``."""
    m00, m01, m02, m10, m11, m12, m20, m21, m22 = m
    tr = m00 + m11 + m22
    if tr > 0:
        s = 2.0 * math.sqrt(tr + 1.0)
        return (0.25 * s, (m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s)
    return blob._rotation_to_quaternion(np.array(m).reshape(3, 3))  # rare: the car upside down


def restore_snapshot(car: CarPhysics, values: list[float] | tuple[float, ...], checkpoint_times_ms: list[int],
                     n_gates: int) -> None:
    """Set ``car`` to the state :func:`car_snapshot` gave; checkpoints (finish last) from the blob."""
    for name, value in zip(SNAPSHOT_SCALARS, values):
        if name in _INT_FIELDS:
            value = int(value)
        elif name in _BOOL_FIELDS:
            value = bool(value)
        setattr(car, name, value)
    rest = list(values[len(SNAPSHOT_SCALARS):])
    car.surfaces[:] = [int(v) for v in rest[0:4]]
    car.sliding[:] = [bool(v) for v in rest[4:8]]
    car.damper[:] = [float(v) for v in rest[8:12]]
    gates = [t for t in checkpoint_times_ms[:n_gates] if t >= 0]
    car.checkpoint_times_ms = gates
    car.next_checkpoint = len(gates)
    car.finished = len(checkpoint_times_ms) > n_gates and checkpoint_times_ms[n_gates] >= 0


class StandinPhysics:
    """One simulated car on one simulator track, as the stand-in game's world."""

    def __init__(self, camera: int = 2, trace: BinaryIO | None = None) -> None:
        self.params = TrackManiaEnvironmentParameters()
        self.sim = SimBackend(self.params, SimOptions(render=False))
        self.camera = camera
        self.track = None
        self.renderers: dict[tuple[int, int, int], Renderer] = {}
        self.finish_time_ms: int | None = None
        self.trace = trace
        self.encoder: BlobEncoder | None = None
        self._batch_keys = 0
        self._batch_base: tuple | None = None

    # ------------------------------------------------------------------ requests
    def load(self, name: str) -> int:
        """Load the track ``name``; returns the checkpoint count the game reports (gates + finish)."""
        track = get_track(name)
        if track is not self.track:
            self.renderers.clear()  # they draw one track each
        self.sim.start_race(track, None)
        self.track = track
        self.race_start()
        return len(self.sim.car.geo.checkpoint_s) + 1

    def race_start(self) -> None:
        """The car stands at the start of the line (no jitter), race time 0."""
        self.sim.car.reset(0, 0.0, 0.0)
        self.finish_time_ms = None

    def tick(self, keys: int) -> None:
        """One 10 ms tick with the held keys (up = accelerate, down = brake, left, right)."""
        car = self.sim.car
        steer = (1 if keys & 4 else 0) - (1 if keys & 8 else 0)
        car.run(bool(keys & 1), bool(keys & 2), steer, 1)
        if car.finished and self.finish_time_ms is None:
            self.finish_time_ms = car.time_ms

    def tick_batch(self, keys: int, n: int) -> list[tuple[int, int, bool]]:
        """Up to ``n`` ticks with ``keys``; stops after a tick that passed a checkpoint or the finish.

        Returns (race time ms, checkpoints passed, finished) after each tick run. The car before the
        batch is kept for :meth:`undo_batch` (only when ``n`` > 1: a single tick is always used)."""
        car = self.sim.car
        self._batch_keys = keys
        self._batch_base = self._save() if n > 1 else None
        out = []
        passed, finished = self.checkpoints_passed(), car.finished
        for _ in range(n):
            self.tick(keys)
            now = self.checkpoints_passed()
            out.append((car.time_ms, now, car.finished))
            if now != passed or car.finished != finished:
                break
        return out

    def undo_batch(self, used: int) -> None:
        """Put the car where it was after the first ``used`` ticks of the last :meth:`tick_batch`."""
        if self._batch_base is None:
            raise ValueError("no batch of more than one tick to undo")
        self._load(self._batch_base)
        for _ in range(used):
            self.tick(self._batch_keys)

    def _save(self) -> tuple:
        car = self.sim.car
        gates = list(car.checkpoint_times_ms)
        times = gates + [-1] * (self.n_gates() - len(gates)) + [car.time_ms if car.finished else -1]
        return car_snapshot(car), times, self.finish_time_ms

    def _load(self, saved: tuple) -> None:
        values, times, finish_time_ms = saved
        restore_snapshot(self.sim.car, values, times, self.n_gates())
        self.finish_time_ms = finish_time_ms

    def checkpoints_passed(self) -> int:
        car = self.sim.car
        return len(car.checkpoint_times_ms) + (1 if car.finished else 0)

    def n_gates(self) -> int:
        return len(self.sim.car.geo.checkpoint_s)

    def state_blob(self) -> bytes:
        """The SimBackend's CarState of the car at the game's offsets, plus the exact snapshot."""
        car = self.sim.car
        times = list(car.checkpoint_times_ms)
        if car.finished:
            times.append(self.finish_time_ms if self.finish_time_ms is not None else car.time_ms)
        if self.encoder is None or self.encoder.n_times != self.n_gates() + 1:
            self.encoder = BlobEncoder(self.n_gates())
        data = self.encoder.encode(car, times)
        _SNAPSHOT.pack_into(data, SNAPSHOT_OFFSET, SNAPSHOT_MAGIC, *car_snapshot(car))
        self._trace("state")
        return bytes(data)

    def restore(self, blob: bytes) -> None:
        """Put the car in the state saved in ``blob`` (the checkpoint times as the blob has them)."""
        if len(blob) < SNAPSHOT_OFFSET + _SNAPSHOT.size:
            raise ValueError(f"state blob of {len(blob)} bytes has no stand-in car state")
        magic, *values = _SNAPSHOT.unpack_from(blob, SNAPSHOT_OFFSET)
        if magic != SNAPSHOT_MAGIC:
            raise ValueError("state blob was not saved by the stand-in game")
        _, times = decode_checkpoints(blob)
        restore_snapshot(self.sim.car, values, times, self.n_gates())
        finished = len(times) > self.n_gates() and times[self.n_gates()] >= 0
        self.finish_time_ms = times[self.n_gates()] if finished else None

    def frame(self, width: int, height: int) -> bytes:
        """The simulator's first-person grayscale frame at ``width`` x ``height``."""
        key = (width, height, self.camera)
        renderer = self.renderers.get(key)
        if renderer is None:
            renderer = self.renderers[key] = Renderer(self.track, height, width, self.camera)
        car = self.sim.car
        self._trace("frame")
        return renderer.render(car.x, car.z, car.psi).tobytes()

    def set_camera(self, camera: int) -> bool:
        from environments.trackmania.sim.render import CAMERAS

        if camera not in CAMERAS:
            return False
        if camera != self.camera:
            self.camera = camera
        return True

    def _trace(self, kind: str) -> None:
        if self.trace is None:
            return
        record = {"kind": kind, "track": self.track.name, "t": self.sim.car.time_ms,
                  "finished": bool(self.sim.car.finished), "camera": self.camera,
                  "checkpoints": list(self.sim.car.checkpoint_times_ms), "car": car_snapshot(self.sim.car)}
        self.trace.write((json.dumps(record) + "\n").encode())
        self.trace.flush()

    # ------------------------------------------------------------------ pipe
    def serve(self, inp: BinaryIO, out: BinaryIO) -> None:
        """Answer the host's requests until it closes the pipe."""
        def read(n: int) -> bytes:
            data = inp.read(n)
            if len(data) != n:
                raise EOFError
            return data

        def tick_reply() -> None:
            out.write(struct.pack("<iiB", self.sim.car.time_ms, self.checkpoints_passed(), self.sim.car.finished))

        tick = struct.Struct("<iiB")
        while True:
            try:
                op = read(1)
            except EOFError:
                return
            if op == b"T":
                keys = read(1)[0]
                self.tick(keys)
                car = self.sim.car
                out.write(tick.pack(car.time_ms, self.checkpoints_passed(), car.finished))
            elif op == b"S":
                blob = self.state_blob()
                out.write(struct.pack("<i", len(blob)) + blob)
            elif op == b"F":
                w, h = struct.unpack("<ii", read(8))
                out.write(self.frame(w, h))
            elif op == b"R":
                (n,) = struct.unpack("<i", read(4))
                blob = read(n)
                try:
                    self.restore(blob)
                except ValueError as exc:  # a blob from elsewhere: the car stays where it is
                    print(f"[physics] rewind refused: {exc}", file=sys.stderr)
                tick_reply()
            elif op == b"G":
                self.race_start()
                tick_reply()
            elif op == b"M":
                (n,) = struct.unpack("<H", read(2))
                name = read(n).decode("utf-8", "replace")
                try:
                    count = self.load(name)
                    error = b""
                except Exception as exc:  # noqa: BLE001 - any bad map name is reported to the host
                    count, error = -1, f"{type(exc).__name__}: {exc}".encode()[:60000]
                out.write(struct.pack("<iH", count, len(error)) + error)
            elif op == b"B":
                keys, n = read(2)
                replies = self.tick_batch(keys, max(1, n))
                out.write(bytes((len(replies),)) + b"".join(tick.pack(*r) for r in replies))
            elif op == b"U":
                self.undo_batch(read(1)[0])
                tick_reply()
            elif op == b"C":
                (camera,) = struct.unpack("<i", read(4))
                out.write(struct.pack("<B", self.set_camera(camera)))
            else:
                print(f"[physics] unknown request {op!r}", file=sys.stderr)
                return
            out.flush()


def embedded_answerer(camera: int = 2, trace: str | None = None) -> Callable[[bytes], bytes]:
    """The physics for a host that embeds this interpreter (``--physics-transport embedded``): a function
    that takes the bytes of one or more whole requests (the table above) and returns their replies, as
    the pipe would have carried them."""
    physics = StandinPhysics(camera, open(trace, "ab") if trace else None)  # noqa: SIM115 - open for the game's life

    def answer(requests: bytes) -> bytes:
        replies = io.BytesIO()
        physics.serve(io.BytesIO(requests), replies)
        return replies.getvalue()

    return answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--camera", type=int, default=2, help="first-person camera (game_camera_number)")
    parser.add_argument("--trace", default=None, help="append a JSON line per state read and frame to this file")
    args = parser.parse_args(argv)
    trace = open(args.trace, "ab") if args.trace else None  # noqa: SIM115 - kept open while serving
    try:
        StandinPhysics(args.camera, trace).serve(sys.stdin.buffer, sys.stdout.buffer)
    finally:
        if trace is not None:
            trace.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
