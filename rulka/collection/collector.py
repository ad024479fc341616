"""The Collector: steps several environments together, one forward pass for all their actions.

Each environment is wrapped in a :class:`~rulka.level_manager.LevelManager` (filters) and follows
its :class:`~rulka.collection.rollout.EpisodePlan` (which episode comes next: a map of a cycle,
explore or race greedily, store or not). Steps are gathered per environment and handed out as
:class:`~rulka.collection.rollout.Rollout` chunks: at the end of each episode, and every
``chunk_actions`` actions of a long one so that the learner need not wait for the end of a race.

The same class runs in the learner's process (``gpu_collectors_count: 0``) and in collector
processes; only where its policy and counters come from differs (``before_acting``).

Between races: ``step(heatup, start_episodes=False)`` leaves an environment whose episode ended
waiting (no reset) and steps only the others, so a caller can hold back new races (back-pressure)
without stalling an environment in the middle of one (a game that waits mid-race drops the race after
its in-race timeout). An environment kept waiting is checked at most once per
:data:`WAITING_CHECK_INTERVAL_S` (``check_waiting``, the ``check_between_episodes`` hook of
:mod:`rulka.collection.owned`): during such steps, and by the caller while it waits for room, so that a
game that dies or hangs between races is found and relaunched then, not at its next race.
``on_reset(True)`` / ``on_reset(False)`` bracket every reset (a game's launch, map load and countdown)
and every such check, e.g. to keep a heartbeat going.

Environments that wait on I/O (a game behind a socket) can be stepped at the same time
(``concurrent``, :mod:`rulka.collection.concurrent_steps`): their ``reset`` and ``step`` run in a pool
of threads, one per environment, and the results are recorded in slot order as before, so the
rollouts are the same; concurrent resets are bracketed by one ``on_reset`` pair. When every
environment offers phased steps (``step_phases``), the steps run interleaved in the collector's own
thread instead (no thread hand-offs); resets still use the pool.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np

from agents.agent import Agent
from rulka.collection.concurrent_steps import StepPool, use_concurrent_steps
from rulka.collection.owned import check_between_episodes
from rulka.collection.rollout import EpisodePlan, EpisodeSpec, Rollout
from rulka.core_types import RunPhase
from rulka.level_manager import LevelManager, StepResult
from rulka.phased_steps import offers_step_phases, run_phases


#: Seconds between two checks of the environments that wait between episodes (:meth:`Collector.check_waiting`).
WAITING_CHECK_INTERVAL_S = 1.0


def episode_seed(seed: int, instance: int, episode: int) -> int:
    """The reset seed of episode ``episode`` of environment ``instance``: the same in every run."""
    return int(np.random.SeedSequence([seed, instance, episode]).generate_state(1)[0])


class _Slot:
    """One environment and the steps of its current chunk."""

    def __init__(self, level: LevelManager, plan: EpisodePlan, instance: int) -> None:
        self.level = level
        self.plan = plan
        self.instance = instance
        self.episodes_started = 0
        self.spec: EpisodeSpec | None = None
        self.states: list[dict[str, np.ndarray]] = []
        self.actions: list[int] = []
        self.greedy: list[bool] = []
        self.rewards: list[float] = []
        self.infos: dict[str, list[float]] = {}
        self.policy_updates = 0
        self.step_policy_updates: list[int] = []
        self.step_times: list[float] = []
        self.played_in_heatup = False  # of the current episode

    def begin_chunk(self, first_state: dict[str, np.ndarray], policy_updates: int, info_keys: Sequence[str]) -> None:
        self.states = [first_state]
        self.actions, self.greedy, self.rewards = [], [], []
        self.step_policy_updates, self.step_times = [], []
        self.infos = {key: [] for key in info_keys}
        self.policy_updates = policy_updates


class Collector:
    """Plays ``levels`` (one per environment) with ``agent``'s policy.

    Args:
        agent: chooses actions (``agent.act``); in a collector process its network is the inference
            network that the policy source refreshes.
        levels: one LevelManager per environment.
        plans: one EpisodePlan per environment.
        source_id: (collector id, incarnation), stamped on every rollout.
        seed: with the environment's instance number and episode number, seeds each reset.
        instances: the global instance number of each environment (default 0..k-1).
        chunk_actions: longest chunk; an episode longer than this is sent in pieces.
        continues: mid-episode chunks continue in the memory (only for one environment whose chunks
            reach the learner before anything else: the learner's own process).
        info_keys: numeric ``info`` entries recorded at every step (``Rollout.step_info``).
        record_steps: keep the steps (False for evaluation: only episode ends are reported).
        before_acting: called before each batch of actions with ``starting`` (an episode begins);
            returns the gradient updates of the weights about to act.
        episodes_started: per environment, the episodes a previous collector already started (a
            replaced collector, a resumed run): reset seeds and plans continue from there.
        on_reset: called with True before and False after each environment reset (once around
            resets that run at the same time).
        concurrent: step and reset the environments at the same time, each in a thread of its own
            (``performance.concurrent_env_steps``): True, False, or ``"auto"`` (when every environment
            declares ``steps_wait_on_io``, see :mod:`rulka.collection.concurrent_steps`). The input and
            output filters then run in those threads too (rulka's filters hold no state). Steps are
            interleaved in this thread instead when every environment offers ``step_phases``.
    """

    def __init__(self, agent: Agent, levels: Sequence[LevelManager], plans: Sequence[EpisodePlan],
                 source_id: tuple[int, int] = (0, 0), seed: int = 0, instances: Sequence[int] | None = None,
                 chunk_actions: int = 400, continues: bool = False, info_keys: Sequence[str] = (),
                 record_steps: bool = True,
                 before_acting: Callable[[bool], int] | None = None,
                 episodes_started: Sequence[int] | None = None,
                 on_reset: Callable[[bool], None] | None = None, concurrent: bool | str = False) -> None:
        if len(levels) != len(plans) or not levels:
            raise ValueError(f"give one plan per environment (got {len(levels)} environments, {len(plans)} plans)")
        instances = list(range(len(levels))) if instances is None else list(instances)
        self.agent = agent
        self.slots = [_Slot(level, plan, i) for level, plan, i in zip(levels, plans, instances)]
        for slot, started in zip(self.slots, episodes_started or ()):
            slot.episodes_started = int(started)
            slot.plan.advance(int(started))
        self.source_id = source_id
        self.seed = seed
        self.chunk_actions = max(1, int(chunk_actions))
        self.continues = continues and len(levels) == 1
        self.info_keys = tuple(info_keys)
        self.record_steps = record_steps
        self.before_acting = before_acting or (lambda starting: agent.counters.gradient_updates)
        self.on_reset = on_reset
        self.actions_played = 0
        #: Actions the last ``step`` played (one per environment it stepped).
        self.last_step_actions = 0
        self._batch = {k: np.zeros((len(levels), *s.shape), dtype=s.dtype)
                       for k, s in agent.observation_space.spaces.items()}
        n = len(levels)
        #: Steps and resets run at the same time (see ``concurrent``): the pool and its reused lists.
        self.concurrent = use_concurrent_steps(concurrent, [level.env for level in levels])
        self._pool = StepPool(n) if self.concurrent else None
        #: Concurrent steps run as interleaved phases in this thread (resets still use the pool).
        self.phased = self.concurrent and all(offers_step_phases(level.env) for level in levels)
        self._active: list[_Slot] = []
        self._starting: list[_Slot] = []
        self._pending_actions = [0] * n
        self._results: list[StepResult | None] = [None] * n
        self._reset_args: list[tuple[EpisodeSpec, int] | None] = [None] * n
        self._first_observations: list[dict[str, np.ndarray] | None] = [None] * n
        self._next_waiting_check = 0.0

    # ------------------------------------------------------------------ stepping
    def step(self, heatup: bool, start_episodes: bool = True) -> list[Rollout]:
        """One action in every environment; the chunks this completed.

        With ``start_episodes`` false, an environment whose episode ended is not reset and plays no
        action (it waits between races); the others play on. When every environment waits, nothing
        is played (``last_step_actions`` is 0).
        """
        active, to_start = self._active, self._starting
        active.clear()
        to_start.clear()
        for slot in self.slots:
            if slot.level.observation is None:
                if not start_episodes:
                    continue
                to_start.append(slot)
            active.append(slot)
        if len(active) < len(self.slots):
            self.check_waiting()
        starting = bool(to_start)
        if self._pool is not None and len(to_start) > 1:
            self._start_episodes_together(to_start)
        else:
            for slot in to_start:
                self._start_episode(slot)
        self.last_step_actions = len(active)
        if not active:
            return []
        policy_updates = self.before_acting(starting)
        chosen_at = time.time()
        for slot in active:
            if not slot.actions:
                slot.policy_updates = policy_updates
            slot.played_in_heatup |= heatup
        phases = [self._phase(slot.spec, heatup) for slot in active]
        actions, greedy = self._choose(active, phases)
        rollouts = []
        if self._pool is not None and len(active) > 1:
            self._step_together(active, actions, greedy, phases, policy_updates, chosen_at, rollouts)
        else:
            for i, slot in enumerate(active):
                action = int(actions[i])
                rollout = self._record(slot, slot.level.apply(action), action, bool(greedy[i]), phases[i],
                                       policy_updates, chosen_at)
                if rollout is not None:
                    rollouts.append(rollout)
        self.actions_played += len(active)
        return rollouts

    def _step_together(self, active: list[_Slot], actions: np.ndarray, greedy: np.ndarray, phases: list[RunPhase],
                       policy_updates: int, chosen_at: float, rollouts: list[Rollout]) -> None:
        """Step the ``active`` environments at the same time; record their results in slot order.
        When some raised, the others' steps are still recorded, then the first slot's error is raised."""
        pending, results = self._pending_actions, self._results
        for i in range(len(active)):
            pending[i] = int(actions[i])
        try:
            if self.phased:
                run_phases([slot.level.apply_phases(pending[i]) for i, slot in enumerate(active)], results)
            else:
                self._pool.run(self._apply_one, len(active))
        finally:
            for i, slot in enumerate(active):
                result, results[i] = results[i], None
                if result is None:
                    continue
                rollout = self._record(slot, result, pending[i], bool(greedy[i]), phases[i], policy_updates, chosen_at)
                if rollout is not None:
                    rollouts.append(rollout)

    def _apply_one(self, i: int) -> None:
        """Pool task: play the pending action of active environment ``i``."""
        self._results[i] = self._active[i].level.apply(self._pending_actions[i])

    def check_waiting(self) -> None:
        """Have every environment that waits between episodes check what it runs (the
        ``check_between_episodes`` hook: a game that died or hung is relaunched now), at most once per
        :data:`WAITING_CHECK_INTERVAL_S`; bracketed by ``on_reset`` (a relaunch takes as long as a reset)."""
        now = time.monotonic()
        if now < self._next_waiting_check:
            return
        waiting = [slot for slot in self.slots if slot.level.observation is None and slot.episodes_started]
        if waiting:
            if self.on_reset is not None:
                self.on_reset(True)
            try:
                for slot in waiting:
                    check_between_episodes(slot.level.env)
            finally:
                if self.on_reset is not None:
                    self.on_reset(False)
        self._next_waiting_check = time.monotonic() + WAITING_CHECK_INTERVAL_S

    @property
    def racing(self) -> bool:
        """Some environment is in the middle of an episode."""
        return any(slot.level.observation is not None for slot in self.slots)

    def _next_reset(self, slot: _Slot) -> tuple[EpisodeSpec, int]:
        """The next episode of ``slot`` and its reset seed."""
        spec = slot.plan.next_episode()
        seed = spec.seed if spec.seed is not None else episode_seed(self.seed, slot.instance, slot.episodes_started)
        return spec, seed

    def _start_episode(self, slot: _Slot) -> None:
        spec, seed = self._next_reset(slot)
        if self.on_reset is not None:
            self.on_reset(True)
        try:
            observation = slot.level.reset(seed=seed, options=spec.reset_options)
        finally:
            if self.on_reset is not None:
                self.on_reset(False)
        self._begin_episode(slot, spec, observation)

    def _begin_episode(self, slot: _Slot, spec: EpisodeSpec, observation: dict[str, np.ndarray]) -> None:
        slot.spec = spec
        slot.episodes_started += 1
        slot.played_in_heatup = False
        slot.begin_chunk(observation, 0, self.info_keys if self.record_steps else ())

    def _start_episodes_together(self, slots: list[_Slot]) -> None:
        """Reset ``slots`` at the same time (plans and seeds drawn in slot order, one ``on_reset`` pair).
        When some raised, the others' episodes still begin, then the first slot's error is raised."""
        args, observations = self._reset_args, self._first_observations
        for i, slot in enumerate(slots):
            args[i] = self._next_reset(slot)
        if self.on_reset is not None:
            self.on_reset(True)
        try:
            self._pool.run(self._reset_one, len(slots))
        finally:
            if self.on_reset is not None:
                self.on_reset(False)
            for i, slot in enumerate(slots):
                observation, observations[i] = observations[i], None
                (spec, _), args[i] = args[i], None
                if observation is not None:
                    self._begin_episode(slot, spec, observation)

    def _reset_one(self, i: int) -> None:
        """Pool task: reset the environment of slot ``i`` of the slots starting an episode."""
        spec, seed = self._reset_args[i]
        self._first_observations[i] = self._starting[i].level.reset(seed=seed, options=spec.reset_options)

    @staticmethod
    def _phase(spec: EpisodeSpec, heatup: bool) -> RunPhase:
        if heatup:
            return RunPhase.HEATUP
        return RunPhase.TRAIN if spec.explore else RunPhase.EVALUATE

    def _choose(self, active: list[_Slot], phases: list[RunPhase]) -> tuple[np.ndarray, np.ndarray]:
        """Actions for the ``active`` environments: one forward pass per distinct phase (usually one)."""
        for i, slot in enumerate(active):
            for key, array in self._batch.items():
                array[i] = slot.level.observation[key]
        n = len(active)
        batch = self._batch if n == len(self.slots) else {k: v[:n] for k, v in self._batch.items()}
        if all(p is phases[0] for p in phases):
            info = self.agent.act(batch, phases[0])
            return info.actions, info.was_greedy
        actions = np.zeros(n, dtype=np.int64)
        greedy = np.zeros(n, dtype=bool)
        for phase in set(phases):
            rows = np.array([i for i, p in enumerate(phases) if p is phase])
            info = self.agent.act({k: v[rows] for k, v in batch.items()}, phase)
            actions[rows], greedy[rows] = info.actions, info.was_greedy
        return actions, greedy

    def _record(self, slot: _Slot, result: StepResult, action: int, was_greedy: bool, phase: RunPhase,
                policy_updates: int, chosen_at: float) -> Rollout | None:
        """Record the step ``result`` of ``slot`` (``action`` chosen at ``chosen_at`` by the weights of
        ``policy_updates``); the chunk it completed, if any."""
        if result.discarded:  # the step never happened
            return self._flush(slot, phase, result.info, discarded=True)
        if self.record_steps:
            slot.step_policy_updates.append(policy_updates)
            slot.step_times.append(chosen_at)
            slot.states.append(result.next_observation)
            slot.actions.append(action)
            slot.greedy.append(was_greedy)
            slot.rewards.append(result.filtered_reward)
            for key, values in slot.infos.items():
                values.append(float(result.info.get(key, 0.0)))
        if result.done:
            return self._flush(slot, phase, result.info, terminated=result.terminated, truncated=result.truncated)
        if self.record_steps and len(slot.actions) >= self.chunk_actions:
            return self._flush(slot, phase, None)
        return None

    def _flush(self, slot: _Slot, phase: RunPhase, info: dict[str, Any] | None, terminated: bool = False,
               truncated: bool = False, discarded: bool = False) -> Rollout:
        ended = terminated or truncated or discarded
        states = {k: np.stack([s[k] for s in slot.states]) for k in slot.states[0]} if slot.states else {}
        rollout = Rollout(
            source=(*self.source_id, slot.instance), episode=slot.episodes_started, spec=slot.spec, phase=phase,
            states=states, actions=np.asarray(slot.actions, dtype=np.int64),
            was_greedy=np.asarray(slot.greedy, dtype=bool), rewards=np.asarray(slot.rewards, dtype=np.float32),
            step_info={k: np.asarray(v, dtype=np.float64) for k, v in slot.infos.items()},
            terminated=terminated, truncated=truncated, discarded=discarded,
            continues=self.continues and not ended, policy_updates=slot.policy_updates,
            step_policy_updates=np.asarray(slot.step_policy_updates, dtype=np.int64),
            step_times=np.asarray(slot.step_times, dtype=np.float64), played_in_heatup=slot.played_in_heatup,
            episode_return=slot.level.episode_return, episode_length=slot.level.episode_length,
            final_info=info if ended else None,
        )
        if not ended:
            slot.begin_chunk(slot.states[-1], slot.policy_updates, self.info_keys)
        return rollout

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        for slot in self.slots:
            slot.level.env.close()
