"""bench/collection.py's measuring window (also the link bench's actions/s row): it trains a graph manager
in a thread, counts actions and updates only after the warm-up, listens with a lag meter if given, then
stops and closes the graph manager."""
from __future__ import annotations

from pathlib import Path

from rulka.collection.lag import LagMeter
from rulka.presets import load_graph_manager
from tests.scripts_as_modules import load_script

ROOT = Path(__file__).resolve().parents[2]


def test_train_and_measure_counts_the_window_after_warmup_and_stops():
    """Rates over the window match its counts, the meter is removed again, and the training thread is
    stopped (improve returns; the graph manager is closed): a bench row cannot leave a run behind it."""
    bench = load_script(ROOT / "bench" / "collection.py")
    graph_manager = load_graph_manager("cartpole_dqn")
    graph_manager.create(None, "cpu", 0)
    meter = LagMeter()
    actions_per_s, updates_per_s, actions, updates = bench.train_and_measure(graph_manager, 300, 1.0, meter)
    assert graph_manager.agent.counters.env_steps >= 300 + actions
    assert actions > 0 and 0.5 * actions <= actions_per_s <= 2 * actions
    assert updates >= 0 and updates_per_s <= 2 * updates + 1e-9
    assert meter not in graph_manager.lag_meters and graph_manager.stop_requested
