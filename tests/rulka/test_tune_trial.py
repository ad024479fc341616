"""A ``rulka tune`` trial's side (rulka/tune_trial.py): each evaluation of the run becomes one JSON line for
the sweep, and a run whose parent (the trial's Ray worker) is gone stops itself instead of training on."""
import json
import time
from types import SimpleNamespace

from rulka import tune_trial


def fake_graph_manager():
    return SimpleNamespace(agent=SimpleNamespace(counters=SimpleNamespace(env_steps=0)), last_evaluation=None,
                           best_evaluation=None, evaluation_listeners=[], stop_requested=False)


def test_each_evaluation_is_a_json_line_and_the_run_stops_without_its_parent(tmp_path, monkeypatch):
    """Evaluations (None where there is none yet: no finished race) are appended as they come; when the parent
    process changes (the trial's worker ended), stop_requested is set within a few polls."""
    monkeypatch.setattr(tune_trial, "PARENT_POLL_S", 0.05)
    parent = [1234]
    monkeypatch.setattr(tune_trial.os, "getppid", lambda: parent[0])
    path = tmp_path / "progress.jsonl"
    gm = fake_graph_manager()
    tune_trial.reporter(path)(gm)
    for steps, last, best in [(500, None, None), (1000, 21.5, 21.5), (1500, 23.0, 21.5)]:
        gm.agent.counters.env_steps, gm.last_evaluation, gm.best_evaluation = steps, last, best
        for listener in gm.evaluation_listeners:
            listener(gm)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(x["env_steps"], x["last_evaluation"], x["best_evaluation"]) for x in lines] == [
        (500, None, None), (1000, 21.5, 21.5), (1500, 23.0, 21.5)]
    assert not gm.stop_requested
    parent[0] = 1  # reparented: the trial's worker is gone
    deadline = time.monotonic() + 5
    while not gm.stop_requested and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gm.stop_requested
