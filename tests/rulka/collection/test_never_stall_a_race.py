"""Collector processes never wait for the learner in the middle of a race (a real game drops a race it
waited in past its in-race timeout): they play the race to its end into a local buffer and wait between
races; and their heartbeat goes on while an environment resets (a game's launch), so a reset longer
than ``collector_timeout_s`` does not get them killed."""
import time

import pytest

from rulka.collection.processes import ProcessCollection
from tests.rulka.collection.envs import make_graph_manager, read_checks, read_timeline, timed_race_factory

#: A TimedRace is 40 steps of 5 ms: 0.2 s of racing, sent in chunks of 5 actions.
RACE_ACTIONS = 40


def _collection(**performance):
    graph_manager = make_graph_manager(env_factory=timed_race_factory, collectors=1, rollout_chunk_actions=5,
                                       **performance)
    return graph_manager, ProcessCollection(graph_manager.collector_setup(), graph_manager.agent)


def _poll_until(collection, heatup, done, timeout_s):
    rollouts = []
    deadline = time.monotonic() + timeout_s
    while not done(rollouts) and time.monotonic() < deadline:
        rollouts += collection.poll(heatup, timeout=0.05)
    return rollouts


@pytest.mark.reliability
def test_a_learner_that_does_not_read_stalls_the_collector_between_races_not_inside_one(tmp_path, monkeypatch):
    """Queue share 1 chunk, chunks of 5 actions, races of 40: the learner reads nothing for 3 s. The
    collector plays the whole first race without a pause (it would otherwise wait at its second chunk,
    mid-race), then waits before the next reset until the learner reads, checking its environment meanwhile
    about once a second (``check_between_episodes``: a game that dies or hangs while it waits is found then,
    not at the next race), never during a race; every chunk of the first race then arrives, in order, and
    the race is whole."""
    timeline = tmp_path / "timeline.txt"
    monkeypatch.setenv("RULKA_TEST_TIMELINE", str(timeline))
    graph_manager, collection = _collection(max_rollout_queue_size=1, collector_timeout_s=60.0)
    try:
        collection.start(graph_manager.agent, heatup=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (timeline.exists() and len(read_timeline(timeline)[0]) > 1):
            time.sleep(0.05)  # the collector process starts (imports, builds its agent) and plays its first step
        time.sleep(3.0)  # the learner stalls: nothing is read (the race takes 0.2 s)
        races = read_timeline(timeline)
        assert len(races[0]) == RACE_ACTIONS + 1, "the first race did not finish while the learner stalled"
        assert len(races) <= 2 and (len(races) == 1 or len(races[1]) == 1), \
            "the collector started racing again while its chunks waited for the learner"
        gaps = [b - a for race in races for a, b in zip(race, race[1:])]
        assert max(gaps) < 1.0, f"the collector paused {max(gaps):.2f} s in the middle of a race"

        rollouts = _poll_until(collection, True, lambda got: sum(r.episode_ended for r in got) >= 2, 60)
    finally:
        collection.stop()
    first = [r for r in rollouts if r.episode == 1]
    assert [r.length for r in first] == [5] * (RACE_ACTIONS // 5) and first[-1].terminated
    assert sum(r.length for r in first) == first[-1].episode_length == RACE_ACTIONS
    races = read_timeline(timeline)
    waited = races[1][0] - races[0][-1]  # from the first race's end to the second reset
    assert waited > 2.0, f"the collector did not wait between races ({waited:.2f} s)"
    checks = read_checks(timeline)
    assert len([t for t in checks if races[0][-1] < t < races[1][0]]) >= 2, "the environment waited unchecked"
    assert not [t for race in races for t in checks if race[0] < t < race[-1]], "checked during a race"
    assert collection.stats.restarts == 0 and not collection.alive_pids()


@pytest.mark.reliability
def test_a_reset_longer_than_the_collector_timeout_keeps_the_heartbeat_going(tmp_path, monkeypatch):
    """Every reset takes 5 s (a game's launch, map load, countdown), collector_timeout_s is 2.5 s: the
    collector is not killed, races keep arriving."""
    monkeypatch.setenv("RULKA_TEST_RESET_S", "5")
    graph_manager, collection = _collection(collector_timeout_s=2.5)
    try:
        collection.start(graph_manager.agent, heatup=True)
        rollouts = _poll_until(collection, True, lambda got: sum(r.episode_ended for r in got) >= 2, 90)
    finally:
        collection.stop()
    assert collection.stats.restarts == 0, collection.stats.events
    assert sum(r.episode_ended for r in rollouts) >= 2
    assert not collection.alive_pids()
