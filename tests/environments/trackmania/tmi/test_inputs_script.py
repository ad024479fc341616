"""environments/trackmania/tmi/maps/inputs_script.py: TMInterface inputs scripts read into rulka's actions,
one per action period, or refused with the line, the race time and a fix."""
from __future__ import annotations

import pytest

from environments.trackmania.tmi.maps.inputs_export import actions_to_inputs_text
from environments.trackmania.tmi.maps.inputs_script import (InputsScriptError, parse_inputs_script, parse_time_ms,
                                                       script_actions)
from rulka.cli import main


def actions_of(text: str, **kwargs) -> list[int]:
    return script_actions(parse_inputs_script(text), **kwargs).actions


@pytest.mark.parametrize("time_format", ["seconds", "ms"])
def test_exported_actions_come_back_in_both_time_syntaxes(time_format):
    """Every action of a run exported by inputs_export (ranges, open presses, all 12 actions) reads back
    as the same action, in seconds and in milliseconds; the last action holds after the script."""
    actions = [0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 2, 2, 2]
    read = actions_of(actions_to_inputs_text(actions, time_format=time_format))
    assert read == actions[:15]  # then action 2 holds: the script ends with the last change
    assert actions_of(actions_to_inputs_text(actions, ms_per_action=30), ms_per_action=30) == actions[:15]


def test_the_games_own_record_syntax_reads():
    """press/rel lines as the game's record writes them, comments, minutes, and repeated presses."""
    text = "0.01 press up\n0.06 press right # turn\n0.11 rel right\n0:00.16 press down\n0.16 press up\n210 rel up\n"
    assert actions_of(text) == [0, 2, 0, 9, 6]
    assert parse_time_ms("1:02.50") == 62500 and parse_time_ms("1250") == 1250 and parse_time_ms("1.2") == 1200


@pytest.mark.parametrize("text, match", [
    ("0.01 press up\n0.33 press left\n",
     r"line 2: the keys change at race time 0\.33 s, off rulka's action grid.*--snap"),
    ("0.01 press left\n0.06 press right\n", r"line 2: at race time 0\.06 s left and right are held together"),
    ("0.01 steer 6000\n", r"line 1 .*analog steer has no rulka action"),
    ("0.01 press enter\n", r"line 1 .*key 'enter' has no rulka action"),
    ("0.015 press up\n", r"line 1 .*not on the game's 10 ms ticks"),
    ("0.50-0.20 press up\n", r"line 1 .*not after its start"),
    ("0.01 rel up\n", "presses no key"),
])
def test_scripts_rulka_cannot_play_are_refused_with_line_and_race_time(text, match):
    """Off-grid key changes, left + right together, analog steering, other keys, sub-tick times and
    empty scripts are refused with a message naming the line (and race time) and what to do."""
    with pytest.raises(InputsScriptError, match=match):
        actions_of(text)


def test_snap_moves_changes_to_the_nearest_action():
    """--snap: a press at race time 0 (as in replays) starts at action 0, 0.33 s goes to action 6
    (0.31 s), 0.38 s to action 7 (0.36 s); the moved changes are counted."""
    played = script_actions(parse_inputs_script("0 press up\n0.33 press left\n0.38 rel left\n"), snap=True)
    assert played.actions == [0, 0, 0, 0, 0, 0, 1, 0] and played.moved == 3


def test_the_command_refuses_a_bad_script_before_touching_a_game(tmp_path, capsys):
    """`rulka demos from-inputs` reads the script first: an off-grid one exits 2 naming the line, with
    no game on the port, and writes nothing; a good script with no game on the port exits 2 at once,
    saying how to start one."""
    script = tmp_path / "race.txt"
    script.write_text("0.01 press up\n0.37 press left\n")
    assert main(["demos", "from-inputs", str(script), "--port", "1", "--out", str(tmp_path / "demo"),
                 "--config", "presets/trackmania_iqn_uni_standin.yaml"]) == 2
    assert "line 2: the keys change at race time 0.37 s" in capsys.readouterr().err
    script.write_text("0.01 press up\n")
    assert main(["demos", "from-inputs", str(script), "--port", "1", "--out", str(tmp_path / "demo"),
                 "--config", "presets/trackmania_iqn_uni_standin.yaml"]) == 2
    assert "no game listens on port 1: start TrackMania" in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()
