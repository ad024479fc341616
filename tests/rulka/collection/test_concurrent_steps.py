"""Collectors that step their environments at the same time (environments that wait on I/O)."""
from __future__ import annotations

import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from agents.iqn_agent import IQNAgent
from filters import InputFilter, OutputFilter
from rulka.collection.collector import Collector
from rulka.collection.concurrent_steps import StepPool, steps_wait_on_io, use_concurrent_steps
from rulka.collection.rollout import EpisodePlan
from rulka.level_manager import LevelManager
from tests.rulka.collection.envs import Corridor, small_config


class WaitingCorridor(Corridor):
    """The corridor whose reset and step wait ``wait_s`` seconds with the CPU idle (a game behind a
    socket), and whose observations carry a number drawn from the reset seed."""

    steps_wait_on_io = True

    def __init__(self, wait_s: float = 0.01, fault_at: int = 0) -> None:
        super().__init__(length=6, limit=9, fault="raise" if fault_at else "", fault_at=fault_at)
        self.wait_s = wait_s

    def reset(self, *, seed=None, options=None):
        time.sleep(self.wait_s)
        gym.Env.reset(self, seed=seed)
        self.position, self.t = 0, 0
        self.draw = float(self.np_random.random())
        return self._obs(), {}

    def step(self, action):
        time.sleep(self.wait_s)
        return super().step(action)

    def _obs(self):
        return {"observation": np.array([self.position + self.draw, self.t], dtype=np.float32)}


class PhasedCorridor(WaitingCorridor):
    """The waiting corridor that also offers phased steps, as a game behind a socket does: the
    request goes out, the reply is ready ``wait_s`` later (the game computes meanwhile); ``log``
    records each send and receive with the thread that did it."""

    def __init__(self, wait_s: float = 0.01, fault_at: int = 0, name: int = 0, log: list | None = None) -> None:
        super().__init__(wait_s, fault_at)
        self.name, self.log = name, log if log is not None else []

    def step_phases(self, action):
        ready_at = time.perf_counter() + self.wait_s
        self.log.append(("send", self.name, threading.get_ident()))
        yield
        time.sleep(max(0.0, ready_at - time.perf_counter()))
        self.log.append(("receive", self.name, threading.get_ident()))
        return Corridor.step(self, action)


def _collector(envs, concurrent, on_reset=None):
    agent = IQNAgent(small_config(), Corridor.observation_space, Corridor.action_space, "cpu", seed=3)
    levels = [LevelManager(agent, env, InputFilter(), OutputFilter()) for env in envs]
    return Collector(agent, levels, [EpisodePlan() for _ in envs], seed=11, chunk_actions=4, on_reset=on_reset,
                     concurrent=concurrent)


def _play(collector, steps, heatup=False):
    rollouts = []
    t0 = time.perf_counter()
    for _ in range(steps):
        rollouts += collector.step(heatup=heatup)
    return rollouts, time.perf_counter() - t0


def test_four_waiting_environments_step_about_four_times_faster_with_the_same_rollouts():
    """The point of the option: 4 environments that wait 20 ms per reset and step are stepped at the same
    time (a step lasts one wait, not four), and the rollouts are those of stepping them one after another:
    same actions, states, rewards, chunk boundaries and episode ends, in the same order. (Heatup's
    seeded random actions: the timing is the environments', not the network's.)"""
    steps = 30
    sequential = _collector([WaitingCorridor(0.02) for _ in range(4)], concurrent=False)
    together = _collector([WaitingCorridor(0.02) for _ in range(4)], concurrent=True)
    assert not sequential.concurrent and together.concurrent
    try:
        expected, t_sequential = _play(sequential, steps, heatup=True)
        got, t_together = _play(together, steps, heatup=True)
    finally:
        sequential.close()
        together.close()
    assert t_sequential / t_together > 2.5, (t_sequential, t_together)  # ~4x; slack for a loaded machine
    assert len(got) == len(expected) > 4 * 4  # several episodes and chunks per environment
    for a, b in zip(expected, got):
        assert (a.source, a.episode, a.length, a.terminated, a.truncated) == (b.source, b.episode, b.length,
                                                                              b.terminated, b.truncated)
        assert np.array_equal(a.actions, b.actions) and np.array_equal(a.rewards, b.rewards)
        assert np.array_equal(a.states["observation"], b.states["observation"])
        assert np.array_equal(a.step_policy_updates, b.step_policy_updates)
        assert len(a.step_times) == a.length == len(b.step_times)
    assert together.actions_played == sequential.actions_played == 4 * steps


def test_phased_environments_step_interleaved_in_the_collectors_thread_with_the_same_rollouts():
    """Environments that offer ``step_phases`` (the real game's backend) are stepped in the collector's own
    thread, every request sent before any reply is read: 4 environments whose replies take 20 ms step in
    about one wait, not four, with no thread hand-off, and the rollouts are those of stepping them one
    after another."""
    steps, log = 30, []
    sequential = _collector([WaitingCorridor(0.02) for _ in range(4)], concurrent=False)
    phased = _collector([PhasedCorridor(0.02, name=k, log=log) for k in range(4)], concurrent=True)
    assert phased.phased and not sequential.phased
    wrapped = _collector([gym.wrappers.TimeLimit(PhasedCorridor(), 100) for _ in range(2)], concurrent=True)
    assert not wrapped.phased  # a wrapper's own step would be skipped: threads then
    wrapped.close()
    try:
        expected, t_sequential = _play(sequential, steps, heatup=True)
        log.clear()  # the first call's resets are included in neither count
        got, t_phased = _play(phased, steps, heatup=True)
    finally:
        sequential.close()
        phased.close()
    assert t_sequential / t_phased > 2.0, (t_sequential, t_phased)  # ~4x; slack for a loaded machine
    assert {thread for _, _, thread in log} == {threading.get_ident()}
    first_step = [(what, name) for what, name, _ in log[:8]]
    assert first_step == [("send", k) for k in range(4)] + [("receive", k) for k in range(4)]
    assert len(got) == len(expected) > 4 * 4
    for a, b in zip(expected, got):
        assert (a.source, a.episode, a.length, a.terminated, a.truncated) == (b.source, b.episode, b.length,
                                                                              b.terminated, b.truncated)
        assert np.array_equal(a.actions, b.actions) and np.array_equal(a.rewards, b.rewards)
        assert np.array_equal(a.states["observation"], b.states["observation"])


def test_an_error_in_a_phased_step_is_raised_after_the_others_were_recorded():
    """A phased step that raises: the other environments' steps still end and are recorded, then the error
    reaches ``Collector.step``, as with the thread pool."""
    envs = [PhasedCorridor(0.0), PhasedCorridor(0.0, fault_at=3), PhasedCorridor(0.0)]
    collector = _collector(envs, concurrent=True)
    assert collector.phased
    with pytest.raises(RuntimeError, match="exploded on purpose"):
        for _ in range(5):
            collector.step(heatup=False)
    assert [slot.level.episode_length for slot in collector.slots] == [3, 2, 3]
    collector.close()


def test_auto_steps_concurrently_only_when_every_environment_declares_it_waits_on_io():
    """``concurrent_env_steps: auto`` (the default): environments that compute in-process (the
    simulator) keep stepping one after another; the declaration is found through gymnasium wrappers."""
    waiting = [gym.wrappers.TimeLimit(WaitingCorridor(0.0), 100) for _ in range(2)]
    assert steps_wait_on_io(waiting[0]) and not steps_wait_on_io(Corridor())
    assert use_concurrent_steps("auto", waiting)
    assert not use_concurrent_steps("auto", [waiting[0], Corridor()])
    assert not use_concurrent_steps("auto", waiting[:1])  # one environment: nothing to overlap
    assert use_concurrent_steps(True, [Corridor(), Corridor()]) and not use_concurrent_steps(False, waiting)
    collector = _collector([Corridor(), Corridor()], concurrent="auto")
    assert not collector.concurrent and collector._pool is None
    collector.close()


def test_an_error_in_a_concurrent_step_reaches_the_caller_and_the_threads_end_on_close():
    """An environment that raises in its thread raises in ``Collector.step`` as it did when stepped in
    line; the other environments' steps are recorded; ``close`` ends the pool's threads."""
    envs = [WaitingCorridor(0.0), WaitingCorridor(0.0, fault_at=3), WaitingCorridor(0.0)]
    collector = _collector(envs, concurrent=True)
    with pytest.raises(RuntimeError, match="exploded on purpose"):
        for _ in range(5):
            collector.step(heatup=False)
    assert [slot.level.episode_length for slot in collector.slots] == [3, 2, 3]
    assert [len(slot.actions) for slot in collector.slots] == [3, 2, 3]
    collector.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("rulka-env-step")]


def test_concurrent_resets_keep_the_reset_bracket_on_until_the_last_one_ends():
    """``on_reset`` (a collector process's heartbeat during game launches and map loads) is switched on
    before resets that run at the same time and off only after all of them returned."""
    events = []
    flag = {"on": False}

    def on_reset(resetting: bool) -> None:
        flag["on"] = resetting
        events.append(resetting)

    class Watched(WaitingCorridor):
        def reset(self, *, seed=None, options=None):
            events.append("reset, bracket on" if flag["on"] else "reset, bracket OFF")
            return super().reset(seed=seed, options=options)

    collector = _collector([Watched(0.02) for _ in range(3)], concurrent=True, on_reset=on_reset)
    collector.step(heatup=False)
    collector.close()
    assert events[0] is True and events[-1] is False and events.count(True) == 1
    assert events[1:-1] == ["reset, bracket on"] * 3


def test_step_pool_runs_fewer_calls_than_its_size_and_raises_the_first_error():
    """The pool behind it: ``count`` calls at once, the error of the lowest index raised after all ran."""
    pool = StepPool(4)
    seen = [0] * 4
    try:
        def call(k):
            seen[k] += 1
            if k >= 1:
                raise ValueError(f"call {k}")

        with pytest.raises(ValueError, match="call 1"):
            pool.run(call, 3)
        assert seen == [1, 1, 1, 0]
        pool.run(lambda k: seen.__setitem__(k, seen[k] + 10), 4)  # the errors were cleared
        assert seen == [11, 11, 11, 10]
    finally:
        pool.close()
