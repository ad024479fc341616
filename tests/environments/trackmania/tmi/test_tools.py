"""Tools: check_port diagnoses, .inputs export, replay resampling, settings, launchers, CLI, install."""
from __future__ import annotations

import argparse
import sys

import numpy as np
import pytest

from environments.trackmania.tmi.commands import cli
from environments.trackmania.tmi.commands.check import PortStatus, check_port
from environments.trackmania.tmi.maps.inputs_export import actions_to_inputs_text, export_inputs, format_time
from environments.trackmania.tmi.maps.inputs_script import InputsScriptError, parse_inputs_script, script_actions
from environments.trackmania.tmi.commands.install import PLUGIN_SOURCE, install_plugin
from environments.trackmania.tmi.games.launcher import default_launcher, linux_script_command, tmloader_command
from environments.trackmania.tmi.maps.replay_to_line import replay_to_line, resample_polyline
from environments.trackmania.tmi.games.settings import SettingsError, TMISettings, load_settings, parse_env_file

from .conftest import free_port
from .fake_game_server import FakeGameServer


# ---------------------------------------------------------------------- check_port
def test_check_port_nothing_listening():
    """No program on the port: the report says the game or plugin is missing and names custom_port."""
    report = check_port(free_port(), timeout_s=0.5)
    assert report.status == PortStatus.NOTHING_LISTENING and "Unknown variable: custom_port" in report.message


def test_check_port_accepted_without_handshake():
    """Accepted but silent: the report points at the plugin not loaded / another client."""
    with FakeGameServer(behaviour="silent") as server:
        report = check_port(server.port, timeout_s=0.3)
    assert report.status == PortStatus.NO_ON_CONNECT and "rulka tmi install" in report.message


@pytest.mark.parametrize("raw", [b"HTTP/1.1 400 Bad Request\r\n\r\n", b"", b"\x07\x00"])
def test_check_port_wrong_protocol(raw):
    """A program that speaks something else on the port is reported as the wrong protocol."""
    with FakeGameServer(behaviour="raw", raw_bytes=raw) as server:
        report = check_port(server.port, timeout_s=1.0)
    assert report.status == PortStatus.WRONG_PROTOCOL and "TMI_BASE_PORT" in report.message


def test_check_port_success_releases_the_plugin():
    """Against a working game, check succeeds and the plugin is told to listen again (C_SHUTDOWN)."""
    with FakeGameServer() as server:
        report = check_port(server.port, timeout_s=2.0)
        assert report.ok, report
        import time

        deadline = time.monotonic() + 2
        while not server.drops and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.drops == ["client shut down"]


# ---------------------------------------------------------------------- .inputs export
def test_inputs_text_format():
    """Held keys merge into 'start-end press key' ranges in TMInterface's seconds format; action k's
    keys apply from race time 10 + 50 k (the tick after the frame they were chosen from)."""
    text = actions_to_inputs_text([0, 0, 1, 3, 6, 11])
    assert text.splitlines() == [
        "0.01-0.16 press up",
        "0.11-0.16 press left",
        "0.21 press down",
        "0.26 press up",
        "0.26 press right",
    ]
    assert actions_to_inputs_text([0, 3], time_format="ms") == "10-60 press up\n"
    assert actions_to_inputs_text([0, 3], time_format="ms", start_ms=0) == "0-50 press up\n"
    assert format_time(61230) == "61.23"
    with pytest.raises(ValueError):
        actions_to_inputs_text([12])


def test_inputs_round_trip(tmp_path):
    """Random action lists survive export and the reader that plays scripts back (inputs_script):
    the actions up to the script's last key change, then the last one held; a list that presses
    nothing writes no line, which the reader refuses."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        actions = rng.integers(0, 12, size=int(rng.integers(1, 40))).tolist()
        path = export_inputs(tmp_path / "run.inputs", actions)
        played = script_actions(parse_inputs_script(path.read_text())).actions
        assert (played + played[-1:] * len(actions))[:len(actions)] == actions
    with pytest.raises(InputsScriptError, match="presses no key"):
        script_actions(parse_inputs_script(actions_to_inputs_text([3, 3])))


# ---------------------------------------------------------------------- replay to line
def test_resample_polyline_spacing():
    """Resampled points are 0.5 m apart along the path, starting at the first point."""
    pts = np.array([[0, 0, 0], [0, 0, 0], [0, 0, 3.0], [4.0, 0, 3.0]])
    line = resample_polyline(pts, 0.5)
    assert line.shape == (15, 3)
    np.testing.assert_allclose(np.linalg.norm(np.diff(line, axis=0), axis=1)[:5], 0.5)
    np.testing.assert_allclose(line[6], [0, 0, 3.0])
    np.testing.assert_allclose(line[-1], [4.0, 0, 3.0])
    with pytest.raises(ValueError):
        resample_polyline(pts[:, :2], 0.5)


def test_replay_to_line_without_pygbx_explains(monkeypatch, tmp_path):
    """Without the optional pygbx package the error says how to install it."""
    monkeypatch.setitem(sys.modules, "pygbx", None)
    with pytest.raises(ImportError, match="pip install pygbx"):
        replay_to_line(tmp_path / "x.Replay.Gbx")


def _fake_pygbx(monkeypatch, *, sample_period, race_time, n_records, respawns=0):
    """A stand-in ``pygbx`` module whose one ghost drives straight along x at 10 m/s."""
    import types

    def record(i):
        return types.SimpleNamespace(position=types.SimpleNamespace(x=0.01 * (sample_period or 100) * i, y=9.0, z=5.0))

    ghost = types.SimpleNamespace(
        records=[record(i) for i in range(n_records)], race_time=race_time, cp_times=[race_time],
        num_respawns=respawns, **({} if sample_period is None else {"sample_period": sample_period}),
    )
    module = types.ModuleType("pygbx")
    module.GbxType = types.SimpleNamespace(CTN_GHOST=1, CTN_GHOST_OLD=2)
    module.Gbx = lambda path: types.SimpleNamespace(get_classes_by_ids=lambda ids: [ghost])
    monkeypatch.setitem(sys.modules, "pygbx", module)


def test_replay_to_line_reads_the_ghosts_sample_period(monkeypatch, tmp_path):
    """A ghost saved every 50 ms gives the whole race's line (10 s at 10 m/s = 100 m), not the half
    that a 100 ms assumption kept; samples past the finish are dropped; no period stated = 100 ms."""
    _fake_pygbx(monkeypatch, sample_period=50, race_time=10_000, n_records=230)
    line = replay_to_line(tmp_path / "x.Replay.Gbx", tmp_path / "x.npy")
    assert np.linalg.norm(line[-1] - line[0]) == pytest.approx(100.0)
    np.testing.assert_allclose(np.load(tmp_path / "x.npy"), line)
    _fake_pygbx(monkeypatch, sample_period=None, race_time=10_000, n_records=120)
    line = replay_to_line(tmp_path / "x.Replay.Gbx")
    assert np.linalg.norm(line[-1] - line[0]) == pytest.approx(100.0)


def test_replay_to_line_warns_on_respawns(monkeypatch, tmp_path, capsys):
    """A ghost that respawned gives a warning (API: GhostRespawnWarning; CLI: on stderr, with the
    sample period it read); one without respawns gives none."""
    from environments.trackmania.tmi.maps.replay_to_line import GhostRespawnWarning

    _fake_pygbx(monkeypatch, sample_period=50, race_time=2_000, n_records=41, respawns=2)
    with pytest.warns(GhostRespawnWarning, match="respawned 2 time"):
        replay_to_line(tmp_path / "x.Replay.Gbx")
    replay = tmp_path / "x.Replay.Gbx"
    replay.write_bytes(b"GBX")
    parser = argparse.ArgumentParser()
    cli.register_commands(parser.add_subparsers())
    args = parser.parse_args(["tmi", "line", str(replay), str(tmp_path / "x.npy")])
    assert args.func(args) == 0
    out, err = capsys.readouterr()
    assert "warning: the ghost respawned 2 time" in err and "every 50 ms" in out
    _fake_pygbx(monkeypatch, sample_period=50, race_time=2_000, n_records=41)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        replay_to_line(replay)


# ---------------------------------------------------------------------- settings and launchers
def test_env_file_parsing(tmp_path, monkeypatch):
    """KEY=VALUE lines, comments, quotes and export are parsed without evaluation."""
    for key in ("TMI_ACCOUNT_NAME", "TMI_BASE_PORT", "TMI_TMLOADER_PATH"):
        monkeypatch.delenv(key, raising=False)
    env = tmp_path / ".env"
    env.write_text(
        "# comment\nTMI_ACCOUNT_NAME = 'my name'\nexport TMI_BASE_PORT=9000\n"
        'TMI_TMLOADER_PATH="C:\\\\TMLoader\\\\TMLoader.exe"  \nOTHER=$(rm -rf /) # not evaluated\n'
    )
    values = parse_env_file(env)
    assert values["OTHER"] == "$(rm -rf /)"
    s = load_settings(env)
    assert (s.account_name, s.base_port, s.port(2)) == ("my name", 9000, 9002)
    assert load_settings(env, base_port=7000).base_port == 7000
    (tmp_path / "bad.env").write_text("TMI_BASE_PORT=eighty\n")
    with pytest.raises(SettingsError, match="TMI_BASE_PORT"):
        load_settings(tmp_path / "bad.env")


def test_env_file_start_timeout_user_data_and_process_name(tmp_path, monkeypatch):
    """TMI_START_TIMEOUT_S (seconds > 0), TMI_USER_DATA_PATH and TMI_GAME_PROCESS_NAME are read and checked."""
    for key in ("TMI_START_TIMEOUT_S", "TMI_USER_DATA_PATH", "TMI_GAME_PROCESS_NAME"):
        monkeypatch.delenv(key, raising=False)
    env = tmp_path / ".env"
    env.write_text("TMI_START_TIMEOUT_S=900\nTMI_USER_DATA_PATH=/data/TrackMania\nTMI_GAME_PROCESS_NAME=TmForever\n")
    s = load_settings(env)
    assert (s.start_timeout_s, s.user_data_path, s.game_process_name) == (900.0, "/data/TrackMania", "TmForever")
    assert load_settings(None).start_timeout_s is None
    for bad in ("soon", "0"):
        env.write_text(f"TMI_START_TIMEOUT_S={bad}\n")
        with pytest.raises(SettingsError, match="TMI_START_TIMEOUT_S"):
            load_settings(env)


def test_missing_settings_are_named():
    """Launching without the needed settings names every missing .env key."""
    with pytest.raises(SettingsError) as err:
        default_launcher(TMISettings(), platform="win32")
    assert "TMI_ACCOUNT_NAME" in str(err.value) and "TMI_TMLOADER_PATH" in str(err.value)
    with pytest.raises(SettingsError, match="TMI_LINUX_LAUNCH_SCRIPT"):
        default_launcher(TMISettings(account_name="a"), platform="linux")


def test_launch_command_lines():
    """The TMLoader and Wine-script command lines carry the instance's port."""
    s = TMISettings(account_name="a", tmloader_path="C:/TMLoader.exe", tmloader_profile="default",
                    linux_launch_script="/home/u/launch_tm.sh")
    assert tmloader_command(s, 8479) == ["C:/TMLoader.exe", "run", "TmForever", "default",
                                         '/configstring="set custom_port 8479"']
    assert linux_script_command(s, 8480) == ["/home/u/launch_tm.sh", "8480"]


# ---------------------------------------------------------------------- CLI and install
def test_install_copies_the_plugin(tmp_path):
    """install_plugin copies rulka_link.as into the given Plugins folder."""
    target = install_plugin(tmp_path / "TMInterface" / "Plugins")
    assert target.read_text() == PLUGIN_SOURCE.read_text() and target.name == "rulka_link.as"


def test_cli_subcommands(tmp_path, capsys):
    """`rulka tmi install` and `rulka tmi check --port N` parse and run through func(args) -> int."""
    parser = argparse.ArgumentParser(prog="rulka")
    cli.register_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["tmi", "install", "--plugins-dir", str(tmp_path)])
    assert args.func(args) == 0 and (tmp_path / "rulka_link.as").exists()
    args = parser.parse_args(["tmi", "check", "--port", str(free_port()), "--timeout", "0.3"])
    assert args.func(args) == 1
    assert "nothing_listening" in capsys.readouterr().out
    with FakeGameServer() as server:
        args = parser.parse_args(["tmi", "check", "--port", str(server.port)])
        assert args.func(args) == 0


def test_main_rulka_cli_runs_tmi_check(capsys):
    """`rulka tmi check --port N` through the main CLI diagnoses "nothing listening" and exits non-zero."""
    from rulka.cli import main

    assert main(["tmi", "check", "--port", str(free_port()), "--timeout", "0.3"]) == 1
    out = capsys.readouterr().out
    assert "nothing_listening" in out and "rulka tmi install" in out
