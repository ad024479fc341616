"""Read a TMInterface inputs script into rulka's actions, one per action period.

The script is what :mod:`.inputs_export` writes, what the game's own record of a race gives
(``TMIBackend.race_inputs_text()``) and what TMInterface saves from a replay: one timed command a
line, ``<time> press <key>``, ``<time> rel <key>`` or ``<start>-<end> press <key>`` (pressed at
start, released at end). Times are race times: seconds (``1.25``), integer milliseconds (``1250``)
or ``m:ss.xx`` / ``h:mm:ss.xx``; the game runs 10 ms ticks, so every time is a multiple of 10 ms.
Keys: ``up``, ``down``, ``left``, ``right``. ``#`` starts a comment.

rulka sets the keys once per action: action ``k``'s keys apply from race time
``FIRST_INPUT_MS + k * ms_per_action`` (10, 60, 110, ... ms at 50 ms actions; see
:mod:`.inputs_export`). A script whose keys change anywhere else is refused, or, with
``snap=True``, each change moves to the nearest action (the race played then differs from the
script's). Keys held together that no action holds (left and right) are refused with their race time.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .inputs_export import ACTIONS, FIRST_INPUT_MS, KEYS

_TIME = re.compile(r"^(?:(?:(\d+):)?(\d+):)?(\d+)(?:\.(\d+))?$")
_ANALOG = {"steer", "gas"}


class InputsScriptError(ValueError):
    """An inputs script rulka cannot play back (the message names the line, race time and a fix)."""


@dataclass(frozen=True)
class KeyEvent:
    """A key pressed (``pressed``) or released at race time ``time_ms`` (ms), from script line ``line``."""

    time_ms: int
    key: str
    pressed: bool
    line: int


@dataclass
class ScriptActions:
    """The actions of a script: ``actions[k]`` from action ``k`` on (the last one holds after the
    script ends); ``moved`` key changes were snapped to the action grid (0 without ``snap``)."""

    actions: list[int]
    moved: int = 0


def parse_time_ms(token: str) -> int:
    """``"1.25"`` / ``"1:01.25"`` (seconds) or ``"1250"`` (ms) -> race time in ms."""
    match = _TIME.match(token)
    if not match:
        raise ValueError(f"{token!r} is not a race time (1.25, 1250 or 1:01.25)")
    hours, minutes, whole, fraction = match.groups()
    if fraction is None and hours is None and minutes is None:
        ms = int(whole)
    else:
        fraction = fraction or ""
        ms = int(whole) * 1000 + int((fraction + "000")[:3]) + 60000 * int(minutes or 0) + 3600000 * int(hours or 0)
        if fraction[3:].strip("0"):
            raise ValueError(f"{token!r} is finer than a millisecond")
    if ms % 10:
        raise ValueError(f"{token!r} is not on the game's 10 ms ticks")
    return ms


def parse_inputs_script(text: str) -> list[KeyEvent]:
    """The key events of a script, in the order of the file.

    Raises:
        InputsScriptError: a line that is not a key command rulka can play (analog steering, another
            command, a bad time), naming the line.
    """
    events: list[KeyEvent] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        where = f"line {number} ({raw.strip()!r})"
        if len(parts) >= 2 and parts[1] in _ANALOG:
            raise InputsScriptError(f"{where}: analog {parts[1]} has no rulka action (rulka's 12 actions are keys "
                                    "on or off); play the race with the keyboard and save its inputs again")
        if len(parts) != 3 or parts[1] not in ("press", "rel"):
            raise InputsScriptError(f"{where}: not a key command; rulka plays `<time> press|rel <key>` and "
                                    "`<start>-<end> press <key>` lines (remove other commands from the script)")
        when, verb, key = parts
        if key not in KEYS:
            raise InputsScriptError(f"{where}: key {key!r} has no rulka action (keys: {', '.join(KEYS)}); a "
                                    "race with respawns or other keys cannot be played back")
        try:
            if "-" in when:
                if verb != "press":
                    raise ValueError("a time range goes with press (pressed at its start, released at its end)")
                start, end = (parse_time_ms(t) for t in when.split("-", 1))
                if end <= start:
                    raise ValueError(f"the range ends at {end} ms, not after its start {start} ms")
                events += [KeyEvent(start, key, True, number), KeyEvent(end, key, False, number)]
            else:
                events.append(KeyEvent(parse_time_ms(when), key, verb == "press", number))
        except ValueError as error:
            raise InputsScriptError(f"{where}: {error}") from None
    return events


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.2f} s"


def script_actions(events: list[KeyEvent], ms_per_action: int = 50, *, snap: bool = False,
                   start_ms: int = FIRST_INPUT_MS) -> ScriptActions:
    """The action index (:data:`~.inputs_export.ACTIONS`) of every action period the script covers.

    Raises:
        InputsScriptError: a key change off the action grid (without ``snap``), keys held together
            that no action holds, or a script that presses nothing.
    """
    held = dict.fromkeys(KEYS, False)
    by_action: dict[int, tuple[dict[str, bool], int, int]] = {}  # action -> (keys, line, time ms)
    moved = 0
    for time_ms in sorted({e.time_ms for e in events}):
        before = dict(held)
        line = 0
        for event in (e for e in events if e.time_ms == time_ms):
            held[event.key] = event.pressed
            line = event.line
        if held == before:
            continue
        offset = time_ms - start_ms
        if offset < 0 or offset % ms_per_action:
            if not snap:
                grid = ", ".join(f"{(start_ms + k * ms_per_action) / 1000:.2f}" for k in range(3))
                raise InputsScriptError(
                    f"line {line}: the keys change at race time {_seconds(time_ms)}, off rulka's action grid (rulka "
                    f"sets the keys once per {ms_per_action} ms action, from {grid}, ... s on; environment."
                    f"ms_per_action). Pass --snap to move every change to the nearest action (the race played "
                    f"then differs from the script's; the command says how it ended), or save the inputs of a race "
                    f"driven on the grid (an agent's, or one made in TMInterface's input editor at "
                    f"{ms_per_action} ms steps)")
            moved += 1
        index = max(0, (offset + ms_per_action // 2 - 1) // ms_per_action)  # the nearest; exact on the grid
        by_action[index] = (dict(held), line, time_ms)
    if not by_action or not any(any(keys.values()) for keys, _, _ in by_action.values()):
        raise InputsScriptError("the script presses no key: nothing to play back")
    flags_to_action = {flags: i for i, flags in enumerate(ACTIONS)}
    actions: list[int] = []
    keys, line, time_ms = dict.fromkeys(KEYS, False), 0, 0
    for k in range(max(by_action) + 1):
        keys, line, time_ms = by_action.get(k, (keys, line, time_ms))
        flags = tuple(keys[key] for key in KEYS)
        if flags not in flags_to_action:
            raise InputsScriptError(
                f"line {line}: at race time {_seconds(time_ms)} left and right are held together, which none of "
                f"rulka's 12 actions does; release one of them there in the script")
        actions.append(flags_to_action[flags])
    return ScriptActions(actions, moved)
