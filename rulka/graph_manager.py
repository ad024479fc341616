"""The GraphManager: owns the agent, its collectors and the run, and schedules their work.

``improve`` is the one training loop of every preset (Coach's improve loop, in Linesight's
learner / collectors shape):

* collection: ``performance.gpu_collectors_count`` collector processes (or, with 0, the learner's
  own process) play ``envs_per_collector`` environments each and hand over rollout chunks;
* heatup: until the memory may learn, collectors act at random and nothing is trained;
* training: each rollout is stored, then the learner trains as the agent's replay-ratio gate
  allows, one update at a time, and publishes its weights to the collectors every
  ``send_shared_network_every_n_batches`` updates inside that loop (not once per burst);
* evaluation: every ``evaluate_every_n_env_steps``, greedy episodes on a separate environment,
  averaged and logged; the best checkpoint is kept.

What differs per environment plugs in by overriding a few methods (TrackMania's map cycle and
race logging: :mod:`environments.trackmania.training.trackmania_graph_manager`): :meth:`environment_spaces`,
:meth:`collector_setup` (environment and episode-plan factories, info keys to record) and
:meth:`episode_ended`.

A preset builds a GraphManager; the CLI then calls :meth:`create` (run folder, device, seed,
resume) and :meth:`improve`.
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from agents.agent import Agent
from filters import InputFilter, OutputFilter
from filters.reward_filters import RewardClippingFilter, RewardRescaleFilter
from rulka import checkpoints
from rulka.collection.collector import Collector
from rulka.collection.episodes import EpisodeGatherer, EpisodeRecord, HeldEpisodes, may_discard_episodes, store_rollout
from rulka.collection.in_process import InProcessCollection
from rulka.collection.interface import Collection
from rulka.collection.lag import LagMeter, UpdateClock, action_lags
from rulka.collection.processes import ProcessCollection
from rulka.collection.remote import RemoteCollection
from rulka.collection.rollout import EpisodePlan, EpisodeSpec, Rollout
from rulka.collection.collector_setup import CollectorSetup, EnvFactory, PlanFactory, default_plan
from rulka.config import ConfigError, set_active_config, write_config_snapshot
from rulka.core_types import RunPhase
from rulka.demonstrations import check_demonstration_folders, use_demonstrations
from rulka.freed_memory import keep_freed_memory
from rulka.level_manager import LevelManager
from rulka.logger import RunLogger
from rulka.parameters import EnvironmentParameters, ExperimentConfig, GymEnvironmentParameters, PresetValidationParameters
from rulka.progress import ProgressBar
from rulka.seeding import set_global_seed
from rulka.validation import validate_config

EVAL_SEED_OFFSET = 1_000_003
#: Seconds between two logs of the Performance group.
PERFORMANCE_LOG_EVERY_S = 10.0
#: During a training burst the collectors are checked this often (s): a collector that dies mid-burst is
#: replaced, and its games killed, within about this long, not after the burst (a minute and more at
#: batch 512 on a CPU, past the 60 s its games' guards wait for the learner before killing them themselves).
SUPERVISE_EVERY_S = 1.0


def make_environment(params: EnvironmentParameters, instance: int = 0) -> gym.Env:
    """Build the environment an ``environment`` section describes (``instance``: its number)."""
    if isinstance(params, GymEnvironmentParameters):
        from rulka.gym_adapter import make_gym_environment

        return make_gym_environment(params)
    make_env = getattr(params, "make_env", None)
    if callable(make_env):
        return make_env()
    raise ValueError(f"no environment factory for {type(params).__name__}: give the GraphManager an env_factory")


@dataclass
class RunSummary:
    env_steps: int
    episodes: int
    gradient_updates: int
    last_evaluation: float | None
    best_evaluation: float | None
    reached_threshold: bool
    wall_time_s: float


class GreedyPlan(EpisodePlan):
    """Evaluation episodes: greedy, not stored, each reset with its own seed."""

    def __init__(self, base_seed: int) -> None:
        self.base_seed = base_seed
        self.next_index = 0

    def next_episode(self) -> EpisodeSpec:
        self.next_index += 1
        return EpisodeSpec(seed=self.base_seed + self.next_index - 1, explore=False, store=False)


class _Clock:
    """Where the learner's wall time goes between two performance logs."""

    def __init__(self, env_steps: int, gradient_updates: int) -> None:
        self.reset(env_steps, gradient_updates)

    def reset(self, env_steps: int, gradient_updates: int) -> None:
        self.start = time.monotonic()
        self.collect = self.train = self.publish = 0.0
        self.env_steps, self.gradient_updates = env_steps, gradient_updates
        self.lags = LagMeter()


class GraphManager:
    """Base of graph managers: holds the run folder, the logger and checkpoints."""

    def __init__(self, config: ExperimentConfig, preset_validation_params: PresetValidationParameters | None = None) -> None:
        self.config = config
        self.preset_validation_params = preset_validation_params or PresetValidationParameters()
        self.run_dir: Path | None = None
        self.logger: RunLogger | None = None

    def preflight(self) -> None:
        """Checks that must pass before any work (and before a run folder is made); raise ConfigError."""
        check_demonstration_folders(self.config)

    @property
    def checkpoint_dir(self) -> Path:
        assert self.run_dir is not None
        return self.run_dir / "checkpoints"


class BasicRLGraphManager(GraphManager):
    """One agent, its collectors, and an evaluation environment.

    Args:
        agent_class: the Agent subclass to build.
        config: the experiment configuration.
        input_filter / output_filter: the agent's filters; by default the reward filters of
            ``config.rewards`` and no observation or action filter.
        preset_validation_params: the preset's golden test.
        env_factory: ``env_factory(config.environment, instance)`` builds environment number
            ``instance`` (default: gymnasium, or the parameters' own ``make_env``). Collector
            processes call it, so it must pickle (a module-level function or class).
        plan_factory: ``plan_factory(config, instance)``: the episode plan of each environment
            (default: explore and store every episode).
    """

    #: Numeric ``info`` entries recorded at every step for :meth:`episode_ended`.
    info_keys: tuple[str, ...] = ()
    #: Keep every chunk of an episode until it ends (for episode records that need all its steps).
    keeps_episode_steps = False
    #: Which way ``last_evaluation`` / ``best_evaluation`` improve: ``max`` (returns) or ``min`` (e.g. race times).
    evaluation_mode = "max"
    #: What an evaluation is, for tables (``rulka tune``).
    evaluation_name = "evaluation return"

    def __init__(self, agent_class: type[Agent], config: ExperimentConfig,
                 input_filter: InputFilter | None = None, output_filter: OutputFilter | None = None,
                 preset_validation_params: PresetValidationParameters | None = None,
                 env_factory: EnvFactory | None = None, plan_factory: PlanFactory | None = None) -> None:
        super().__init__(config, preset_validation_params)
        self.agent_class = agent_class
        self.input_filter = input_filter
        self.output_filter = output_filter or OutputFilter()
        self.env_factory = env_factory or make_environment
        self.plan_factory = plan_factory or default_plan
        self.agent: Agent | None = None
        self.collection: Collection | None = None
        self.eval_collector: Collector | None = None
        self.eval_plan: GreedyPlan | None = None
        self.seed = 0
        self.last_evaluation: float | None = None
        self.best_evaluation: float | None = None
        self.evaluations_done = 0
        self.evaluation_history: list[tuple[int, float]] = []
        #: The episodes of the last :meth:`evaluate`: (reset seed, the episode's last rollout).
        self.last_evaluation_episodes: list[tuple[int, Rollout]] = []
        #: Set (from a signal handler or another thread) to stop at the next step; the run ends normally.
        self.stop_requested = False
        #: The signal that stopped the run (SIGINT / SIGTERM), if one did.
        self.stop_signal: int | None = None
        self.collector_events: list[str] = []
        self._first_env: gym.Env | None = None
        #: An environment whose episodes may be discarded (its ``metadata``): each episode's chunks wait
        #: here until it ends, and none of a discarded one is stored (None: chunks are stored as they come).
        self.held: HeldEpisodes | None = None
        self._dead_sources: list[tuple[int, int]] = []
        self._collection_state: dict[str, Any] | None = None
        self._checkpoint_due = False
        #: Ray cluster for ``collector_backend: ray`` (``auto``, ``HOST:PORT``; None: a local instance).
        self.ray_address: str | None = None
        #: When each gradient update was made (turns the collectors' stamps into policy lag and queue delay).
        self.update_clock = UpdateClock()
        #: Extra meters fed with every stored action's policy lag and queue delay (e.g. a benchmark's window).
        self.lag_meters: list[LagMeter] = []
        #: Called with this graph manager after each evaluation (:meth:`evaluation_done`), e.g. to report it.
        self.evaluation_listeners: list[Callable[["BasicRLGraphManager"], None]] = []
        self._published_at = 0
        #: What pretraining on the demonstrations did (None: no pretraining in this process).
        self.pretraining = None
        self._demonstrations_ready = False

    # ------------------------------------------------------------------ building
    def default_input_filter(self) -> InputFilter:
        rewards = self.config.rewards
        reward_filters = []
        if getattr(rewards, "reward_clip", None) is not None:
            reward_filters.append(RewardClippingFilter(-rewards.reward_clip, rewards.reward_clip))
        if getattr(rewards, "reward_scale", 1.0) != 1.0:
            reward_filters.append(RewardRescaleFilter(rewards.reward_scale))
        return InputFilter(reward_filters=reward_filters)

    def environment_spaces(self) -> tuple[spaces.Dict, spaces.Space]:
        """The environment's observation and action spaces (before filters).

        By default environment 0 is built to read them, and kept for the learner's own collection.
        """
        self._first_env = self.env_factory(self.config.environment, 0)
        return self._first_env.observation_space, self._first_env.action_space

    def episodes_may_be_discarded(self) -> bool:
        """Whether the environment may lose an episode mid-way (``info["discarded"]``); then the learner
        stores an episode only once it has ended (:attr:`held`). By default its ``metadata`` says
        (:data:`~rulka.collection.episodes.DISCARDS_EPISODES`, read from environment 0 when the learner
        built one)."""
        return may_discard_episodes(self._first_env)

    def create(self, run_dir: str | Path | None, device: torch.device | str = "cpu", seed: int = 0,
               resume: bool = False) -> "BasicRLGraphManager":
        """Build filters, the agent and the logger; with ``resume`` load the last checkpoint."""
        validate_config(self.config)  # presets run from Python are checked as YAML and -cp are
        self.seed = seed
        self.created_at = time.time()
        set_global_seed(seed)
        set_active_config(self.config)
        if self.config.performance.torch_num_threads:
            torch.set_num_threads(self.config.performance.torch_num_threads)
        if self.config.performance.keep_freed_memory:
            kept = keep_freed_memory()
            if kept and run_dir is not None:
                print(f"rulka: {kept}", file=sys.stderr, flush=True)
        self.input_filter = self.input_filter or self.default_input_filter()
        self.env_observation_space, self.env_action_space = self.environment_spaces()  # before filters
        self.held = HeldEpisodes() if self.episodes_may_be_discarded() else None
        self.observation_space = self.input_filter.filter_space(self.env_observation_space)
        self.action_space = self.output_filter.agent_action_space(self.env_action_space)
        if self._first_env is not None:
            self._first_env.action_space.seed(seed)
        self.agent = self.agent_class(self.config, self.observation_space, self.action_space, device, seed)
        if run_dir is not None:
            print(f"rulka: {self.agent.precision.describe()}", file=sys.stderr, flush=True)
            self.run_dir = Path(run_dir)
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_config_snapshot(self.config, self.run_dir / "config_snapshot.yaml")
            self.logger = RunLogger(self.run_dir / "tensorboard", self.config.training.run_name,
                                    self.config.training.tensorboard_suffix_schedule,
                                    self.config.training.global_schedule_speed)
        if resume:
            self.load_checkpoint(self.checkpoint_dir / checkpoints.LAST)
        return self

    def collector_setup(self) -> CollectorSetup:
        """What each collector builds: agent, environments, episode plans, filters."""
        return CollectorSetup(self.agent_class, self.config, self.observation_space, self.action_space,
                              self.env_factory, self.plan_factory, self.input_filter, self.output_filter,
                              self.info_keys, self.seed)

    def start_collection(self) -> Collection:
        """The collection ``performance`` asks for (in-process, processes or Ray), started from the
        checkpoint's collection state; the learner's own one is kept between runs."""
        agent = self.agent
        if isinstance(self.collection, InProcessCollection):
            return self.collection
        if self.config.performance.gpu_collectors_count <= 0:
            collection = InProcessCollection(self.collector_setup(), agent, self._first_env)
            self._first_env = None
            if self._collection_state is not None:
                collection.load_state_dict(self._collection_state)
            return collection
        if self._first_env is not None:  # the learner plays nothing: its environment goes
            self._first_env.close()
            self._first_env = None
        backend = self.config.performance.collector_backend
        remote: RemoteCollection
        if backend == "ray":
            from rulka.collection.ray_collection import RayCollection  # Ray is an optional extra
            remote = RayCollection(self.collector_setup(), agent, self._collector_event, self.ray_address)
        elif backend == "processes":
            remote = ProcessCollection(self.collector_setup(), agent, self._collector_event)
        else:
            raise ConfigError(f"performance.collector_backend: {backend!r} is not a backend; use processes or ray")
        remote.on_dropped_source = self._drop_source
        remote.load_state_dict(self._collection_state)
        remote.start(agent, self.in_heatup())
        self._published_at = agent.counters.gradient_updates
        return remote

    def _drop_source(self, collector_id: int, incarnation: int) -> None:
        """A collector died: forget its unfinished episodes once what it sent before is stored (the
        poll that found it dead may have read its last chunks: they are ingested first)."""
        self._dead_sources.append((collector_id, incarnation))

    def _forget_dead_sources(self) -> None:
        """The unfinished episodes of the collectors found dead (the gatherer's, the held chunks, the agent's)."""
        while self._dead_sources:
            collector_id, incarnation = self._dead_sources.pop(0)
            self.gatherer.forget_source(collector_id, incarnation)
            if self.held is not None:
                self.held.forget_source(collector_id, incarnation)
            forget = getattr(self.agent, "forget_streams", None)
            if forget is not None:
                forget(lambda stream, dead=(collector_id, incarnation): stream[0][:2] == dead)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        assert self.agent is not None
        collection = self.collection.state_dict() if self.collection is not None else self._collection_state
        return {
            "agent": self.agent.state_dict(self.config.memory.save_memory_in_checkpoint),
            "graph_manager": {
                "last_evaluation": self.last_evaluation,
                "best_evaluation": self.best_evaluation,
                "evaluations_done": self.evaluations_done,
                "evaluation_history": [list(e) for e in self.evaluation_history],
                "seed": self.seed,
                "collection": collection,
            },
        }

    def save_checkpoint(self, name: str = checkpoints.LAST) -> Path:
        path = self.checkpoint_dir / name
        checkpoints.save_atomic(self.state_dict(), path)
        if self.config.performance.make_highest_prio_figures and name == checkpoints.LAST:
            from memories.high_priority_figures import write_highest_priority_figures

            write_highest_priority_figures(self.agent.memory, self.run_dir / "high_prio_figures")
        return path

    def load_checkpoint(self, path: str | Path) -> dict[str, Any]:
        """Restore the run from ``path``; the loaded state (for subclasses that keep more)."""
        assert self.agent is not None
        state = checkpoints.load_checkpoint(path, self.agent.device)
        self.agent.load_state_dict(state["agent"])
        self.agent.abandon_episode()  # an episode interrupted by the stop is gone
        gm = state["graph_manager"]
        self.last_evaluation = gm["last_evaluation"]
        self.best_evaluation = gm["best_evaluation"]
        self.evaluations_done = gm["evaluations_done"]
        self.evaluation_history = [(int(s), float(v)) for s, v in gm["evaluation_history"]]
        self._collection_state = gm.get("collection")
        return state

    def load_weights(self, path: str | Path) -> None:
        """Load only the online network of a checkpoint (for ``--evaluate``)."""
        assert self.agent is not None
        state = checkpoints.load_checkpoint(path, self.agent.device)
        self.agent.online_network.load_state_dict(state["agent"]["online_network"])

    # ------------------------------------------------------------------ evaluation
    def evaluation_instance(self) -> int:
        """Environment number of the evaluation environment: after every collector's."""
        perf = self.config.performance
        return max(1, perf.gpu_collectors_count) * perf.envs_per_collector

    def evaluate(self, num_episodes: int | None = None) -> float:
        """Average return of greedy episodes on the evaluation environment."""
        num_episodes = num_episodes or self.config.training.evaluation_episodes
        if self.eval_collector is None:
            env = self.env_factory(self.config.environment, self.evaluation_instance())
            self.eval_plan = GreedyPlan(self.seed + EVAL_SEED_OFFSET)
            level = LevelManager(self.agent, env, self.input_filter, self.output_filter)
            self.eval_collector = Collector(self.agent, [level], [self.eval_plan], record_steps=False)
        self.eval_plan.next_index = first = self.evaluations_done * num_episodes
        ended: list[Rollout] = []
        while len(ended) < num_episodes:
            ended += [r for r in self.eval_collector.step(heatup=False) if r.episode_ended]
        self.evaluations_done += 1
        # one environment plays the episodes in turn: episode i was reset with the plan's seed number first + i
        self.last_evaluation_episodes = [(self.eval_plan.base_seed + first + i, r) for i, r in enumerate(ended)]
        return float(np.mean([r.episode_return for r in ended]))

    def describe_evaluation(self) -> list[str]:
        """Lines that tell more of the last :meth:`evaluate` than its average return (for
        ``rulka --evaluate``); none here, TrackMania's say each race's time."""
        return []

    def run_evaluation(self, stop_at: float | None) -> bool:
        score = self.evaluate()
        self.last_evaluation = score
        self.evaluation_history.append((self.agent.counters.env_steps, score))
        self.log({"Eval/return": score})
        if self.run_dir is not None:
            with open(self.run_dir / "evaluations.csv", "a", encoding="utf-8") as f:
                if f.tell() == 0:
                    f.write("env_steps,average_return,wall_time_s\n")
                f.write(f"{self.agent.counters.env_steps},{score:.3f},{time.time() - self.created_at:.1f}\n")
        if self.best_evaluation is None or score > self.best_evaluation:
            self.best_evaluation = score
            if self.run_dir is not None:
                self.save_checkpoint(checkpoints.BEST)
        self.evaluation_done()
        return stop_at is not None and score >= stop_at

    def evaluation_done(self) -> None:
        """An evaluation has set ``last_evaluation`` and ``best_evaluation``: tell the listeners."""
        for listener in self.evaluation_listeners:
            listener(self)

    # ------------------------------------------------------------------ the loop
    def in_heatup(self) -> bool:
        agent = self.agent
        return agent.counters.gradient_updates == 0 and not agent.can_learn()

    def improve(self, max_env_steps: int | None = None, stop_at_evaluation: float | None = None,
                show_progress: bool = True) -> RunSummary:
        """Collect, store, train, evaluate and checkpoint until ``max_env_steps`` environment steps.

        With ``stop_at_evaluation`` the run stops at the first evaluation that reaches it (see
        :meth:`episode_ended` for graph managers whose episodes are their evaluation).
        """
        agent, training, perf = self.agent, self.config.training, self.config.performance
        assert agent is not None, "call create() first"
        total = max_env_steps if max_env_steps is not None else training.max_env_steps
        self.progress = progress = ProgressBar(total, enabled=show_progress)
        start = time.monotonic()
        self.gatherer = EpisodeGatherer(self.keeps_episode_steps)
        self.stop_at_evaluation = stop_at_evaluation
        self.reached = False
        self.prepare_demonstrations()
        clock = self._clock = _Clock(agent.counters.env_steps, agent.counters.gradient_updates)
        self.update_clock = UpdateClock(agent.counters.gradient_updates)
        with self._stop_signals():
            self.collection = collection = self.start_collection()
            in_process = isinstance(collection, InProcessCollection)
            try:
                while agent.counters.env_steps < total and not self.reached and not self.stop_requested:
                    heatup = self.in_heatup()
                    steps_before = agent.counters.env_steps
                    t0 = time.monotonic()
                    rollouts = collection.poll(heatup)
                    t1 = time.monotonic()
                    clock.collect += t1 - t0
                    for rollout in rollouts:
                        self.ingest(rollout)
                    self._forget_dead_sources()
                    steps = agent.counters.env_steps
                    published_before = clock.publish
                    if steps // training.train_every_n_env_steps != steps_before // training.train_every_n_env_steps:
                        self.train_and_log()
                    t2 = time.monotonic()
                    clock.train += t2 - t1 - (clock.publish - published_before)
                    if not in_process:
                        collection.publish_counters(agent, self.in_heatup())
                        clock.publish += time.monotonic() - t2
                    if _crossed(steps_before, steps, training.evaluate_every_n_env_steps):
                        self.reached |= self.run_evaluation(stop_at_evaluation)
                    if self.run_dir is not None and _crossed(steps_before, steps, training.checkpoint_every_n_env_steps):
                        self._checkpoint_due = True
                    if self._checkpoint_due and (not in_process or collection.at_episode_boundary
                                                 or perf.envs_per_collector > 1):
                        self._checkpoint_due = False
                        try:
                            self.save_checkpoint()
                        except checkpoints.CheckpointWriteError as error:  # a full disk: keep training
                            print(f"\nrulka: warning: {error}", file=sys.stderr, flush=True)
                    if time.monotonic() - clock.start >= PERFORMANCE_LOG_EVERY_S:
                        self.log_performance()
                    progress.update("heatup" if heatup else "train", agent.counters.env_steps, self.last_evaluation,
                                    best_eval=self.best_evaluation)
            except KeyboardInterrupt:
                collection.stop(timeout_s=0.0)
                raise
            finally:
                collection.stop()
        self.log_performance()
        return self.finish_run(progress, start, self.reached)

    def prepare_demonstrations(self) -> None:
        """Before the first collected action of this process: keep ``demonstrations.folders`` beside
        the agent's replay and, in a run that has not acted nor learnt yet, pretrain on them (a resumed
        run reads them again without pretraining). Evaluation and export never read them."""
        demonstrations = getattr(self.config, "demonstrations", None)
        if self._demonstrations_ready or demonstrations is None or not demonstrations.folders:
            return
        counters = self.agent.counters
        self.pretraining = use_demonstrations(self.agent, self.config, self.env_observation_space, self.input_filter,
                                              self.seed, do_pretrain=counters.env_steps == 0 and
                                              counters.gradient_updates == 0,
                                              log=self.log if self.logger is not None else None)
        self._demonstrations_ready = True

    def ingest(self, rollout: Rollout) -> None:
        """Store a rollout (with :attr:`held`, once its episode has ended, and not if it was discarded),
        measure its actions' policy lag and queue delay, and report a finished episode to :meth:`episode_ended`."""
        for chunk in self.held.add(rollout) if self.held is not None else (rollout,):
            store_rollout(self.agent, chunk)
        if rollout.length and rollout.step_times is not None and rollout.phase is not RunPhase.HEATUP:
            policy_lag, queue_delay = action_lags(self.update_clock, rollout.step_policy_updates, rollout.step_times,
                                                  self.agent.counters.gradient_updates)
            self._clock.lags.add(policy_lag, queue_delay)
            for meter in self.lag_meters:
                meter.add(policy_lag, queue_delay)
        record = self.gatherer.add(rollout)
        if record is not None and not record.discarded:
            self.episode_ended(record)

    def episode_ended(self, record: EpisodeRecord) -> None:
        """A finished episode: log its return and length (training episodes)."""
        if record.spec.store and record.spec.explore:
            self.log({"Training/episode_return": record.episode_return,
                      "Training/episode_length": record.length})

    def train_and_log(self) -> None:
        """Train as much as the replay-ratio gate allows, one update at a time; publish the weights
        every ``send_shared_network_every_n_batches`` updates from inside this loop, so collectors
        are never more than that many updates behind the learner's newest published weights; check
        the collectors every ``SUPERVISE_EVERY_S`` (:meth:`Collection.supervise`). A stop request (Ctrl-C,
        SIGTERM) ends the burst after the update in progress."""
        agent = self.agent
        supervised_at = time.monotonic()
        while agent.updates_allowed() > 0 and not self.stop_requested:
            if time.monotonic() - supervised_at >= SUPERVISE_EVERY_S and self.collection is not None:
                supervised_at = time.monotonic()
                supervise = getattr(self.collection, "supervise", None)  # a Protocol match may lack it
                if supervise is not None:
                    supervise()
            updates_before = agent.counters.gradient_updates
            stats = agent.train(max_updates=1)
            updates = agent.counters.gradient_updates
            if updates != updates_before:
                self.update_clock.record(time.time(), updates)
            if stats is not None and updates // 100 != updates_before // 100:
                self.log_training(stats)
            if updates - self._published_at >= self.config.performance.send_shared_network_every_n_batches:
                self.publish_policy()

    def publish_policy(self) -> None:
        """The online network and counters to the collectors (nothing to do in the learner's process)."""
        collection, agent = self.collection, self.agent
        self._published_at = agent.counters.gradient_updates
        if collection is None or isinstance(collection, InProcessCollection):
            return
        t0 = time.monotonic()
        collection.publish(agent)
        collection.publish_counters(agent, self.in_heatup())
        self._clock.publish += time.monotonic() - t0

    def finish_run(self, progress: ProgressBar, start: float, reached: bool) -> RunSummary:
        """Close the progress line, write the final checkpoint, flush logs; the run's summary."""
        c = self.agent.counters
        progress.update("train", c.env_steps, self.last_evaluation, force=True, best_eval=self.best_evaluation)
        progress.close()
        if self.run_dir is not None:
            self.save_checkpoint()
        if self.logger is not None:
            self.logger.flush()
        return RunSummary(c.env_steps, c.episodes, c.gradient_updates, self.last_evaluation,
                          self.best_evaluation, reached, time.monotonic() - start)

    # ------------------------------------------------------------------ stopping
    @contextlib.contextmanager
    def _stop_signals(self) -> Iterator[None]:
        """SIGINT / SIGTERM stop the run after the current step (final checkpoint written);
        a second Ctrl-C aborts at once. Only the main thread can install handlers."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, _frame: Any) -> None:
            if self.stop_requested and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.stop_requested = True
            self.stop_signal = signum
            print(f"\nrulka: {signal.Signals(signum).name} received: stopping collectors and writing a final "
                  f"checkpoint (Ctrl-C again aborts at once)", file=sys.stderr, flush=True)

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    def _collector_event(self, message: str) -> None:
        self.collector_events.append(message)
        print(f"\nrulka: {message}", file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ logging
    def log(self, values: dict[str, float]) -> None:
        if self.logger is not None:
            self.logger.scalars(values, self.agent.counters.env_steps)

    def log_training(self, stats: dict[str, float]) -> None:
        agent = self.agent
        values = {f"Training/{k}": v for k, v in stats.items()}
        test_loss = getattr(agent, "test_loss", lambda: None)()
        if test_loss is not None:
            values["Training/test_loss"] = test_loss
        values["Training/learning_rate"] = agent.learning_rate()
        values["RL/gamma"] = agent.gamma()
        values["RL/memory_size"] = len(agent.memory)
        values["RL/gradient_updates"] = agent.counters.gradient_updates
        for name, value in agent.exploration.current_values(agent.exploration_step()).items():
            values[f"RL/{name}"] = value
        self.log(values)

    def log_performance(self) -> None:
        """The Performance group: throughput, the learner's time split, queue depth, policy lag."""
        clock, agent, collection = self._clock, self.agent, self.collection
        elapsed = max(time.monotonic() - clock.start, 1e-9)
        values = {
            "Performance/actions_per_s": (agent.counters.env_steps - clock.env_steps) / elapsed,
            "Performance/updates_per_s": (agent.counters.gradient_updates - clock.gradient_updates) / elapsed,
            "Performance/learner_collect_or_wait_fraction": clock.collect / elapsed,
            "Performance/learner_training_fraction": clock.train / elapsed,
            "Performance/learner_publish_fraction": clock.publish / elapsed,
        }
        lags = clock.lags.percentiles()
        if lags:
            policy, queue = lags["policy_lag_batches"], lags["queue_delay_batches"]
            values["Performance/policy_lag_batches_p50"] = policy[50]
            values["Performance/policy_lag_batches_p95"] = policy[95]
            values["Performance/queue_delay_batches_p50"] = queue[50]
            values["Performance/queue_delay_batches_p95"] = queue[95]
        if isinstance(collection, RemoteCollection):
            actions = collection.actions_per_collector()
            previous = getattr(clock, "collector_actions", [0] * len(actions))
            for i, (now, before) in enumerate(zip(actions, previous)):
                values[f"Performance/collector_{i}_actions_per_s"] = (now - before) / elapsed
            values["Performance/collected_actions_per_s"] = (sum(actions) - sum(previous)) / elapsed
            values["Performance/rollout_queue_depth"] = collection.queue_depth()
            values["Performance/collector_restarts"] = collection.stats.restarts
            clock.reset(agent.counters.env_steps, agent.counters.gradient_updates)
            clock.collector_actions = actions
            if hasattr(collection, "actions_per_node"):  # Ray: actions/s of each node (by IP address)
                nodes, before = collection.actions_per_node(), getattr(clock, "node_actions", {})
                for node, now in nodes.items():
                    values[f"Performance/node_{node}_actions_per_s"] = (now - before.get(node, 0)) / elapsed
                clock.node_actions = nodes
        else:
            clock.reset(agent.counters.env_steps, agent.counters.gradient_updates)
        self.log(values)

    def close(self) -> None:
        if self.logger is not None:
            self.logger.close()
        if self.eval_collector is not None:
            self.eval_collector.close()
        if isinstance(self.collection, InProcessCollection):
            self.collection.close()
        if self._first_env is not None:
            self._first_env.close()


def _crossed(before: int, after: int, every: int) -> bool:
    """Whether a multiple of ``every`` lies in (before, after]."""
    return bool(every) and after // every != before // every
