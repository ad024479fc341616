"""The 12 discrete actions: one table of keyboard inputs, kept as data."""
from __future__ import annotations

import numpy as np

from environments.trackmania.backend import InputState

#: Names of the four binary inputs, in the order of the table's columns and of the float inputs.
INPUT_NAMES: tuple[str, ...] = ("accelerate", "brake", "left", "right")

#: One row per action: (accelerate, brake, left, right).
ACTION_TABLE: tuple[tuple[int, int, int, int], ...] = (
    (1, 0, 0, 0),
    (1, 0, 1, 0),
    (1, 0, 0, 1),
    (0, 0, 0, 0),
    (0, 0, 1, 0),
    (0, 0, 0, 1),
    (0, 1, 0, 0),
    (0, 1, 1, 0),
    (0, 1, 0, 1),
    (1, 1, 0, 0),
    (1, 1, 1, 0),
    (1, 1, 0, 1),
)

N_ACTIONS: int = len(ACTION_TABLE)
ACTION_FORWARD_IDX: int = 0
ACTION_BACKWARD_IDX: int = 6

#: The table as a (12, 4) float32 array, for writing the previous-action floats.
ACTION_FLAGS: np.ndarray = np.asarray(ACTION_TABLE, dtype=np.float32)
ACTION_FLAGS.setflags(write=False)

#: The table as InputState objects (immutable, shared).
ACTION_INPUTS: tuple[InputState, ...] = tuple(
    InputState(accelerate=bool(a), brake=bool(b), left=bool(l), right=bool(r)) for a, b, l, r in ACTION_TABLE
)

_INDEX_BY_FLAGS: dict[tuple[int, int, int, int], int] = {row: i for i, row in enumerate(ACTION_TABLE)}


def action_to_inputs(action: int) -> InputState:
    """The keyboard inputs of action ``action`` (0..11)."""
    return ACTION_INPUTS[int(action)]


def inputs_to_action(accelerate: bool, brake: bool, left: bool, right: bool) -> int:
    """The index of the action with these inputs; pressing both left and right counts as neither."""
    if left and right:
        left = right = False
    return _INDEX_BY_FLAGS[(int(accelerate), int(brake), int(left), int(right))]
