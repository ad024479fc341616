"""Setup tools users meet first: `rulka tmi line REPLAY.Gbx OUT.npy` (a reference line from a replay,
run through the main CLI on a pygbx-shaped fake replay) and the retired TMI_GAME_PATH setting."""
from __future__ import annotations

import logging
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest

from environments.trackmania.tmi.games.settings import TMISettings, load_settings
from rulka.cli import main

GHOST_ID, GHOST_OLD_ID = 0x03092000, 0x2401B000


def fake_replay_module(race_time_ms: int, positions: np.ndarray) -> types.ModuleType:
    """A module shaped as pygbx whose Gbx holds one ghost with one record per 100 ms."""
    records = [SimpleNamespace(position=SimpleNamespace(x=p[0], y=p[1], z=p[2])) for p in positions]
    ghost = SimpleNamespace(id=GHOST_ID, race_time=race_time_ms, cp_times=[race_time_ms], records=records)

    class Gbx:
        def __init__(self, path):
            self.path = path

        def get_classes_by_ids(self, ids):
            assert GHOST_ID in ids
            return [ghost]

    module = types.ModuleType("pygbx")
    module.Gbx = Gbx
    module.GbxType = SimpleNamespace(CTN_GHOST=GHOST_ID, CTN_GHOST_OLD=GHOST_OLD_ID)
    return module


def test_rulka_tmi_line_writes_the_reference_line(tmp_path, monkeypatch, capsys):
    """`rulka tmi line R.Replay.Gbx OUT.npy`: the ghost's positions up to its finish (race_time / 100 ms
    + 1 records: the finish's own record included) resampled every 0.5 m into an (N, 3) .npy; the command
    says what it wrote."""
    z = np.arange(0.0, 12.0)  # 12 records 1 m apart; the finish at 1.0 s keeps the first 11 (0 to 1.0 s)
    positions = np.stack([np.zeros_like(z), np.full_like(z, 9.0), z], axis=1)
    monkeypatch.setitem(sys.modules, "pygbx", fake_replay_module(1000, positions))
    replay, out = tmp_path / "A01.Replay.Gbx", tmp_path / "A01.npy"
    replay.write_bytes(b"GBX")
    assert main(["tmi", "line", str(replay), str(out)]) == 0
    line = np.load(out)
    assert line.shape == (21, 3)  # 10 m of line, a point every 0.5 m
    np.testing.assert_allclose(line[:, 2], np.arange(0.0, 10.5, 0.5))
    assert f"wrote {out}: 21 points every 0.5 m, 10.0 m of line" in capsys.readouterr().out
    assert main(["tmi", "line", str(replay), str(out), "--spacing", "1"]) == 0
    assert np.load(out).shape == (11, 3)


@pytest.mark.reliability
def test_rulka_tmi_line_errors_name_the_fix(tmp_path, monkeypatch, capsys):
    """Without pygbx, with a replay that is not there, or a spacing <= 0: exit 2 and one error line
    (pip install pygbx; the missing path; the spacing), no traceback, no file written."""
    replay, out = tmp_path / "A01.Replay.Gbx", tmp_path / "A01.npy"
    replay.write_bytes(b"GBX")
    monkeypatch.setitem(sys.modules, "pygbx", None)
    assert main(["tmi", "line", str(replay), str(out)]) == 2
    assert "pip install pygbx" in capsys.readouterr().err
    assert main(["tmi", "line", str(tmp_path / "missing.Replay.Gbx"), str(out)]) == 2
    assert "no replay file at" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "pygbx", fake_replay_module(1000, np.zeros((10, 3)) + np.arange(10)[:, None]))
    assert main(["tmi", "line", str(replay), str(out), "--spacing", "0"]) == 2
    assert "spacing must be > 0" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.reliability
def test_retired_tmi_game_path_is_named_in_a_warning(tmp_path, monkeypatch, caplog):
    """TMI_GAME_PATH was never used: a .env that sets it loads, with a warning that points to
    TMI_USER_DATA_PATH (where map paths are resolved); the setting no longer exists."""
    monkeypatch.delenv("TMI_GAME_PATH", raising=False)
    env = tmp_path / ".env"
    env.write_text("TMI_ACCOUNT_NAME=bot\nTMI_GAME_PATH=C:\\TmNationsForever\n")
    with caplog.at_level(logging.WARNING):
        settings = load_settings(env)
    assert settings.account_name == "bot"
    assert any("TMI_GAME_PATH" in r.message and "TMI_USER_DATA_PATH" in r.message for r in caplog.records)
    with pytest.raises(TypeError):
        TMISettings(game_path="C:/TmNationsForever")  # type: ignore[call-arg]
