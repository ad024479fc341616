"""The GraphManager: owns the agent and environments of an experiment and schedules their work.

``improve`` runs the three phases of Coach's improve loop:

* heatup: random actions, no training, until the memory may start learning;
* training: act / observe / train cycles; how much is trained is the agent's replay-ratio gate;
* evaluation: every ``evaluate_every_n_env_steps``, greedy episodes on a separate environment,
  averaged and logged; the best checkpoint is kept.

A preset builds a GraphManager; the CLI then calls :meth:`create` (run folder, device, seed,
resume) and :meth:`improve`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch

from agents.agent import Agent
from filters import InputFilter, OutputFilter
from filters.reward_filters import RewardClippingFilter, RewardRescaleFilter
from rulka import checkpoints
from rulka.config import set_active_config, write_config_snapshot
from rulka.core_types import RunPhase
from rulka.level_manager import LevelManager
from rulka.logger import RunLogger
from rulka.parameters import EnvironmentParameters, ExperimentConfig, GymEnvironmentParameters, PresetValidationParameters
from rulka.progress import ProgressBar
from rulka.seeding import set_global_seed

EnvFactory = Callable[[EnvironmentParameters], gym.Env]
EVAL_SEED_OFFSET = 1_000_003


def make_environment(params: EnvironmentParameters) -> gym.Env:
    """Build the environment an ``environment`` section describes."""
    if isinstance(params, GymEnvironmentParameters):
        from environments.gym_environment import make_gym_environment

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


class GraphManager:
    """Base of graph managers: holds the run folder, the logger and checkpoints."""

    def __init__(self, config: ExperimentConfig, preset_validation_params: PresetValidationParameters | None = None) -> None:
        self.config = config
        self.preset_validation_params = preset_validation_params or PresetValidationParameters()
        self.run_dir: Path | None = None
        self.logger: RunLogger | None = None

    def preflight(self) -> None:
        """Checks that must pass before any work (and before a run folder is made); raise ConfigError."""

    @property
    def checkpoint_dir(self) -> Path:
        assert self.run_dir is not None
        return self.run_dir / "checkpoints"


class BasicRLGraphManager(GraphManager):
    """One agent, one training environment, one evaluation environment.

    Args:
        agent_class: the Agent subclass to build.
        config: the experiment configuration.
        input_filter / output_filter: the agent's filters; by default the reward filters of
            ``config.rewards`` and no observation or action filter.
        preset_validation_params: the preset's golden test.
        env_factory: builds an environment from ``config.environment`` (default: gymnasium or the
            parameters' own ``make_env``).
    """

    def __init__(self, agent_class: type[Agent], config: ExperimentConfig,
                 input_filter: InputFilter | None = None, output_filter: OutputFilter | None = None,
                 preset_validation_params: PresetValidationParameters | None = None,
                 env_factory: EnvFactory | None = None) -> None:
        super().__init__(config, preset_validation_params)
        self.agent_class = agent_class
        self.input_filter = input_filter
        self.output_filter = output_filter or OutputFilter()
        self.env_factory = env_factory or make_environment
        self.agent: Agent | None = None
        self.level: LevelManager | None = None
        self.eval_level: LevelManager | None = None
        self.seed = 0
        self.last_evaluation: float | None = None
        self.best_evaluation: float | None = None
        self.evaluations_done = 0
        self.evaluation_history: list[tuple[int, float]] = []

    # ------------------------------------------------------------------ building
    def default_input_filter(self) -> InputFilter:
        rewards = self.config.rewards
        reward_filters = []
        if getattr(rewards, "reward_clip", None) is not None:
            reward_filters.append(RewardClippingFilter(-rewards.reward_clip, rewards.reward_clip))
        if getattr(rewards, "reward_scale", 1.0) != 1.0:
            reward_filters.append(RewardRescaleFilter(rewards.reward_scale))
        return InputFilter(reward_filters=reward_filters)

    def create(self, run_dir: str | Path | None, device: torch.device | str = "cpu", seed: int = 0,
               resume: bool = False) -> "BasicRLGraphManager":
        """Build environments, filters, agent and logger; with ``resume`` load the last checkpoint."""
        self.seed = seed
        self.created_at = time.time()
        set_global_seed(seed)
        set_active_config(self.config)
        if self.config.performance.torch_num_threads:
            torch.set_num_threads(self.config.performance.torch_num_threads)
        input_filter = self.input_filter or self.default_input_filter()
        env = self.env_factory(self.config.environment)
        env.action_space.seed(seed)
        observation_space = input_filter.filter_space(env.observation_space)
        action_space = self.output_filter.agent_action_space(env.action_space)
        self.agent = self.agent_class(self.config, observation_space, action_space, device, seed)
        self.level = LevelManager(self.agent, env, input_filter, self.output_filter)
        self.input_filter = input_filter
        self.level.reset(seed=seed)
        if run_dir is not None:
            self.run_dir = Path(run_dir)
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_config_snapshot(self.config, self.run_dir / "config_snapshot.yaml")
            self.logger = RunLogger(self.run_dir / "tensorboard", self.config.training.run_name,
                                    self.config.training.tensorboard_suffix_schedule,
                                    self.config.training.global_schedule_speed)
        if resume:
            self.load_checkpoint(self.checkpoint_dir / checkpoints.LAST)
        return self

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        assert self.agent is not None
        return {
            "agent": self.agent.state_dict(self.config.memory.save_memory_in_checkpoint),
            "graph_manager": {
                "last_evaluation": self.last_evaluation,
                "best_evaluation": self.best_evaluation,
                "evaluations_done": self.evaluations_done,
                "evaluation_history": [list(e) for e in self.evaluation_history],
                "seed": self.seed,
            },
        }

    def save_checkpoint(self, name: str = checkpoints.LAST) -> Path:
        path = self.checkpoint_dir / name
        checkpoints.save_atomic(self.state_dict(), path)
        if self.config.performance.make_highest_prio_figures and name == checkpoints.LAST:
            from memories.high_priority_figures import write_highest_priority_figures

            write_highest_priority_figures(self.agent.memory, self.run_dir / "high_prio_figures")
        return path

    def load_checkpoint(self, path: str | Path) -> None:
        assert self.agent is not None and self.level is not None
        state = checkpoints.load_checkpoint(path, self.agent.device)
        self.agent.load_state_dict(state["agent"])
        self.agent.memory.end_episode_without_final_state()  # the interrupted episode is gone
        gm = state["graph_manager"]
        self.last_evaluation = gm["last_evaluation"]
        self.best_evaluation = gm["best_evaluation"]
        self.evaluations_done = gm["evaluations_done"]
        self.evaluation_history = [(int(s), float(v)) for s, v in gm["evaluation_history"]]
        self.level.reset(seed=self.seed + self.agent.counters.episodes)

    def load_weights(self, path: str | Path) -> None:
        """Load only the online network of a checkpoint (for ``--evaluate``)."""
        assert self.agent is not None
        state = checkpoints.load_checkpoint(path, self.agent.device)
        self.agent.online_network.load_state_dict(state["agent"]["online_network"])

    # ------------------------------------------------------------------ phases
    def heatup(self, max_env_steps: int, progress: ProgressBar | None = None) -> None:
        agent, level = self.agent, self.level
        while not agent.can_learn() and agent.counters.env_steps < max_env_steps:
            level.step(RunPhase.HEATUP)
            if progress:
                progress.update("heatup", agent.counters.env_steps, self.last_evaluation)

    def evaluate(self, num_episodes: int | None = None) -> float:
        """Average return of greedy episodes on the evaluation environment."""
        num_episodes = num_episodes or self.config.training.evaluation_episodes
        if self.eval_level is None:
            self.eval_level = LevelManager(self.agent, self.env_factory(self.config.environment), self.input_filter,
                                           self.output_filter)
        returns = []
        for i in range(num_episodes):
            self.eval_level.reset(seed=self.seed + EVAL_SEED_OFFSET + self.evaluations_done * num_episodes + i)
            while True:
                if self.eval_level.step(RunPhase.EVALUATE).done:
                    break
            returns.append(self.eval_level.episode_return)
        self.evaluations_done += 1
        return float(np.mean(returns))

    def improve(self, max_env_steps: int | None = None, stop_at_evaluation: float | None = None,
                show_progress: bool = True) -> RunSummary:
        """Heatup, then train with periodic evaluation and checkpoints until ``max_env_steps``.

        With ``stop_at_evaluation`` the run stops at the first evaluation that reaches it.
        """
        agent, level, training = self.agent, self.level, self.config.training
        assert agent is not None and level is not None, "call create() first"
        total = max_env_steps if max_env_steps is not None else training.max_env_steps
        progress = ProgressBar(total, enabled=show_progress)
        start = time.monotonic()
        reached = False
        self.heatup(total, progress)
        phase_start, steps_at_phase_start = time.monotonic(), agent.counters.env_steps
        train_time = 0.0
        while agent.counters.env_steps < total and not reached:
            result = level.step(RunPhase.TRAIN)
            steps = agent.counters.env_steps
            if result.done:
                self.log({"Training/episode_return": level.episode_return,
                          "Training/episode_length": level.episode_length})
            if steps % training.train_every_n_env_steps == 0:
                t0 = time.monotonic()
                stats = agent.train()
                train_time += time.monotonic() - t0
                if stats is not None and agent.counters.gradient_updates % 100 == 0:
                    self.log_training(stats)
            if training.evaluate_every_n_env_steps and steps % training.evaluate_every_n_env_steps == 0:
                elapsed = time.monotonic() - phase_start
                self.log({"Performance/steps_per_s": (steps - steps_at_phase_start) / max(elapsed, 1e-9),
                          "Performance/training_time_fraction": train_time / max(elapsed, 1e-9)})
                reached = self.run_evaluation(stop_at_evaluation)
                phase_start, steps_at_phase_start, train_time = time.monotonic(), steps, 0.0
            if self.run_dir is not None and training.checkpoint_every_n_env_steps and \
                    steps % training.checkpoint_every_n_env_steps == 0:
                self.save_checkpoint()
            progress.update("train", steps, self.last_evaluation)
        return self.finish_run(progress, start, reached)

    def finish_run(self, progress: ProgressBar, start: float, reached: bool) -> RunSummary:
        """Close the progress line, write the final checkpoint, flush logs; the run's summary."""
        c = self.agent.counters
        progress.update("train", c.env_steps, self.last_evaluation, force=True)
        progress.close()
        if self.run_dir is not None:
            self.save_checkpoint()
        if self.logger is not None:
            self.logger.flush()
        return RunSummary(c.env_steps, c.episodes, c.gradient_updates, self.last_evaluation,
                          self.best_evaluation, reached, time.monotonic() - start)

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
        return stop_at is not None and score >= stop_at

    # ------------------------------------------------------------------ logging
    def log(self, values: dict[str, float]) -> None:
        if self.logger is not None:
            self.logger.scalars(values, self.agent.counters.env_steps)

    def log_training(self, stats: dict[str, float]) -> None:
        agent = self.agent
        values = {f"Training/{k}": v for k, v in stats.items()}
        values["Training/learning_rate"] = agent.learning_rate()
        values["RL/gamma"] = agent.gamma()
        values["RL/memory_size"] = len(agent.memory)
        values["RL/gradient_updates"] = agent.counters.gradient_updates
        for name, value in agent.exploration.current_values(agent.schedule_step(self.config.exploration.epsilon_schedule)).items():
            values[f"RL/{name}"] = value
        self.log(values)

    def close(self) -> None:
        if self.logger is not None:
            self.logger.close()
        for level in (self.level, self.eval_level):
            if level is not None:
                level.env.close()
