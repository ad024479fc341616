"""environments/trackmania/tools/demos_from_inputs.py: a demonstration set recorded from a race's inputs
played back through a stand-in game (our plugin in the AngelScript host, the simulator's car)."""
from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from environments.trackmania.env import trackmania_spaces
from environments.trackmania.tmi.maps.inputs_export import actions_to_inputs_text
from environments.trackmania.tmi.games.processes import port_listeners
from environments.trackmania.tmi.standin.build import LAUNCH_SCRIPT
from environments.trackmania.tools.demos import driver_race_as_inputs
from environments.trackmania.tools.demos_from_inputs import PlaybackError, check_applied
from memories.demonstrations import fill_replay, load_demonstrations
from memories.replay import make_replay
from rulka.cli import main
from rulka.config import apply_overrides
from rulka.presets import load_graph_manager
from tests.environments.trackmania.tmi.standin_helpers import (STANDIN_YAML, free_port_block, processes_mentioning,
                                                               standin_available, standin_environ)


@contextlib.contextmanager
def standin_game(tmp_path: Path, *extra: str):
    """`rulka tmi standin --port N` running until the block ends (as a user's game runs, not launched by
    the command under test); yields the process and its port."""
    port = free_port_block(1)
    rulka = str(Path(sys.executable).with_name("rulka"))
    game = subprocess.Popen([rulka, "tmi", "standin", "--port", str(port), "--trace", str(tmp_path / f"{port}.jsonl"),
                             *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not port_listeners(port).listening:
            assert game.poll() is None and time.monotonic() < deadline, f"no stand-in on port {port}"
            time.sleep(0.2)
        yield game, port
    finally:
        game.terminate()
        game.wait(timeout=20)


def test_a_simulator_race_played_back_from_its_inputs_through_a_stand_in_game(tmp_path, capsys, monkeypatch):
    """The classical driver's race on `short` (simulator, no start jitter) exported as an inputs
    script and played back with `rulka demos from-inputs` through a stand-in game already running on
    the port: the set has the driver's actions, finishes within one action period of the simulator's
    race time, fits the run's spaces and fills a replay; the game, which rulka did not launch, still
    runs after it. With --launch the command starts a stand-in itself (launch.sh, as a training run)
    that loses every 7th input: the game's record then differs from the script, the race is refused
    and nothing is written. Nothing is left behind."""
    standin_available()
    config = apply_overrides(load_graph_manager("trackmania_iqn_uni").config, [str(STANDIN_YAML)])
    params = config.environment
    driven, race = driver_race_as_inputs(params, "short", tmp_path / "race.txt")
    assert race.finished

    command = ["demos", "from-inputs", str(tmp_path / "race.txt"), "--config", str(STANDIN_YAML), "--running-speed",
               "100", "--port"]
    with standin_game(tmp_path) as (game, port):
        assert main([*command, str(port), "--out", str(tmp_path / "demo")]) == 0
        assert game.poll() is None, "rulka stopped a game it did not launch"
    # --launch: the command starts the game with the TMI_* settings (a stand-in through launch.sh) and stops it
    for key, value in {**standin_environ(tmp_path), "TMI_LINUX_LAUNCH_SCRIPT": str(LAUNCH_SCRIPT),
                       "TMI_ACCOUNT_NAME": "standin", "RULKA_STANDIN_OPTIONS": "--lose-input-every 7"}.items():
        monkeypatch.setenv(key, value)
    assert main([*command, str(free_port_block(1)), "--launch", "--out", str(tmp_path / "lossy")]) == 2
    assert "the game did not apply every input rulka sent" in capsys.readouterr().err
    assert not (tmp_path / "lossy").exists()

    demos = load_demonstrations(tmp_path / "demo")
    (played,) = demos.episodes
    assert played.outcome == "finished" and played.terminated
    assert abs(played.length - driven.length) <= 1
    np.testing.assert_array_equal(played.actions, driven.actions[:played.length])
    link_ms, sim_ms = played.step_info["race_time_ms"][-1], driven.step_info["race_time_ms"][-1]
    assert abs(link_ms - sim_ms) <= params.ms_per_action, (link_ms, sim_ms)
    assert played.states["frame"].dtype == np.uint8 and demos.source["recorder"] == "rulka demos from-inputs"
    observation_space, action_space = trackmania_spaces(config.environment)
    demos.check_fits(observation_space, int(action_space.n))
    assert fill_replay(make_replay(observation_space, 2000, 3, seed=0), demos.episodes) == played.length

    deadline = time.monotonic() + 10
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(str(tmp_path)) == []


def test_the_games_record_is_compared_with_the_actions_played():
    """check_applied: the game's record of the actions played passes, also shifted by a constant (the
    real game's timing is not verified here); one change a step late or a missing key is refused with
    its race time."""
    actions = [0, 0, 2, 2, 1, 3, 6, 0]
    check_applied(actions_to_inputs_text(actions), actions, 50)
    check_applied(actions_to_inputs_text(actions, start_ms=0), actions, 50)
    check_applied(actions_to_inputs_text(actions + [2, 2]), actions, 50)  # the record goes on after the script
    with pytest.raises(PlaybackError, match=r"at race time 0\.11 s the game held up where the script has up, right"):
        check_applied(actions_to_inputs_text([0, 0, 0, 2, 1, 3, 6, 0]), actions, 50)
    with pytest.raises(PlaybackError, match="--running-speed 80"):
        check_applied("0.01 press up\n0.03 press left\n", actions, 50, running_speed=160)
