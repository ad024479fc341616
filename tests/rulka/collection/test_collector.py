import numpy as np
import torch

from agents.iqn_agent import IQNAgent
from filters import InputFilter, OutputFilter
from rulka.collection.collector import Collector
from rulka.collection.episodes import EpisodeGatherer, store_rollout
from rulka.collection.rollout import EpisodePlan
from rulka.level_manager import LevelManager
from tests.rulka.collection.envs import Corridor, small_config


def _agent(config=None):
    config = config or small_config()
    env = Corridor()
    return IQNAgent(config, env.observation_space, env.action_space, "cpu", seed=0)


def _collector(agent, k, **kwargs):
    levels = [LevelManager(agent, Corridor(), InputFilter(), OutputFilter()) for _ in range(k)]
    return Collector(agent, levels, [EpisodePlan() for _ in range(k)], **kwargs)


def test_actions_of_all_environments_come_from_one_forward_pass(monkeypatch):
    """Batched inference: k environments, one q_values call per step with a batch of k."""
    agent = _agent()
    calls = []
    original = agent.q_values
    monkeypatch.setattr(agent, "q_values", lambda obs: calls.append(len(obs["observation"])) or original(obs))
    collector = _collector(agent, 8)
    for _ in range(5):
        collector.step(heatup=False)
    assert calls == [8] * 5
    assert collector.actions_played == 40


def test_long_episodes_come_in_chunks_that_rebuild_the_episode():
    """An episode longer than chunk_actions arrives in pieces; joined, they are the episode, states once."""
    agent = _agent()
    collector = _collector(agent, 1, chunk_actions=7)
    gatherer = EpisodeGatherer(keep_steps=True)
    chunks, record = [], None
    while record is None:
        for rollout in collector.step(heatup=True):
            chunks.append(rollout)
            record = gatherer.add(rollout)
    assert all(c.length == 7 for c in chunks[:-1]) and chunks[-1].length <= 7
    assert not any(c.episode_ended for c in chunks[:-1]) and chunks[-1].episode_ended
    states = record.states("observation")
    assert len(states) == record.length + 1 == sum(c.length for c in chunks) + 1
    assert np.array_equal(states[:, 1], np.arange(record.length + 1))  # the step counter, each state once
    assert record.final_info["position"] == states[-1, 0]


def test_a_cut_chunk_is_stored_as_a_truncation_and_a_continued_one_is_not():
    """Chunks from processes end in a cut (bootstrap from their last state); the learner's own chunks continue."""
    for continues, expected_slots in ((False, 2 * 3 + 2), (True, 6 + 1)):
        agent = _agent()
        collector = _collector(agent, 1, chunk_actions=3, continues=continues)
        rollouts = []
        while sum(r.length for r in rollouts) < 6:
            rollouts += collector.step(heatup=True)
        for rollout in rollouts[:2]:
            store_rollout(agent, rollout)
        assert agent.counters.env_steps == 6
        if continues:  # one open episode: 6 steps, no final state yet (+1 is the next write)
            assert agent.memory.num_slots_used == expected_slots - 1
        else:  # two stretches of 3 steps, each closed by its own last state
            assert agent.memory.num_slots_used == expected_slots
        assert agent.counters.episodes == 0


def test_evaluation_environments_and_training_ones_do_not_share_an_action_batch():
    """Environments in different phases (exploring vs greedy) still get their own phase's actions."""
    agent = _agent()
    agent.exploration.rng = np.random.default_rng(0)

    class Greedy(EpisodePlan):
        def next_episode(self):
            from rulka.collection.rollout import EpisodeSpec

            return EpisodeSpec(explore=False, store=False)

    levels = [LevelManager(agent, Corridor(), InputFilter(), OutputFilter()) for _ in range(2)]
    collector = Collector(agent, levels, [EpisodePlan(), Greedy()])
    rollouts = []
    with torch.no_grad():
        for _ in range(200):
            rollouts += collector.step(heatup=False)
    greedy = [r for r in rollouts if not r.spec.explore]
    exploring = [r for r in rollouts if r.spec.explore]
    assert greedy and exploring
    assert all(r.was_greedy.all() for r in greedy)  # epsilon is 1 at step 0: any exploration would show
    assert not all(r.was_greedy.all() for r in exploring)


def test_a_greedy_race_begun_in_heatup_is_not_an_evaluation():
    """A greedy (explore: false) episode with actions played in heatup is marked played_in_heatup, and the
    race log counts it as exploration, not as the map's evaluation; one played wholly after heatup is one."""
    from environments.trackmania.training.race_log import RaceLog
    from rulka.collection.rollout import EpisodeSpec

    class Greedy(EpisodePlan):
        def next_episode(self):
            return EpisodeSpec(explore=False, store=False, tag="m")

    agent = _agent()
    collector = Collector(agent, [LevelManager(agent, Corridor(), InputFilter(), OutputFilter())], [Greedy()])
    gatherer, records = EpisodeGatherer(keep_steps=False), []
    steps = 0
    while len(records) < 3:
        for rollout in collector.step(heatup=steps < 3):  # heatup ends 3 actions into the first race
            record = gatherer.add(rollout)
            if record is not None:
                records.append(record)
        steps += 1
    assert [r.played_in_heatup for r in records] == [True, False, False]
    log = RaceLog(None, lambda values: None, 50)
    assert [log.record(r, 0, 0.0).exploration for r in records] == [True, False, False]


def test_episodes_started_continue_seeds_and_plans():
    """A collector given episodes_started (a replaced collector, a resumed run) resets with the next seeds and
    advances its plans, instead of replaying episode 1's start conditions."""
    from rulka.collection.collector import episode_seed
    from rulka.collection.rollout import EpisodeSpec

    class Counting(EpisodePlan):
        def __init__(self):
            self.position = 0

        def next_episode(self):
            self.position += 1
            return EpisodeSpec(tag=str(self.position))

    agent = _agent()
    seeds = []

    class Recording(Corridor):
        def reset(self, *, seed=None, options=None):
            seeds.append(seed)
            return super().reset(seed=seed, options=options)

    plans = [Counting(), Counting()]
    levels = [LevelManager(agent, Recording(), InputFilter(), OutputFilter()) for _ in range(2)]
    collector = Collector(agent, levels, plans, seed=3, instances=[4, 5], episodes_started=[7, 0])
    collector.step(heatup=True)
    assert seeds == [episode_seed(3, 4, 7), episode_seed(3, 5, 0)]
    assert [slot.spec.tag for slot in collector.slots] == ["8", "1"]
    assert [slot.episodes_started for slot in collector.slots] == [8, 1]


def test_without_episode_starts_a_finished_environment_waits_and_the_others_play_on():
    """step(start_episodes=False): an environment whose episode ended is not reset and plays nothing while the
    others play; once all wait, a step plays nothing; step() then resets them (back-pressure between races)."""
    agent = _agent()
    collector = _collector(agent, 2)
    collector.step(heatup=True)
    played = []
    for _ in range(200):
        if not collector.racing:
            break
        racing_before = sum(slot.level.observation is not None for slot in collector.slots)
        collector.step(heatup=True, start_episodes=False)
        played.append(collector.last_step_actions)
        assert collector.last_step_actions == racing_before
    assert not collector.racing and [slot.episodes_started for slot in collector.slots] == [1, 1]
    assert collector.step(heatup=True, start_episodes=False) == [] and collector.last_step_actions == 0
    assert collector.actions_played == 2 + sum(played)
    collector.step(heatup=True)
    assert collector.racing and [slot.episodes_started for slot in collector.slots] == [2, 2]


class _CheckedCorridor(Corridor):
    """A corridor that counts the collector's ``check_between_episodes`` calls and when they came."""

    def __init__(self, limit: int) -> None:
        super().__init__(length=10 ** 6, limit=limit)
        self.checks: list[bool] = []  # per call: was an episode running?
        self.running = False

    def reset(self, *, seed=None, options=None):
        self.running = True
        return super().reset(seed=seed, options=options)

    def step(self, action):
        result = super().step(action)
        self.running = not (result[2] or result[3])
        return result

    def check_between_episodes(self) -> None:
        self.checks.append(self.running)


def test_an_environment_kept_waiting_between_episodes_is_checked_about_once_a_second(monkeypatch):
    """While the caller holds back new episodes, an environment whose episode ended is checked (the
    ``check_between_episodes`` hook: a game that died or hung while it waited is found then), never one in
    the middle of an episode; ``on_reset`` brackets each check (it may relaunch a game); checks come at most
    once per WAITING_CHECK_INTERVAL_S."""
    from rulka.collection import collector as collector_module

    agent = _agent()
    envs = [_CheckedCorridor(limit=3), _CheckedCorridor(limit=30)]
    levels = [LevelManager(agent, env, InputFilter(), OutputFilter()) for env in envs]
    brackets: list[bool] = []
    collector = Collector(agent, levels, [EpisodePlan(), EpisodePlan()], on_reset=brackets.append)
    monkeypatch.setattr(collector_module, "WAITING_CHECK_INTERVAL_S", 0.0)
    collector.step(heatup=True)
    for _ in range(10):
        collector.step(heatup=True, start_episodes=False)
    assert envs[0].checks and not any(envs[0].checks) and envs[1].checks == []
    assert len(envs[0].checks) >= 7  # from its episode's end (3 steps) on, at every step
    assert brackets[-2:] == [True, False]
    monkeypatch.setattr(collector_module, "WAITING_CHECK_INTERVAL_S", 60.0)
    seen = len(envs[0].checks)
    for _ in range(5):
        collector.check_waiting()
    assert len(envs[0].checks) == seen + 1
