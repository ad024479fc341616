"""The stand-in configuration (presets/trackmania_iqn_uni_standin.yaml) works from any working directory:
its reference lines are found relative to the file, so a run started elsewhere is not refused
("reference line not found"). Not covered here: the games themselves (the stand-in training tests run
them from the repository root)."""
from __future__ import annotations

from pathlib import Path

from environments.trackmania.training.map_cycle import cycle_entries, entry_track
from rulka.cli import _prepare

ROOT = Path(__file__).resolve().parents[2]
STANDIN_YAML = ROOT / "presets" / "trackmania_iqn_uni_standin.yaml"


def test_the_standin_configuration_passes_preflight_from_another_folder(tmp_path, monkeypatch):
    """From an empty folder: the preflight (settings, reference lines, watchdog) passes and every map
    cycle entry's line and checkpoints load."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMI_LINUX_LAUNCH_SCRIPT", str(ROOT / "environments/trackmania/tmi/standin/launch.sh"))
    monkeypatch.setenv("TMI_ACCOUNT_NAME", "standin")
    monkeypatch.delenv("TMI_START_TIMEOUT_S", raising=False)
    graph_manager = _prepare("trackmania_iqn_uni", [str(STANDIN_YAML)], [])
    graph_manager.preflight()
    for entry in cycle_entries(graph_manager.config):
        assert Path(entry.reference_line_path).is_file()
        entry_track(entry, "tmi")
