"""Simulation-state blob decoding at TMInterface's byte offsets, and the contact material table."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from environments.trackmania.backend import (
    SURFACE_ASPHALT,
    SURFACE_DIRT,
    SURFACE_GRASS,
    SURFACE_OTHER,
    SURFACE_TURBO,
    CarState,
)
from environments.trackmania.tmi.link.materials import CONTACT_MATERIALS, MATERIAL_IDS, surface_groups
from environments.trackmania.tmi.link.state import (
    MIN_STATE_SIZE,
    StateDecodeError,
    check_wheel_order,
    decode_checkpoints,
    decode_state,
    encode_state,
    with_finish_unreached,
)


def make_car(**overrides) -> CarState:
    rot = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])  # yawed 90 degrees
    values = dict(
        race_time_ms=4250,
        position=np.array([512.5, 9.25, -33.0]),
        rotation=rot,
        linear_velocity=np.array([30.0, -0.5, 1.25]),
        angular_velocity=np.array([0.1, -0.2, 0.3]),
        gear=3,
        rpm=6789.5,
        gearbox_state=2,
        gear_change_counter=0.0,
        is_freewheeling=True,
        wheel_damper_absorb=np.array([0.005, 0.01, 0.15, 0.02], dtype=np.float32),
        wheel_has_ground_contact=np.array([True, False, True, True]),
        wheel_surface_group=np.array([SURFACE_ASPHALT, SURFACE_GRASS, SURFACE_DIRT, SURFACE_TURBO], dtype=np.int8),
        wheel_is_sliding=np.array([False, True, False, True]),
        finished=False,
        checkpoint_times_ms=[1500, 3980],
    )
    values.update(overrides)
    return CarState(**values)


def test_encode_decode_round_trip():
    """Every field the agent needs survives encode_state -> decode_state (float32 precision)."""
    car = make_car()
    got = decode_state(encode_state(car, n_checkpoints=4))
    assert got.race_time_ms == 4250 and got.gear == 3 and got.gearbox_state == 2
    np.testing.assert_allclose(got.position, car.position)
    np.testing.assert_allclose(got.rotation, car.rotation)
    np.testing.assert_allclose(got.linear_velocity, car.linear_velocity)
    np.testing.assert_allclose(got.angular_velocity, car.angular_velocity, rtol=1e-6)
    assert got.rpm == pytest.approx(6789.5)
    assert got.is_freewheeling is True
    np.testing.assert_allclose(got.wheel_damper_absorb, car.wheel_damper_absorb)
    assert got.wheel_has_ground_contact.tolist() == [True, False, True, True]
    assert got.wheel_surface_group.tolist() == [SURFACE_ASPHALT, SURFACE_GRASS, SURFACE_DIRT, SURFACE_TURBO]
    assert got.wheel_is_sliding.tolist() == [False, True, False, True]
    assert got.checkpoint_times_ms == [1500, 3980]


def test_decoder_reads_the_documented_absolute_offsets():
    """A blob written by hand at the documented offsets decodes (guards against offset drift)."""
    blob = bytearray(8344)
    struct.pack_into("<9f", blob, 688, 1, 0, 0, 0, 1, 0, 0, 0, 1)
    struct.pack_into("<3f", blob, 724, 1.0, 2.0, 3.0)
    struct.pack_into("<3f", blob, 736, 4.0, 5.0, 6.0)
    struct.pack_into("<3f", blob, 760, 7.0, 8.0, 9.0)
    struct.pack_into("<i", blob, 2388, 1)
    struct.pack_into("<f", blob, 3112, 5000.0)
    struct.pack_into("<i", blob, 3128, 4)
    struct.pack_into("<i", blob, 3196, 1)
    wheel2 = 3816 + 2 * 764
    struct.pack_into("<fiii", blob, wheel2 + 180, 0.125, 0, 0, 0)
    struct.pack_into("<iii", blob, wheel2 + 292, 1, 0x00050002, 1)  # grass with flags in the high bits
    struct.pack_into("<i", blob, 7892, 12340)
    struct.pack_into("<i", blob, 8032, 1)
    cp = struct.pack("<ii", 0, 2) + struct.pack("<ii", 1, 0) + struct.pack("<i", 3) + struct.pack("<6i", 700, 0, -1, 0, -1, 0)
    car = decode_state(bytes(blob) + cp)
    assert car.position.tolist() == [1, 2, 3] and car.linear_velocity.tolist() == [4, 5, 6]
    assert car.angular_velocity.tolist() == [7, 8, 9]
    assert (car.gearbox_state, car.gear, car.rpm, car.is_freewheeling) == (1, 4, 5000.0, True)
    # The blob's wheel 2 is the back-right wheel (API order FL, FR, BR, BL): CarState's wheel 3 (RR).
    assert car.wheel_damper_absorb[3] == 0.125 and car.wheel_has_ground_contact.tolist() == [False, False, False, True]
    assert car.wheel_surface_group[3] == SURFACE_GRASS and car.wheel_is_sliding[3]
    assert car.race_time_ms == 12340 and car.finished and car.checkpoint_times_ms == [700]
    assert decode_checkpoints(bytes(blob) + cp) == ([True, False], [700, -1, -1])


@pytest.mark.reliability
@pytest.mark.parametrize("cut", [0, 100, 8344, MIN_STATE_SIZE - 1])
def test_truncated_blob_raises_state_decode_error(cut):
    """A blob shorter than the fixed part or its checkpoint arrays raises StateDecodeError."""
    blob = encode_state(make_car(), n_checkpoints=4)
    with pytest.raises(StateDecodeError) as err:
        decode_state(blob[:cut] if cut < MIN_STATE_SIZE else blob[: len(blob) - 1])
    assert err.value.message_id == 9


def test_inconsistent_checkpoint_counts_raise():
    """Negative or absurd checkpoint counts are refused with what was expected."""
    blob = bytearray(encode_state(make_car(checkpoint_times_ms=[]), n_checkpoints=0))
    struct.pack_into("<i", blob, 8348, -3)
    with pytest.raises(StateDecodeError, match="0..10000"):
        decode_state(bytes(blob))


def test_contact_materials_table():
    """31 TMNF materials, named as in the game, grouped asphalt-like / grass / dirt / turbo / other."""
    assert len(CONTACT_MATERIALS) == 31 and [m[0] for m in CONTACT_MATERIALS] == list(range(31))
    groups = {name: g for _, name, g in CONTACT_MATERIALS}
    assert {n for n, g in groups.items() if g == SURFACE_ASPHALT} == {
        "Concrete", "Pavement", "Asphalt", "WetAsphalt", "WetPavement"}
    assert {n for n, g in groups.items() if g == SURFACE_GRASS} == {"Grass", "WetGrass"}
    assert {n for n, g in groups.items() if g == SURFACE_DIRT} == {"Sand", "Dirt", "DirtRoad", "WetDirtRoad"}
    assert {n for n, g in groups.items() if g == SURFACE_TURBO} == {"Turbo", "Turbo2"}
    assert groups["Ice"] == SURFACE_OTHER and groups["TurboRoulette"] == SURFACE_OTHER
    assert surface_groups(np.array([MATERIAL_IDS["Turbo2"], 0x10000 | 2, 31, 999])).tolist() == [
        SURFACE_TURBO, SURFACE_GRASS, SURFACE_OTHER, SURFACE_OTHER]


# ---------------------------------------------------------------------- wheel order and the finish (issue 10)
def api_order_blob(x_signs=(1, -1, -1, 1), steerable=(1, 1, 0, 0)) -> bytes:
    """A state whose blob wheels follow the API (FL, FR, BR, BL): damper 0.1 * (blob index + 1)."""
    blob = bytearray(encode_state(make_car()))
    for b in range(4):
        w = 3816 + 764 * b
        struct.pack_into("<i", blob, w + 4, steerable[b])
        struct.pack_into("<3f", blob, w + 168, 0.8 * x_signs[b], 0.0, 1.4 if b < 2 else -1.2)
        struct.pack_into("<f", blob, w + 180, 0.1 * (b + 1))
    return bytes(blob)


def test_wheels_decode_from_the_api_order_to_fl_fr_rl_rr():
    """Point 9: the blob's wheels are FL, FR, BR, BL (TMInterface's SimulationWheels); CarState's are
    FL, FR, RL, RR everywhere (the simulator too), so RL is the blob's 4th wheel and RR its 3rd."""
    car = decode_state(api_order_blob())
    assert car.wheel_damper_absorb.tolist() == pytest.approx([0.1, 0.2, 0.4, 0.3])
    assert check_wheel_order(api_order_blob()) is None
    again = decode_state(encode_state(make_car()))  # encode writes the API order back
    assert again.wheel_damper_absorb.tolist() == pytest.approx(make_car().wheel_damper_absorb.tolist())
    assert check_wheel_order(encode_state(make_car())) is None


def test_wheel_order_check_uses_steerable_flags_and_sides():
    """A blob whose steerable flags or lateral offsets disagree with the API's order is reported."""
    assert "steerable" in check_wheel_order(api_order_blob(steerable=(1, 0, 1, 0)))
    assert "lateral" in check_wheel_order(api_order_blob(x_signs=(1, -1, 1, -1)))


def test_simulator_uses_the_same_wheel_order():
    """The simulator's wheels are FL, FR, RL, RR: front wheels first, left before right."""
    from environments.trackmania.sim.car import _WHEEL_SIGNS

    assert _WHEEL_SIGNS == ((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0))  # (forward, left) signs


def test_finish_unreached_state_marks_the_last_checkpoint_time():
    """Point 3: the rewind target at the finish is the same state with its last checkpoint time -1;
    with no checkpoint time there is none (the manager then falls back to PreventSimulationFinish)."""
    blob = encode_state(make_car(checkpoint_times_ms=[1500, 3980]))
    unreached = with_finish_unreached(blob)
    assert decode_checkpoints(unreached)[1] == [1500, -1] and len(unreached) == len(blob)
    assert unreached[:8344] == blob[:8344]
    assert with_finish_unreached(encode_state(make_car(checkpoint_times_ms=[]))) is None
