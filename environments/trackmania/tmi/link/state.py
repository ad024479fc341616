"""Decode (and encode) TMInterface's simulation-state blob into our :class:`CarState`.

The blob is TMInterface 2's ``SimulationState`` as returned by ``SimulationManager.SaveState()
.ToArray()`` (the plugin's reply to ``C_GET_SIMULATION_STATE``); the Python ``tminterface``
package calls the same bytes ``SimStateData``. Offsets below come from that package's
``structs.py``/``constants.py`` (donadigo/TMInterfaceClientPython) cross-checked against a
byte-annotated AngelScript introspection of the same struct; we read only what the agent needs.

Byte layout (little-endian; f32 = float32, i32 = int32, b32 = 4-byte bool):

==========  =====  ==========================================================================
offset      size   field
==========  =====  ==========================================================================
0           4      u32 version
4           4      u32 context_mode (1 = run)
8           4      u32 flags (SIM_HAS_* bits; 0xFF when every buffer is present)
12          212    53 x i32 timers
224         1424   dyna (HmsDynaStruct); its ``current_state`` starts at 224 + 448 = 672:
672         16       4 x f32 quaternion
688         36       3x3 f32 rotation, row-major; its columns are the car's axes in world
724         12       3 x f32 position (m)
736         12       3 x f32 linear speed (m/s, world)
760         12       3 x f32 angular speed (rad/s, world)
1648        2168   scene_mobil (SceneVehicleCar):
2388        4        i32 gearbox_state (1648 + 740)
3112        4        f32 engine.actual_rpm (1648 + 1436 + 28)
3128        4        i32 engine.gear (1648 + 1436 + 44)
3196        4        b32 is_freewheeling (1648 + 1548)
3816        3056   4 wheels x 764 bytes (SimulationWheel), wheel i at 3816 + 764 i:
+4          4        b32 steerable
+168        12       3 x f32 offset_from_vehicle (car frame; x points to the car's left)
+180        4        f32 real_time_state.damper_absorb (m)
+292        4        b32 real_time_state.has_ground_contact
+296        4        i32 real_time_state.contact_material_id (low 16 bits: see materials.py)
+300        4        b32 real_time_state.is_sliding
6872        68     plug_solid
6940        264    cmd_buffer_core
7204        952    player_info:
7892        4        i32 race_time (ms; 7204 + 688)
8024        4        i32 cur_cp_count (7204 + 820)
8032        4        b32 race_finished (7204 + 828)
8156        120    10 cached inputs x (i32 time, 8-byte event)
8276        64     8 input events x 8 bytes
8340        4      u32 num_respawns
8344        ...    checkpoint data: i32 reserved, i32 n_states, n_states x b32,
                   i32 n_times, n_times x (i32 time, i32 stunts_score); time -1 = not yet passed
==========  =====  ==========================================================================

Wheel order. The TMInterface 2 API declares ``SimulationWheels`` as front-left, front-right,
back-right, back-left (``get_FrontLeft``, ``get_FrontRight``, ``get_BackRight``, ``get_BackLeft``;
sashi0034/angel-lsp, ``examples/Trackmania Nations Forever/as.predefined``), and the blob stores the
wheels in that order. ``CarState`` and the simulator use front-left, front-right, rear-left,
rear-right (:data:`~..backend.N_WHEELS`), so decoding reads blob wheels ``WHEEL_BLOB_INDEX`` =
(0, 1, 3, 2) and encoding writes them back there. :func:`check_wheel_order` checks a blob against
that order with each wheel's steerable flag (the front wheels steer) and, when the blob has them,
the sides of the wheels' offsets from the car; the manager runs it on the first state of each launch.
"""
from __future__ import annotations

import struct

import numpy as np

from ...backend import N_WHEELS, CarState
from .materials import representative_material, surface_groups
from .protocol import MessageType, TMInterfaceProtocolError

# --- offsets (bytes from the start of the blob) ---
OFF_VERSION = 0
OFF_CONTEXT_MODE = 4
OFF_FLAGS = 8
OFF_TIMERS = 12
OFF_DYNA = 224
OFF_DYNA_CURRENT = OFF_DYNA + 448  # 672
OFF_QUAT = OFF_DYNA_CURRENT + 0  # 672
OFF_ROTATION = OFF_DYNA_CURRENT + 16  # 688
OFF_POSITION = OFF_DYNA_CURRENT + 52  # 724
OFF_LINEAR_SPEED = OFF_DYNA_CURRENT + 64  # 736
OFF_ANGULAR_SPEED = OFF_DYNA_CURRENT + 88  # 760
OFF_SCENE_MOBIL = 1648
OFF_GEARBOX_STATE = OFF_SCENE_MOBIL + 740  # 2388
OFF_ENGINE = OFF_SCENE_MOBIL + 1436  # 3084
OFF_ACTUAL_RPM = OFF_ENGINE + 28  # 3112
OFF_GEAR = OFF_ENGINE + 44  # 3128
OFF_IS_FREEWHEELING = OFF_SCENE_MOBIL + 1548  # 3196
OFF_WHEELS = 3816
WHEEL_SIZE = 764
WHEEL_STEERABLE = 4
WHEEL_OFFSET_FROM_VEHICLE = 168
WHEEL_DAMPER_ABSORB = 180
WHEEL_HAS_GROUND_CONTACT = 292
WHEEL_CONTACT_MATERIAL = 296
WHEEL_IS_SLIDING = 300
OFF_PLAYER_INFO = 7204
OFF_RACE_TIME = OFF_PLAYER_INFO + 688  # 7892
OFF_CUR_CP_COUNT = OFF_PLAYER_INFO + 820  # 8024
OFF_RACE_FINISHED = OFF_PLAYER_INFO + 828  # 8032
OFF_CP_DATA = 8344
#: Size of the fixed part (everything before the checkpoint arrays' lengths).
FIXED_SIZE = OFF_CP_DATA
#: Smallest valid blob: fixed part + reserved + n_states + n_times, with no checkpoints.
MIN_STATE_SIZE = FIXED_SIZE + 12
#: Refuse checkpoint counts above this (no TMNF map comes close).
MAX_CHECKPOINTS = 10_000

#: Blob wheel index of CarState wheel i (CarState: FL, FR, RL, RR; blob: FL, FR, BR, BL).
WHEEL_BLOB_INDEX = (0, 1, 3, 2)
#: Illustrative offsets from the car (x left, y up, z forward), metres, written by :func:`encode_state`.
_WHEEL_OFFSETS = ((0.8, 0.0, 1.4), (-0.8, 0.0, 1.4), (0.8, 0.0, -1.2), (-0.8, 0.0, -1.2))

SIM_HAS_ALL = 0xFF  # timers | dyna | scene_mobil | wheels | plug_solid | cmd_buffer | inputs | player_info
MODE_RUN = 1

_WHEEL_ORDER = np.array(WHEEL_BLOB_INDEX)
assert WHEEL_CONTACT_MATERIAL == WHEEL_HAS_GROUND_CONTACT + 4 and WHEEL_IS_SLIDING == WHEEL_CONTACT_MATERIAL + 4
_F3 = struct.Struct("<3f")
_F9 = struct.Struct("<9f")
_I32 = struct.Struct("<i")
_F32 = struct.Struct("<f")


class StateDecodeError(TMInterfaceProtocolError):
    """The state blob is too short or its checkpoint arrays are inconsistent."""

    def __init__(self, detail: str, expected: str) -> None:
        super().__init__(detail, message_id=MessageType.C_GET_SIMULATION_STATE, expected=expected)


def decode_checkpoints(blob: bytes) -> tuple[list[bool], list[int]]:
    """The checkpoint arrays: (passed flag per real checkpoint, time per logical checkpoint, ms).

    Times of checkpoints not yet passed are -1.
    """
    if len(blob) < MIN_STATE_SIZE:
        raise StateDecodeError(f"state blob of {len(blob)} bytes", f"at least {MIN_STATE_SIZE} bytes")
    n_states = _I32.unpack_from(blob, OFF_CP_DATA + 4)[0]
    if not 0 <= n_states <= MAX_CHECKPOINTS:
        raise StateDecodeError(f"checkpoint state count {n_states}", f"0..{MAX_CHECKPOINTS}")
    off = OFF_CP_DATA + 8
    if len(blob) < off + 4 * n_states + 4:
        raise StateDecodeError(f"state blob of {len(blob)} bytes", f"{n_states} checkpoint states and a time count")
    states = [bool(v) for v in np.frombuffer(blob, dtype="<i4", count=n_states, offset=off)]
    off += 4 * n_states
    n_times = _I32.unpack_from(blob, off)[0]
    if not 0 <= n_times <= MAX_CHECKPOINTS:
        raise StateDecodeError(f"checkpoint time count {n_times}", f"0..{MAX_CHECKPOINTS}")
    off += 4
    if len(blob) < off + 8 * n_times:
        raise StateDecodeError(f"state blob of {len(blob)} bytes", f"{n_times} checkpoint times of 8 bytes")
    times = np.frombuffer(blob, dtype="<i4", count=2 * n_times, offset=off)[0::2]
    return states, [int(t) for t in times]


def decode_state(blob: bytes) -> CarState:
    """Decode a simulation-state blob into a :class:`CarState` (float64 vectors).

    ``finished`` is the game's ``race_finished`` flag; rulka's manager sets it from the checkpoint
    messages instead, because it keeps the game from finishing. ``gear_change_counter`` is 0: it
    counts steps across states and is kept by the backend. ``checkpoint_times_ms`` lists the times
    of the logical checkpoints passed so far, in order.

    Raises:
        StateDecodeError: the blob is too short or malformed.
    """
    blob = bytes(blob)
    _, cp_times = decode_checkpoints(blob)
    # One strided view per wheel field (blob wheel order), then the API order of CarState.
    damper = np.ndarray((N_WHEELS,), "<f4", blob, OFF_WHEELS + WHEEL_DAMPER_ABSORB, (WHEEL_SIZE,))[_WHEEL_ORDER]
    flags = np.ndarray((N_WHEELS, 3), "<i4", blob, OFF_WHEELS + WHEEL_HAS_GROUND_CONTACT, (WHEEL_SIZE, 4))[_WHEEL_ORDER]
    contact = flags[:, 0] != 0
    material = flags[:, 1].astype(np.int64)
    sliding = flags[:, 2] != 0
    passed: list[int] = []
    for t in cp_times:
        if t < 0:
            break
        passed.append(t)
    return CarState(
        race_time_ms=_I32.unpack_from(blob, OFF_RACE_TIME)[0],
        position=np.array(_F3.unpack_from(blob, OFF_POSITION), dtype=np.float64),
        rotation=np.array(_F9.unpack_from(blob, OFF_ROTATION), dtype=np.float64).reshape(3, 3),
        linear_velocity=np.array(_F3.unpack_from(blob, OFF_LINEAR_SPEED), dtype=np.float64),
        angular_velocity=np.array(_F3.unpack_from(blob, OFF_ANGULAR_SPEED), dtype=np.float64),
        gear=_I32.unpack_from(blob, OFF_GEAR)[0],
        rpm=float(_F32.unpack_from(blob, OFF_ACTUAL_RPM)[0]),
        gearbox_state=_I32.unpack_from(blob, OFF_GEARBOX_STATE)[0],
        gear_change_counter=0.0,
        is_freewheeling=_I32.unpack_from(blob, OFF_IS_FREEWHEELING)[0] != 0,
        wheel_damper_absorb=damper,
        wheel_has_ground_contact=contact,
        wheel_surface_group=surface_groups(material),
        wheel_is_sliding=sliding,
        finished=_I32.unpack_from(blob, OFF_RACE_FINISHED)[0] != 0,
        checkpoint_times_ms=passed,
    )


def check_wheel_order(blob: bytes) -> str | None:
    """``None`` if the blob's wheels are in the API's order (FL, FR, BR, BL), else what differs.

    Checks each wheel's steerable flag (front wheels steer, back wheels do not) and, when the blob
    carries the wheels' offsets from the car (not all zero), that the left wheels (blob 0 and 3) sit
    on the +x side and the right wheels (blob 1 and 2) on the -x side.
    """
    blob = bytes(blob)
    if len(blob) < OFF_WHEELS + WHEEL_SIZE * N_WHEELS:
        return f"state blob of {len(blob)} bytes has no wheels"
    bases = [OFF_WHEELS + WHEEL_SIZE * b for b in range(N_WHEELS)]
    steerable = [_I32.unpack_from(blob, w + WHEEL_STEERABLE)[0] != 0 for w in bases]
    problems = []
    if steerable != [True, True, False, False]:
        problems.append(f"steerable flags of the blob's wheels are {steerable}, expected [True, True, False, False]")
    x = [_F3.unpack_from(blob, w + WHEEL_OFFSET_FROM_VEHICLE)[0] for w in bases]
    if any(v != 0.0 for v in x) and not (x[0] > 0 and x[3] > 0 and x[1] < 0 and x[2] < 0):
        problems.append(f"lateral offsets of the blob's wheels are {[round(v, 3) for v in x]}, expected +, -, -, +")
    if not problems:
        return None
    return ("the game's wheel order differs from the TMInterface API's (front-left, front-right, back-right, "
            "back-left): " + "; ".join(problems) + ". Per-wheel observations may be mixed up; please report it.")


def with_finish_unreached(blob: bytes) -> bytes | None:
    """A copy of ``blob`` whose last checkpoint time is -1 (not reached), or ``None`` if it has none.

    Rewinding to it inside the finish's checkpoint message keeps the game from ending the race
    (Linesight's way; ``PreventSimulationFinish`` is its fallback when there is no checkpoint time).
    """
    blob = bytes(blob)
    _, times = decode_checkpoints(blob)
    if not times:
        return None
    n_states = _I32.unpack_from(blob, OFF_CP_DATA + 4)[0]
    last = OFF_CP_DATA + 8 + 4 * n_states + 4 + 8 * (len(times) - 1)
    out = bytearray(blob)
    _I32.pack_into(out, last, -1)
    return bytes(out)


def _rotation_to_quaternion(rot: np.ndarray) -> tuple[float, float, float, float]:
    """(w, x, y, z) of a rotation matrix (Shepperd's method); informative only, never decoded."""
    m = np.asarray(rot, dtype=np.float64)
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    if tr > 0:
        s = 2.0 * np.sqrt(tr + 1.0)
        return (0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s)
    i = int(np.argmax(np.diag(m)))
    j, k = (i + 1) % 3, (i + 2) % 3
    s = 2.0 * np.sqrt(max(1e-12, 1.0 + m[i, i] - m[j, j] - m[k, k]))
    q = [0.0, 0.0, 0.0, 0.0]
    q[0] = (m[k, j] - m[j, k]) / s
    q[1 + i] = 0.25 * s
    q[1 + j] = (m[j, i] + m[i, j]) / s
    q[1 + k] = (m[k, i] + m[i, k]) / s
    return (q[0], q[1], q[2], q[3])


def encode_state(car: CarState, *, n_checkpoints: int | None = None, n_real_checkpoints: int | None = None) -> bytes:
    """Encode ``car`` at the offsets :func:`decode_state` reads (used by fake games and tests).

    Args:
        car: the state; ``checkpoint_times_ms`` are the logical checkpoints passed so far.
        n_checkpoints: total logical checkpoints (finish included); the rest get time -1.
            Defaults to ``len(car.checkpoint_times_ms)``.
        n_real_checkpoints: length of the "passed" flags array; defaults to ``n_checkpoints``.

    Fields we do not model are zeros, so the blob is *not* a state a real game can restore.
    """
    times = list(car.checkpoint_times_ms)
    n_times = len(times) if n_checkpoints is None else int(n_checkpoints)
    if n_times < len(times):
        raise ValueError(f"{len(times)} checkpoint times but only {n_times} checkpoints")
    n_states = n_times if n_real_checkpoints is None else int(n_real_checkpoints)
    buf = bytearray(FIXED_SIZE)
    struct.pack_into("<III", buf, OFF_VERSION, 1, MODE_RUN, SIM_HAS_ALL)
    struct.pack_into("<i", buf, OFF_TIMERS + 4, car.race_time_ms)
    rot = np.asarray(car.rotation, dtype=np.float64).reshape(3, 3)
    struct.pack_into("<4f", buf, OFF_QUAT, *_rotation_to_quaternion(rot))
    _F9.pack_into(buf, OFF_ROTATION, *rot.reshape(-1))
    _F3.pack_into(buf, OFF_POSITION, *np.asarray(car.position, dtype=np.float64))
    _F3.pack_into(buf, OFF_LINEAR_SPEED, *np.asarray(car.linear_velocity, dtype=np.float64))
    _F3.pack_into(buf, OFF_ANGULAR_SPEED, *np.asarray(car.angular_velocity, dtype=np.float64))
    _I32.pack_into(buf, OFF_GEARBOX_STATE, int(car.gearbox_state))
    _F32.pack_into(buf, OFF_ACTUAL_RPM, float(car.rpm))
    _I32.pack_into(buf, OFF_GEAR, int(car.gear))
    _I32.pack_into(buf, OFF_IS_FREEWHEELING, int(bool(car.is_freewheeling)))
    for i in range(N_WHEELS):
        w = OFF_WHEELS + WHEEL_SIZE * WHEEL_BLOB_INDEX[i]
        _I32.pack_into(buf, w + WHEEL_STEERABLE, int(i < 2))
        _F3.pack_into(buf, w + WHEEL_OFFSET_FROM_VEHICLE, *_WHEEL_OFFSETS[i])
        _F32.pack_into(buf, w + WHEEL_DAMPER_ABSORB, float(car.wheel_damper_absorb[i]))
        _I32.pack_into(buf, w + WHEEL_HAS_GROUND_CONTACT, int(bool(car.wheel_has_ground_contact[i])))
        _I32.pack_into(buf, w + WHEEL_CONTACT_MATERIAL, representative_material(int(car.wheel_surface_group[i])))
        _I32.pack_into(buf, w + WHEEL_IS_SLIDING, int(bool(car.wheel_is_sliding[i])))
    _I32.pack_into(buf, OFF_RACE_TIME, int(car.race_time_ms))
    _I32.pack_into(buf, OFF_CUR_CP_COUNT, len(times))
    _I32.pack_into(buf, OFF_RACE_FINISHED, int(bool(car.finished)))
    cp = bytearray(struct.pack("<ii", 0, n_states))
    cp += struct.pack(f"<{n_states}i", *[int(i < len(times)) for i in range(n_states)])
    cp += struct.pack("<i", n_times)
    for i in range(n_times):
        cp += struct.pack("<ii", times[i] if i < len(times) else -1, 0)
    return bytes(buf) + bytes(cp)
