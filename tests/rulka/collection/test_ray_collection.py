"""Collectors as Ray actors: feeding the learner, surviving a killed actor, and the presets on Ray.

They run on a local Ray instance on 127.0.0.1 (the `ray` fixture of conftest.py) and skip,
saying why, only where Ray is not installed (``pip install 'rulka[ray]'``).
"""
import functools
import os
import sys
import threading
import time

import pytest

from agents.iqn_agent import IQNAgent
from rulka.config import ConfigError
from rulka.collection.owned import process_start_time
from rulka.collection.ray_collection import RayCollection
from rulka.graph_manager import BasicRLGraphManager
from tests.rulka.collection.envs import (check_watcher_kills_at_once, corridor_factory, game_owner_factory,
                                        games_started, kill_left, make_graph_manager, record_sources,
                                        refusing_corridor_factory, sigkill, small_config)


def _graph_manager(**performance):
    return make_graph_manager(collector_backend="ray", **performance)


def test_two_actors_with_batched_environments_feed_one_learner(ray, monkeypatch):
    """2 actors x 2 environments: the learner stores both, trains, publishes through the object store; none is left."""
    graph_manager = _graph_manager(envs_per_collector=2, send_shared_network_every_n_batches=2)
    sources, lags = record_sources(graph_manager)
    pids = []
    stop = RayCollection.stop
    monkeypatch.setattr(RayCollection, "stop", lambda self, **kw: (pids.extend(self.alive_pids()), stop(self, **kw)))
    summary = graph_manager.improve(1_500, show_progress=False)
    collection = graph_manager.collection
    assert summary.env_steps >= 1_500 and summary.gradient_updates > 0
    assert {(s[0], s[2]) for s in sources} == {(0, 0), (0, 1), (1, 2), (1, 3)}  # collector, instance
    assert max(lags) > 0  # actors acted with weights the learner published after training
    assert sum(collection.actions_per_node().values()) == sum(collection.actions_per_collector()) >= 1_500
    assert collection.stats.restarts == 0 and not collection.alive_pids()
    assert len(set(pids)) == 2 and _gone(pids)


def _gone(pids, within_s=10.0):
    """Whether all these processes have ended within ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        if not alive:
            return True
        time.sleep(0.2)
    return False


def test_an_actor_killed_mid_run_is_replaced_while_the_learner_trains(ray):
    """ray.kill one collector actor: the learner logs it, starts a new one, and gradient updates keep coming."""
    graph_manager = _graph_manager(collector_timeout_s=60.0)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (graph_manager.improve(4_000, show_progress=False), done.set()))
    thread.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and graph_manager.agent.counters.gradient_updates < 20:
        time.sleep(0.2)
    assert graph_manager.agent.counters.gradient_updates >= 20, "the run did not start training in time"
    victim = graph_manager.collection.actors[1]
    ray.kill(victim.handle)
    updates_at_kill = graph_manager.agent.counters.gradient_updates
    thread.join(180)
    assert done.is_set()
    collection = graph_manager.collection
    assert collection.stats.restarts == 1 and collection.incarnations == [1, 2]
    assert graph_manager.collector_events[0].startswith("collector 1 died")
    assert graph_manager.agent.counters.gradient_updates > updates_at_kill
    assert graph_manager.agent.counters.env_steps >= 4_000


@pytest.mark.reliability
def test_an_actors_games_are_killed_when_it_is_replaced_and_when_the_run_stops(ray, tmp_path):
    """An actor's environment runs a "game" in a session of its own (it outlives the actor). SIGKILL the
    actor: the learner kills the game it reported (by pid, under its start time) before the replacement
    starts, and says so; at the end of the run no game of any incarnation is left."""
    games = tmp_path / "games.txt"
    graph_manager = _graph_manager(collectors=1, collector_timeout_s=60.0,
                                   env_factory=functools.partial(game_owner_factory, str(games)))
    done = threading.Event()
    thread = threading.Thread(target=lambda: (graph_manager.improve(3_000, show_progress=False), done.set()))
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (graph_manager.collection and graph_manager.collection.actors[0]
                                                   and graph_manager.collection.actors[0].owned):
            time.sleep(0.1)
        actor = graph_manager.collection.actors[0]
        assert actor.owned and actor.ports == [45678], "the actor did not report its game"
        assert actor.pid, "the actor's report of its games did not say its pid"
        game = actor.owned[0][0]
        assert actor.owned_node == graph_manager.collection.node_id
        sigkill(actor.pid)  # the actor dies without closing its environment
        while time.monotonic() < deadline and not graph_manager.collector_events:  # logged after the kill
            time.sleep(0.1)
        assert process_start_time(game) is None, "the dead actor's game was not killed"  # gone, or a zombie
        event = graph_manager.collector_events[0]
        assert event.startswith("collector 0 died") and f"pids {game}; ports 45678) were killed" in event, event
        while time.monotonic() < deadline and len(games_started(games)) < 3:  # the replacement's game
            time.sleep(0.1)
        graph_manager.stop_requested = True  # what the test checks has happened: the run's rest adds nothing
    finally:
        thread.join(180)
        started = games_started(games)
        alive = kill_left(started)
    assert done.is_set() and not alive
    # the learner's own first environment (it reads the spaces, then closes it) and one per actor incarnation
    assert len(started) == 3 and all(process_start_time(pid) is None for pid in started)


@pytest.mark.reliability
def test_an_actor_that_dies_during_a_long_training_burst_is_replaced_within_seconds(ray, tmp_path):
    """As the process collectors' test of the same name: the actor is SIGKILLed at the start of a burst of
    at least 6 s of updates (slowed to 0.25 s); the actor watcher (each actor asked for its games every half
    second, beside its collect call) finds the question failed and kills its game, and the learner's check
    between updates (``supervise``) starts a new actor, within 3 s, before the burst ends. Without
    ``RayCollection.supervise`` the death is replaced only at the next poll, after the burst. No collect call is
    made during the burst (the actors still stop between races while the learner trains)."""
    games = tmp_path / "games.txt"
    graph_manager = _graph_manager(collectors=1, collector_timeout_s=60.0,
                                   env_factory=functools.partial(game_owner_factory, str(games)))
    agent = graph_manager.agent
    # an actor stops between races while the learner trains, so a poll brings a race or two of the short
    # corridor: 64 uses per transition make that a burst of dozens of updates, as batch 512 makes on a CPU
    agent.config.memory.number_times_single_memory_is_used_before_discard = 64.0
    learn = agent.learn_from_batch
    seen: dict = {}

    def slow_learn(batch):
        actor = graph_manager.collection.actors[0]
        if "kill" not in seen and agent.updates_allowed() >= 24 and actor is not None and actor.owned:
            seen["game"] = actor.owned[0][0]
            sigkill(actor.pid)
            seen["kill"] = time.monotonic()
        if "kill" in seen and "noticed" not in seen and graph_manager.collector_events:
            seen["noticed"] = time.monotonic()
            seen["allowed_then"] = agent.updates_allowed()
        if "kill" not in seen or ("noticed" not in seen and time.monotonic() - seen["kill"] < 10):
            time.sleep(0.25)
        if "noticed" in seen and time.monotonic() - seen["noticed"] > 2.0:
            graph_manager.stop_requested = True  # checked: the run's rest adds nothing
        return learn(batch)

    agent.learn_from_batch = slow_learn
    submit, train_and_log = RayCollection._submit, graph_manager.train_and_log
    training, submitted_in_burst = [], []

    def counting_submit(self, actor):
        if training and actor.incarnation == 1:
            submitted_in_burst.append(actor.collector_id)
        return submit(self, actor)

    def flagged_train_and_log():
        training.append(True)
        try:
            return train_and_log()
        finally:
            training.clear()

    RayCollection._submit = counting_submit
    graph_manager.train_and_log = flagged_train_and_log
    try:
        graph_manager.improve(3_000, show_progress=False)
    finally:
        RayCollection._submit = submit
        alive = kill_left(games_started(games))
    assert "kill" in seen, "no burst of 24 updates came: the test's run changed"
    assert "noticed" in seen, "the dead actor was not noticed within 10 s of a burst"
    assert seen["noticed"] - seen["kill"] <= 3.0, seen
    assert seen["allowed_then"] > 0, "noticed only once the burst had ended"
    event = graph_manager.collector_events[0]
    assert event.startswith("collector 0 died") and f"pids {seen['game']}; ports 45678) were killed" in event, event
    assert graph_manager.collection.stats.restarts == 1 and not alive
    assert submitted_in_burst == [], "a live actor was asked to collect between updates"


@pytest.mark.reliability
def test_a_dead_actors_game_is_killed_at_once_while_the_learners_thread_is_busy(ray, tmp_path, caplog):
    """As the process collectors' test of the same name: the learner's thread checks nothing (one gradient
    update took 5 s in a soak on 2 cores). SIGKILL the actor: the actor watcher, a thread of the learner's that
    asks each actor for its games every half second, sees its question fail, kills the game within 3 s of the
    kill (Ray's report of the death included) and logs the death; the learner's next check replaces the actor
    and names the game killed. Before the watcher the learner asked only between two updates."""
    games = tmp_path / "games.txt"
    graph_manager = _graph_manager(collectors=1, collector_timeout_s=60.0,
                                   env_factory=functools.partial(game_owner_factory, str(games)))
    collection = graph_manager.start_collection()
    caplog.set_level("WARNING", logger="rulka.collection")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (collection.actors[0].owned and collection.actors[0].pid):
            collection.poll(heatup=True, timeout=0.1)  # the learner at work until the kill: it learns the actor's pid
        actor = collection.actors[0]
        assert actor.owned and actor.ports == [45678], "the actor did not report its game"
        # within 3 s: Ray's report of the death included
        check_watcher_kills_at_once(graph_manager, collection, actor.pid, actor.owned[0][0], 3.0, caplog)
    finally:
        left = kill_left(games_started(games)[:2])  # the learner's first environment's and the dead actor's
        collection.stop()
        graph_manager.close()
        kill_left(games_started(games))
    assert not left


@pytest.mark.reliability
def test_an_actor_whose_race_cannot_start_is_named_at_once_while_the_learners_thread_is_busy(ray, tmp_path, caplog):
    """A game that cannot be relaunched at a race's start (a stranger took its port) ends the actor's playing
    thread. The actor watcher, which asks every actor for its games every half second, hears it in the answer:
    the error is logged within 2 s with the learner's thread idle, and the learner's next check replaces the
    actor and names the error. Before, the error waited in the actor until the learner's next call took it: in
    the 10-minute stranger check of 2026-12-07 (Ray, 2 cores) two strangers were named 8 s late."""
    trigger = tmp_path / "refuse"
    raised = tmp_path / "refuse.raised"
    graph_manager = _graph_manager(collectors=1, collector_timeout_s=60.0,
                                   env_factory=functools.partial(refusing_corridor_factory, str(trigger)))
    collection = graph_manager.start_collection()
    caplog.set_level("WARNING", logger="rulka.collection")

    def named() -> bool:
        return any("collector 0 stopped playing: RuntimeError: port 45678 is held by pid 4242" in record.getMessage()
                   for record in caplog.records)

    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not collection.actors[0].pid:
            collection.poll(heatup=True, timeout=0.1)  # the learner at work until it knows the actor
        assert collection.actors[0].pid, "the actor sent nothing within 120 s"
        trigger.touch()
        collection.poll(heatup=True, timeout=0.1)  # takes what the actor holds: it starts new races, which fail
        while not raised.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert raised.exists(), "the actor started no race after the learner's call"
        raised_at = float(raised.read_text().split()[0])
        while not named() and time.time() - raised_at < 10:
            time.sleep(0.02)
        took = time.time() - raised_at
        assert named(), caplog.text
        assert took < 2.0, f"the error was logged {took:.1f} s after the actor's race failed to start"
        assert not graph_manager.collector_events  # replacing the actor is the learner's, at its next check
        collection.supervise()
        assert collection.stats.restarts == 1
        event = graph_manager.collector_events[0]
        assert event.startswith("collector 0 stopped playing: RuntimeError: port 45678 is held by pid 4242"), event
    finally:
        trigger.unlink(missing_ok=True)
        collection.stop()
        graph_manager.close()


def test_an_unknown_backend_or_missing_ray_is_a_clear_error(monkeypatch):
    """A misspelt backend, and the ray backend without Ray installed, are refused with the fix."""
    config = small_config(collectors=1, collector_backend="rya")
    with pytest.raises(ConfigError, match=r"performance.collector_backend: must be one of 'processes', 'ray', got 'rya'"):
        BasicRLGraphManager(IQNAgent, config, env_factory=corridor_factory).create(None, "cpu", 0)  # before any work
    config.performance.collector_backend = "processes"
    graph_manager = BasicRLGraphManager(IQNAgent, config, env_factory=corridor_factory).create(None, "cpu", 0)
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    graph_manager.config.performance.collector_backend = "ray"
    with pytest.raises(ConfigError, match=r"pip install 'rulka\[ray\]'"):
        graph_manager.improve(10, show_progress=False)


def test_ray_address_is_auto_host_port_or_none():
    """--ray-address accepts auto, HOST:PORT and none (a local instance); anything else is refused with the forms."""
    from rulka.cli import _ray_address

    assert _ray_address(None) is None and _ray_address("none") is None
    assert _ray_address("auto") == "auto" and _ray_address("192.168.1.10:6379") == "192.168.1.10:6379"
    with pytest.raises(ConfigError, match="give auto, HOST:PORT"):
        _ray_address("192.168.1.10")


def test_trackmania_iqn_sim_trains_with_ray_collectors(ray, tmp_path):
    """The simulator preset through the command line with collector_backend: ray: races logged, gradient updates made."""
    from rulka import checkpoints
    from rulka.cli import main

    assert main(["-p", "trackmania_iqn_sim", "-e", "r", "--experiments-dir", str(tmp_path), "--max-steps", "1000",
                 "-cp", "memory.memory_size_schedule=[[0, [3000, 300]]]", "-cp", "training.batch_size=16",
                 "-cp", "training.checkpoint_every_n_env_steps=0", "-cp", "performance.collector_backend=ray",
                 "-cp", "performance.gpu_collectors_count=1", "-cp", "performance.torch_num_threads=1",
                 "--ray-address", "none", "--device", "cpu", "--no-progress"]) == 0
    saved = checkpoints.load_checkpoint(tmp_path / "r" / "checkpoints" / checkpoints.LAST)
    assert saved["agent"]["counters"]["env_steps"] >= 1000
    assert saved["agent"]["counters"]["gradient_updates"] > 0
    assert len((tmp_path / "r" / "races.csv").read_text().splitlines()) >= 2  # header and at least one race


@pytest.mark.golden
def test_cartpole_iqn_reaches_its_golden_threshold_with_a_ray_collector(ray):
    """cartpole_iqn with one Ray collector actor reaches its preset's threshold within its step limit (seed 0, CPU)."""
    from rulka.presets import load_graph_manager

    graph_manager = load_graph_manager("cartpole_iqn")
    graph_manager.config.performance.collector_backend = "ray"
    graph_manager.config.performance.gpu_collectors_count = 1
    validation = graph_manager.preset_validation_params
    graph_manager.create(None, "cpu", seed=0)
    summary = graph_manager.improve(validation.max_env_steps, stop_at_evaluation=validation.min_reward_threshold,
                                    show_progress=False)
    graph_manager.close()
    assert summary.reached_threshold, (f"best evaluation {summary.best_evaluation} after {summary.env_steps} env "
                                       f"steps; history {graph_manager.evaluation_history}")
    assert summary.env_steps <= validation.max_env_steps


@pytest.mark.reliability
def test_an_actor_plays_its_race_to_the_end_while_the_learner_pauses_and_waits_between_races(ray, tmp_path):
    """Races of 40 actions (5 ms each) in chunks of 5: the learner takes the first call's chunks, then reads
    nothing for 3 s (a checkpoint, an evaluation). The actor plays the race in flight to its end without a
    pause (its calls in flight alone hold 2 chunks: it used to stop there, mid-race), starts no new race
    while chunks wait, checking its environment about once a second meanwhile (``check_between_episodes``),
    and once the learner reads again it gets every chunk, in order, and races on."""
    from tests.rulka.collection.envs import read_checks, read_timeline, timed_race_to

    timeline = tmp_path / "timeline.txt"
    graph_manager = make_graph_manager(env_factory=functools.partial(timed_race_to, str(timeline)), collectors=1,
                                       rollout_chunk_actions=5, collector_backend="ray", collector_timeout_s=60.0)
    collection = RayCollection(graph_manager.collector_setup(), graph_manager.agent)
    rollouts = []
    try:
        collection.start(graph_manager.agent, heatup=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not rollouts:
            rollouts += collection.poll(True, timeout=0.05)  # the first call: the actor is up and racing
        paused_at = time.monotonic()
        time.sleep(3.0)  # the learner pauses: reads nothing
        races = read_timeline(timeline)
        assert len(races[0]) == 40 + 1, f"the race in flight stopped after {len(races[0]) - 1} actions"
        assert len(races) <= 2 and (len(races) == 1 or len(races[1]) == 1), \
            "the actor started racing again while its chunks waited for the learner"
        gaps = [b - a for race in races for a, b in zip(race, race[1:])]
        assert max(gaps) < 1.0, f"the actor paused {max(gaps):.2f} s in the middle of a race"
        while time.monotonic() < deadline and sum(r.episode_ended for r in rollouts) < 2:
            rollouts += collection.poll(True, timeout=0.05)
    finally:
        collection.stop()
    first = [r for r in rollouts if r.episode == 1]
    assert [r.length for r in first] == [5] * 8 and first[-1].terminated
    races = read_timeline(timeline)
    assert races[1][0] - races[0][-1] > 2.0 and races[1][0] > paused_at + 2.0, "no wait between races"
    checks = read_checks(timeline)
    assert len([t for t in checks if races[0][-1] < t < races[1][0]]) >= 2, "the environment waited unchecked"
    assert not [t for race in races for t in checks if race[0] < t < race[-1]], "checked during a race"
    assert collection.stats.restarts == 0
