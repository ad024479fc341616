"""Export a list of actions to TMInterface's input script format (a ``.txt``/``.inputs`` file).

TMInterface's script syntax (donadigo.com/tminterface/script-syntax): one timed command per line,
``<time> press <key>`` / ``<time> rel <key>``, or a range ``<start>-<end> press <key>`` that means
press at start and release at end. Times are race times, either seconds with two decimals
(``1.25``) or integer milliseconds ending in 0 (``1250``). Keys: ``up`` (accelerate), ``down``
(brake), ``left``, ``right``.

Each action lasts ``ms_per_action`` (50 ms); action ``k`` starts at race time ``10 + k * 50``
(:data:`FIRST_INPUT_MS`): the manager reads the state in the RUN_STEP at ``k * 50``, the game then
runs that 10 ms tick with the previous keys, and the keys chosen from the frame apply from the next
tick on. The game's own record of a race (``TMIBackend.race_inputs_text()``, TMInterface's
``InputEvents.ToCommandsText()``) needs no such assumption; this export is checked against that
record in the plugin test host, whose timing follows the same model (not verified in the game).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

#: rulka's 12 actions: (accelerate, brake, left, right) per index.
ACTIONS: tuple[tuple[bool, bool, bool, bool], ...] = (
    (True, False, False, False),  # 0 accel
    (True, False, True, False),  # 1 accel + left
    (True, False, False, True),  # 2 accel + right
    (False, False, False, False),  # 3 none
    (False, False, True, False),  # 4 left
    (False, False, False, True),  # 5 right
    (False, True, False, False),  # 6 brake
    (False, True, True, False),  # 7 brake + left
    (False, True, False, True),  # 8 brake + right
    (True, True, False, False),  # 9 accel + brake
    (True, True, True, False),  # 10 accel + brake + left
    (True, True, False, True),  # 11 accel + brake + right
)
#: Race time at which the keys of action 0 take effect, ms.
FIRST_INPUT_MS = 10
#: Key names in the order of the flags of :data:`ACTIONS`.
KEYS = ("up", "down", "left", "right")


def format_time(ms: int, time_format: str = "seconds") -> str:
    """``1250`` -> ``"1.25"`` (seconds) or ``"1250"`` (ms). Times must be multiples of 10 ms."""
    if ms < 0 or ms % 10:
        raise ValueError(f"input times must be non-negative multiples of 10 ms, got {ms}")
    if time_format == "ms":
        return str(ms)
    if time_format == "seconds":
        return f"{ms // 1000}.{(ms % 1000) // 10:02d}"
    raise ValueError(f"time_format must be 'seconds' or 'ms', got {time_format!r}")


def actions_to_inputs_text(
    actions: Sequence[int] | Iterable[int],
    *,
    ms_per_action: int = 50,
    start_ms: int = FIRST_INPUT_MS,
    time_format: str = "seconds",
) -> str:
    """The inputs script for ``actions`` (indices into :data:`ACTIONS`).

    Consecutive actions holding a key merge into one ``start-end press key`` line; a key still
    held after the last action is pressed with no end (``start press key``). Lines are sorted
    by start time, then key order.
    """
    actions = [int(a) for a in actions]
    for i, a in enumerate(actions):
        if not 0 <= a < len(ACTIONS):
            raise ValueError(f"action {i} is {a}, not an index in 0..{len(ACTIONS) - 1}")
    if ms_per_action <= 0 or ms_per_action % 10:
        raise ValueError(f"ms_per_action must be a positive multiple of 10, got {ms_per_action}")
    lines: list[tuple[int, int, str]] = []
    for key_idx, key in enumerate(KEYS):
        pressed_since: int | None = None
        for k, a in enumerate(actions):
            t = start_ms + k * ms_per_action
            held = ACTIONS[a][key_idx]
            if held and pressed_since is None:
                pressed_since = t
            elif not held and pressed_since is not None:
                lines.append((pressed_since, key_idx, f"{format_time(pressed_since, time_format)}-"
                              f"{format_time(t, time_format)} press {key}"))
                pressed_since = None
        if pressed_since is not None:
            lines.append((pressed_since, key_idx, f"{format_time(pressed_since, time_format)} press {key}"))
    lines.sort(key=lambda item: (item[0], item[1]))
    return "".join(text + "\n" for _, _, text in lines)


def export_inputs(path: str | Path, actions: Sequence[int], **kwargs: object) -> Path:
    """Write :func:`actions_to_inputs_text` to ``path`` (UTF-8) and return the path."""
    path = Path(path)
    path.write_text(actions_to_inputs_text(actions, **kwargs), encoding="utf-8")  # type: ignore[arg-type]
    return path
