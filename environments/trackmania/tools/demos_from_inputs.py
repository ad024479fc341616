"""``rulka demos from-inputs``: a demonstration set (:mod:`memories.demonstrations`) from a race's
inputs played back through the game link.

The inputs script (:mod:`~environments.trackmania.tmi.maps.inputs_script`: what TMInterface saves from a
replay, the game's own record of a race, or :mod:`~environments.trackmania.tmi.maps.inputs_export`) becomes
one rulka action per action period; the TrackMania environment then races the map through the
``tmi`` backend with those actions, as a collector does, so the frames, floats, rewards and race
state saved are the ones a training run would have collected. The game on ``port`` is one already
running with TMInterface and the ``rulka_link`` plugin (or a stand-in game); ``launch=True`` starts
one with the ``TMI_*`` settings instead, as a training run does.
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.tmi.maps.inputs_export import ACTIONS, KEYS
from environments.trackmania.tmi.maps.inputs_script import InputsScriptError, parse_inputs_script, script_actions
from environments.trackmania.tools.demos import RecordedRace, race_once
from memories.demonstrations import write_demonstrations

#: How long the game already running on the port gets to accept the connection, s.
ATTACH_TIMEOUT_S = 10.0


@dataclass
class RunningGame:
    """A game rulka did not launch (the user's, or ``rulka tmi standin``): never stopped by rulka."""

    port: int
    pids: tuple[int, ...] = ()

    def is_alive(self) -> bool:
        return True  # a dead game shows as a refused connection, reported with the port

    def terminate(self) -> None:
        return None


def _check_listening(port: int) -> None:
    """Refuse at once (Linux, where listening sockets can be read) when no game listens on ``port``."""
    if not sys.platform.startswith("linux"):
        return
    from environments.trackmania.tmi.games.processes import port_listeners

    if not port_listeners(port).listening:
        raise RuntimeError(f"no game listens on port {port}: start TrackMania with TMInterface and the rulka_link "
                           f"plugin ('set custom_port {port}' in its console), or a stand-in game (`rulka tmi standin "
                           f"--port {port}`); or pass --launch to start one with the TMI_* settings (.env)")


class PlaybackError(RuntimeError):
    """The game applied other keys than the ones played back (it lost inputs)."""


def check_applied(game_record: str, actions: list[int], ms_per_action: int, running_speed: float = 1.0) -> None:
    """Refuse a race whose keys, as the game recorded them (``TMIBackend.race_inputs_text()``), differ
    from ``actions``: the set would pair frames with actions the car did not drive.

    The record's key changes are read on the action grid that its first change starts (10 ms after
    each action point in the plugin test host; a constant shift in the game is tolerated).

    Raises:
        PlaybackError: the first action the game applied differently, and what to do.
    """
    hint = ("the game did not apply every input rulka sent" +
            (f"; at running_speed {running_speed:g} (above 100) TMInterface may skip inputs: pass --running-speed 80"
             if running_speed > 100 else "; play it again (is another program sending inputs to the game?)"))
    try:
        events = parse_inputs_script(game_record)
        start = min((e.time_ms for e in events), default=0) % ms_per_action
        applied = script_actions(events, ms_per_action, start_ms=start).actions
    except InputsScriptError as error:
        raise PlaybackError(f"the game's record of the race: {error}; {hint}") from None
    for k, action in enumerate(actions):
        if applied[min(k, len(applied) - 1)] != action:
            got, sent = (", ".join(key for key, on in zip(KEYS, ACTIONS[a]) if on) or "no key" for a in
                         (applied[min(k, len(applied) - 1)], action))
            raise PlaybackError(f"at race time {(start + k * ms_per_action) / 1000:.2f} s the game held {got} where "
                                f"the script has {sent}: {hint}")


@dataclass
class InputsRace:
    """The race recorded: as :class:`RecordedRace`, plus the script's actions and snapped changes."""

    race: RecordedRace
    script_actions: int
    moved: int


def record_from_inputs(inputs: str | Path, out: str | Path, track: Any, *,
                       params: TrackManiaEnvironmentParameters, port: int, launch: bool = False,
                       running_speed: float = 1.0, snap: bool = False, max_steps: int | None = None,
                       env_file: str | Path | None = ".env",
                       backend_options: dict[str, Any] | None = None) -> InputsRace:
    """Play ``inputs`` on ``track`` (a :func:`~environments.trackmania.track.track_from_map` track)
    through the game on ``port`` and write the race to ``out`` as a one-race demonstration set.

    The script is read before any game is touched. After the script's last change its keys stay
    held until the environment ends the race (finish, cut-off or ``max_steps``).

    Raises:
        InputsScriptError: the script cannot be played back (line, race time and a fix named).
        RuntimeError: the game lost the race (it hung or the link dropped).
        PlaybackError: the game's record of the race differs from the script (lost inputs).
        TMIStartError: no race could be started on ``port``.
    """
    inputs = Path(inputs)
    if not inputs.is_file():
        raise FileNotFoundError(f"no inputs script {inputs} (save one in TMInterface, or export an agent's actions)")
    played = script_actions(parse_inputs_script(inputs.read_text(encoding="utf-8")), int(params.ms_per_action),
                            snap=snap)
    from environments.trackmania.tmi.games.settings import load_settings

    options: dict[str, Any] = {"port": int(port), "running_speed": float(running_speed),
                               "settings": load_settings(env_file)}
    if not launch:
        _check_listening(int(port))
        options["launcher"] = lambda p: RunningGame(p)
        options["manager_options"] = {"connect_timeout_s": ATTACH_TIMEOUT_S}
    options.update(backend_options or {})
    env = TrackManiaEnv(dataclasses.replace(params, backend="tmi"), track=track, backend="tmi", backend_options=options)
    step = iter(range(10 ** 9))
    last = len(played.actions) - 1
    act: Callable[[dict[str, np.ndarray]], int] = lambda obs: played.actions[min(next(step), last)]  # noqa: E731
    try:
        episode, race = race_once(env, act, seed=0, max_steps=max_steps)
        check_applied(env.backend.race_inputs_text(), episode.actions.tolist(), int(params.ms_per_action),
                      running_speed)
    finally:
        env.close()
    source = {"recorder": "rulka demos from-inputs", "inputs": str(inputs),
              "track": str(getattr(track, "map_path", track)), "policy": "inputs script", "seed": 0,
              "ms_per_action": int(params.ms_per_action), "script_actions": len(played.actions),
              "snapped_changes": played.moved, "port": int(port)}
    write_demonstrations(out, [episode], source, int(env.action_space.n))
    return InputsRace(race, len(played.actions), played.moved)
