"""Small environments for the collection tests (module level: collector processes unpickle them)."""
from __future__ import annotations

import os
import signal
import time

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rulka.parameters import ExperimentConfig, MemoryParameters, NeuralNetworkParameters, TrainingParameters
from rulka.schedules import Schedule


class Corridor(gym.Env):
    """Walk right to the end of a corridor of ``length`` cells (action 1 = right, 0 = stay).

    Observations are ``{"observation": [position, step]}``; reward 1 at the end (terminated),
    truncated after ``limit`` steps. ``crash_at`` / ``hang_at``: raise or hang at that global step
    of this process (for fault tests); ``corridor_factory`` gives them to the first incarnation only.
    """

    observation_space = spaces.Dict({"observation": spaces.Box(-1e6, 1e6, (2,), np.float32)})
    action_space = spaces.Discrete(2)

    def __init__(self, length: int = 5, limit: int = 30, fault: str = "", fault_at: int = 0) -> None:
        self.length, self.limit = length, limit
        self.fault, self.fault_at = fault, fault_at
        self.total_steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position, self.t = 0, 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.total_steps += 1
        if self.fault and self.total_steps == self.fault_at:
            if self.fault == "raise":
                raise RuntimeError("corridor exploded on purpose")
            if self.fault == "hang":
                time.sleep(3600)
        self.position += int(action)
        terminated = self.position >= self.length
        truncated = not terminated and self.t >= self.limit
        return self._obs(), float(terminated), terminated, truncated, {"position": float(self.position)}

    def _obs(self):
        return {"observation": np.array([self.position, self.t], dtype=np.float32)}


class SlowCorridor(Corridor):
    """A corridor too long to finish, whose steps take ``step_s`` seconds (a collector call lasts a while)."""

    def __init__(self, step_s: float = 0.0005) -> None:
        super().__init__(length=10 ** 9, limit=10 ** 9)
        self.step_s = step_s

    def step(self, action):
        time.sleep(self.step_s)
        return super().step(action)


def slow_corridor_factory(params, instance: int = 0) -> gym.Env:
    return SlowCorridor()


class PacedCorridor(Corridor):
    """The corridor with steps of ``step_s`` seconds (a game's pace: the learner makes few updates per action)."""

    def __init__(self, step_s: float = 0.002) -> None:
        super().__init__()
        self.step_s = step_s

    def step(self, action):
        time.sleep(self.step_s)
        return super().step(action)


def paced_corridor_factory(params, instance: int = 0) -> gym.Env:
    return PacedCorridor()


class RefusingCorridor(PacedCorridor):
    """The paced corridor whose races cannot start once the file ``trigger`` exists, as a game that cannot be
    relaunched at a race's start (a stranger took its port): ``reset`` waits half a second (the launch), appends
    the time to ``trigger + ".raised"`` and raises an error that names the stranger."""

    def __init__(self, trigger: str) -> None:
        super().__init__()
        self.trigger = trigger

    def reset(self, *, seed=None, options=None):
        if os.path.exists(self.trigger):
            time.sleep(0.5)
            with open(self.trigger + ".raised", "a") as raised:
                raised.write(f"{time.time()}\n")
            raise RuntimeError("port 45678 is held by pid 4242, which rulka did not launch: stop it")
        return super().reset(seed=seed, options=options)


def refusing_corridor_factory(trigger: str, params, instance: int = 0) -> gym.Env:
    return RefusingCorridor(trigger)


def corridor_factory(params, instance: int = 0) -> gym.Env:
    """Environment ``instance``; collector processes whose incarnation is 1 get the fault of RULKA_TEST_FAULT.

    RULKA_TEST_STEP_S paces the healthy corridors (seconds per step), which bounds how many steps they
    can play while a fault is being noticed, on any machine.
    """
    fault = os.environ.get("RULKA_TEST_FAULT", "")
    if fault and instance == 0 and os.environ.get("RULKA_TEST_FAULT_DONE") != "1" and _first_incarnation():
        return Corridor(fault=fault, fault_at=int(os.environ.get("RULKA_TEST_FAULT_AT", "60")))
    step_s = float(os.environ.get("RULKA_TEST_STEP_S", "0"))
    return PacedCorridor(step_s) if step_s > 0 else Corridor()


def _first_incarnation() -> bool:
    import multiprocessing

    name = multiprocessing.current_process().name
    marker = os.environ.get("RULKA_TEST_FAULT_MARKER", "")
    if not name.startswith("rulka-collector") or not marker:
        return False
    try:  # only the first process to claim the marker file gets the fault
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def small_config(collectors: int = 0, envs_per_collector: int = 1, **performance) -> ExperimentConfig:
    config = ExperimentConfig(
        neural_network=NeuralNetworkParameters(vector_embedder_hidden_sizes=[16], dense_hidden_dimension=16,
                                               iqn_n=4, iqn_k=4),
        training=TrainingParameters(batch_size=16, n_steps=2, evaluate_every_n_env_steps=0,
                                    checkpoint_every_n_env_steps=0, max_env_steps=2_000),
        memory=MemoryParameters(memory_size_schedule=Schedule([(0, (5_000, 100))], "staircase"),
                                number_times_single_memory_is_used_before_discard=4.0),
    )
    config.performance.gpu_collectors_count = collectors
    config.performance.envs_per_collector = envs_per_collector
    config.performance.torch_num_threads = 1
    for key, value in performance.items():
        setattr(config.performance, key, value)
    return config


def make_graph_manager(env_factory=None, **performance):
    """A BasicRLGraphManager on the corridor with ``small_config`` (2 collectors unless told)."""
    from agents.iqn_agent import IQNAgent
    from rulka.graph_manager import BasicRLGraphManager

    config = small_config(collectors=performance.pop("collectors", 2), **performance)
    return BasicRLGraphManager(IQNAgent, config, env_factory=env_factory or corridor_factory).create(None, "cpu", 0)


def record_sources(graph_manager):
    """Spy on ``graph_manager.ingest``: the set of rollout sources and the list of their policy stamps."""
    sources, lags = set(), []
    ingest = graph_manager.ingest

    def spy(rollout):
        sources.add(rollout.source)
        lags.append(rollout.policy_updates)
        ingest(rollout)

    graph_manager.ingest = spy
    return sources, lags


class TimedRace(Corridor):
    """A race of ``length`` steps of ``step_s`` seconds each, whose resets take ``reset_s`` seconds; every
    reset and step is written, with its ``time.monotonic()``, to the file named by RULKA_TEST_TIMELINE
    (a collector process's timeline: did it stall mid-race, did it wait between races), and so is every
    call of the ``check_between_episodes`` hook (did its collector check it while it waited)."""

    def __init__(self, length: int = 40, step_s: float = 0.005, reset_s: float = 0.0) -> None:
        super().__init__(length=length, limit=length + 1)
        self.step_s, self.reset_s = step_s, reset_s
        self.timeline = os.environ.get("RULKA_TEST_TIMELINE", "")

    def _note(self, kind: str) -> None:
        if self.timeline:
            with open(self.timeline, "a", encoding="utf-8") as f:
                f.write(f"{kind} {time.monotonic():.6f}\n")

    def reset(self, *, seed=None, options=None):
        time.sleep(self.reset_s)
        self._note("reset")
        return super().reset(seed=seed, options=options)

    def check_between_episodes(self) -> None:
        self._note("check")

    def step(self, action):
        time.sleep(self.step_s)
        self._note("step")
        obs, reward, _terminated, _truncated, info = super().step(1)  # always right: every race is `length` long
        return obs, reward, _terminated, _truncated, info


def timed_race_factory(params, instance: int = 0) -> gym.Env:
    return TimedRace(reset_s=float(os.environ.get("RULKA_TEST_RESET_S", "0")))


def read_timeline(path) -> list[list[float]]:
    """The step times of each race of a TimedRace timeline, race after race (a reset starts one)."""
    races: list[list[float]] = []
    for line in open(path, encoding="utf-8").read().splitlines():
        kind, at = line.split()
        if kind == "check":
            continue
        if kind == "reset":
            races.append([float(at)])
        else:
            races[-1].append(float(at))
    return races


def read_checks(path) -> list[float]:
    """The times of a TimedRace timeline's ``check_between_episodes`` calls."""
    return [float(line.split()[1]) for line in open(path, encoding="utf-8").read().splitlines()
            if line.startswith("check ")]


class GameOwner(PacedCorridor):
    """The corridor with a "game": a ``sleep`` process in a session of its own (as the TrackMania launcher
    starts a game, so that it outlives its collector), reported through the ``owned_pids`` hook and ended
    by ``close``. Its pid is appended to the file ``games``. Its steps take 5 ms (a game's pace): unpaced, a
    fast machine played a whole test run's steps before the test's fault landed."""

    def __init__(self, games: str) -> None:
        super().__init__(step_s=0.005)
        import subprocess

        self.game = subprocess.Popen(["sleep", "600"], start_new_session=True)
        with open(games, "a", encoding="utf-8") as f:
            f.write(f"{self.game.pid}\n")

    def owned_pids(self) -> tuple[int, ...]:
        return (self.game.pid,) if self.game.poll() is None else ()

    def owned_ports(self) -> tuple[int, ...]:
        return (45678,)

    def close(self) -> None:
        self.game.kill()
        self.game.wait()


def game_owner_factory(games: str, params, instance: int = 0) -> gym.Env:
    """Use as ``functools.partial(game_owner_factory, path)``."""
    return GameOwner(games)


def games_started(path) -> list[int]:
    """The pids of the "games" that GameOwner environments wrote to ``path``, one per environment made."""
    return [int(pid) for pid in path.read_text().split()] if path.exists() else []


def sigkill(pid: int) -> None:
    """SIGKILL process ``pid``; a pid of 0 or less is refused, as ``os.kill(0, ...)`` would kill the test run's
    whole process group (pytest included: the CI run of 2026-12-07 ended with exit code 137 that way, an actor
    killed while its pid was still unknown)."""
    assert pid > 0, f"no process to kill (pid {pid}): os.kill would signal this test run's process group"
    os.kill(pid, signal.SIGKILL)


def kill_left(pids) -> list[int]:
    """Kill whatever of ``pids`` still runs (a failed test leaves nothing behind either); the pids that ran."""
    from rulka.collection.owned import process_start_time

    alive = [pid for pid in pids if process_start_time(pid) is not None]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    return alive


def check_watcher_kills_at_once(graph_manager, collection, collector_pid: int, game: int, within_s: float,
                                caplog) -> None:
    """SIGKILL ``collection``'s collector 0 (``collector_pid``) while the learner's thread does nothing, and
    check that its ``game`` is gone within ``within_s`` seconds and the death logged (the collection's watcher
    thread); then that the learner's next check (``supervise``) replaces the collector and names the game."""
    from rulka.collection.owned import process_start_time

    sigkill(collector_pid)
    killed_at = time.monotonic()
    while process_start_time(game) is not None and time.monotonic() - killed_at < within_s + 10:
        time.sleep(0.02)
    took = time.monotonic() - killed_at
    assert process_start_time(game) is None, "the dead collector's game ran on while the learner was busy"
    assert took < within_s, f"its game was killed {took:.1f} s after the collector's death"
    assert any(record.getMessage().startswith("collector 0 died (") and "its processes are killed now" in
               record.getMessage() for record in caplog.records), caplog.text
    assert not graph_manager.collector_events  # replacing the collector is the learner's, at its next check
    collection.supervise()
    assert collection.stats.restarts == 1
    event = graph_manager.collector_events[0]
    assert event.startswith("collector 0 died (") and f"pids {game}; ports 45678) were killed" in event, event


def timed_race_to(timeline: str, params, instance: int = 0) -> gym.Env:
    """A TimedRace writing to ``timeline`` (for Ray actors, whose environment variables are the cluster's);
    use as ``functools.partial(timed_race_to, path)``."""
    env = TimedRace()
    env.timeline = timeline
    return env
