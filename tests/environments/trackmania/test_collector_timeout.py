"""The collector watchdog (performance.collector_timeout_s) is checked before a real-game run starts: for
collector processes (which beat while their game starts) against one race step's timeout, for Ray actors
against the game's start deadline; a watchdog that may fire before the game gives up is refused."""
from __future__ import annotations

from pathlib import Path

import pytest

from agents.iqn_agent import IQNAgent
from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig
from environments.trackmania.training.trackmania_graph_manager import TrackManiaGraphManager, check_collector_timeout
from rulka.config import ConfigError, apply_overrides

pytestmark = pytest.mark.reliability

LINES = Path(__file__).resolve().parents[3] / "environments" / "trackmania" / "tmi" / "standin" / "lines"


def test_a_ray_watchdog_shorter_than_the_start_deadline_is_refused_with_the_fix():
    """Ray actors, 300 s against a 600 s start: refused, naming both fixes; enough margin, or no collector
    process: accepted."""
    with pytest.raises(ConfigError, match=r"collector_timeout_s = 300 s .* start deadline is 600 s.*"
                                          r"at least 660 \(-cp performance.collector_timeout_s=660\).*"
                                          r"TMI_START_TIMEOUT_S to at most 240"):
        check_collector_timeout(300.0, 600.0, collectors=4, backend="ray")
    check_collector_timeout(660.0, 600.0, collectors=4, backend="ray")
    check_collector_timeout(30.0, 600.0, collectors=0)  # in the learner's process: no watchdog


def test_a_process_watchdog_need_only_exceed_one_race_step():
    """Collector processes beat while their game starts: 120 s passes a 600 s start deadline; 45 s against a
    30 s in-race timeout is refused, naming both fixes."""
    check_collector_timeout(120.0, 600.0, collectors=4, backend="processes", step_timeout_s=30.0)
    with pytest.raises(ConfigError, match=r"collector_timeout_s = 45 s .*timeout_during_run_ms = 30000 ms.*"
                                          r"at least 60 \(-cp performance.collector_timeout_s=60\).*"
                                          r"timeout_during_run_ms to at most 15000"):
        check_collector_timeout(45.0, 600.0, collectors=4, backend="processes", step_timeout_s=30.0)


def _graph_manager(timeout_s: float, backend: str = "processes") -> TrackManiaGraphManager:
    config = apply_overrides(TrackManiaExperimentConfig(), overrides=[
        "environment.backend=tmi", f"performance.collector_timeout_s={timeout_s}",
        f"performance.collector_backend={backend}",
        f"map_cycle.entries=[{{map_path: short, reference_line_path: {LINES / 'short.npy'}}}]"])
    return TrackManiaGraphManager(IQNAgent, config)


def test_preflight_checks_the_watchdog_against_tmi_start_timeout(tmp_path, monkeypatch):
    """The preflight of a real-game run with Ray collectors reads TMI_START_TIMEOUT_S (default 600 s) and
    refuses a shorter watchdog before any game or collector starts; collector processes need only exceed
    one race step."""
    monkeypatch.chdir(tmp_path)  # no .env
    monkeypatch.setenv("TMI_LINUX_LAUNCH_SCRIPT", str(LINES.parent / "launch.sh"))
    monkeypatch.setenv("TMI_ACCOUNT_NAME", "standin")
    monkeypatch.delenv("TMI_START_TIMEOUT_S", raising=False)
    with pytest.raises(ConfigError, match="start deadline is 600 s"):
        _graph_manager(300.0, "ray").preflight()
    _graph_manager(660.0, "ray").preflight()
    _graph_manager(120.0).preflight()
    with pytest.raises(ConfigError, match="timeout_during_run_ms = 30000 ms"):
        _graph_manager(45.0).preflight()
    monkeypatch.setenv("TMI_START_TIMEOUT_S", "120")
    _graph_manager(300.0, "ray").preflight()
