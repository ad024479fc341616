"""The Agent base: observe, act, train, learn_from_batch, handle_episode_ended, target sync.

An agent never touches an environment: a LevelManager hands it filtered observations and rewards
and passes its actions on. A subclass implements only what differs: its networks
(:meth:`create_networks`), how it computes Q-values for acting (:meth:`q_values`) and its loss
(:meth:`compute_loss`). The base owns the memory, so it also owns what every memory needs:
the priority updates of a prioritized memory (from the errors :meth:`compute_loss` returns),
and the guard against non-finite losses (the batch is skipped, counted in the stats as
``non_finite_losses``, and the run stops after :data:`MAX_CONSECUTIVE_NON_FINITE` in a row).

Configuration read by name, beyond the standard sections: ``config.shaping_potential`` (optional,
a :class:`memories.shaping.DistancePotential`): the memory then adds potential-based shaping
``discount * phi(s') - phi(s)`` to every sampled transition.
"""
from __future__ import annotations

import abc
import copy
import logging
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from agents.precision import Precision, gradient_scaler, resolve_precision
from exploration_policies import EpsilonBoltzmann, ExplorationPolicy
from memories.replay import Replay, make_replay
from memories.shaping import DistancePotential
from rulka.core_types import ActionInfo, Counters, Observation, RunPhase, TransitionBatch
from rulka.parameters import ExperimentConfig
from rulka.schedules import Schedule

#: Non-finite losses in a row after which training stops with an error.
MAX_CONSECUTIVE_NON_FINITE = 20

log = logging.getLogger(__name__)


@dataclass
class LossOutput:
    """What :meth:`Agent.compute_loss` returns.

    ``loss``: the scalar to minimise; ``priority_errors``: (B,) per-sample errors for a prioritized
    memory (detached); ``stats``: scalars to log.
    """

    loss: torch.Tensor
    priority_errors: torch.Tensor
    stats: dict[str, float]


class Agent(abc.ABC):
    """Base of the value-based agents.

    Args:
        config: the experiment configuration (the agent reads its sections).
        observation_space: the filtered observation space, a ``spaces.Dict``.
        action_space: the filtered action space, a ``spaces.Discrete``.
        device: where the networks live.
        seed: seeds the memory, the exploration and the torch generator used by the agent.
    """

    def __init__(self, config: ExperimentConfig, observation_space: spaces.Dict, action_space: spaces.Discrete,
                 device: torch.device | str = "cpu", seed: int | None = None) -> None:
        if not isinstance(action_space, spaces.Discrete):
            raise ValueError(f"{type(self).__name__} needs a Discrete action space, got {action_space}")
        self.config = config
        self.observation_space = observation_space
        self.num_actions = int(action_space.n)
        self.device = torch.device(device)
        self.counters = Counters()
        self.learning_started_at_transition: int | None = None
        self.transitions_sampled_at_learning_start = 0
        self.transitions_sampled_at_last_target_update = 0
        self.non_finite_losses = 0  # batches skipped because their loss was NaN or infinite
        self.consecutive_non_finite_losses = 0
        self.memory = self.create_memory(seed)
        self.exploration = self.create_exploration_policy(seed)
        #: Schedule steps exploration skips in a run that pretrains (``demonstrations.start_epsilon``).
        self.exploration_head_start = config.demonstrations.exploration_head_start(
            config.exploration.epsilon_schedule) or 0.0
        # channels_last: the convolutions' fast layout on CPUs (and GPUs' tensor cores), as Linesight
        # keeps them; only 4-D weights change layout (bench/update_speed.py measures it).
        self.online_network = self.create_networks().to(self.device, memory_format=torch.channels_last)
        #: What ``performance.precision`` means here: the autocast dtypes of learning and acting.
        self.precision: Precision = resolve_precision(
            config.performance.precision, self.device,
            has_convolutions=any(isinstance(m, nn.Conv2d) for m in self.online_network.modules()))
        log.info("rulka: %s", self.precision.describe())
        self.target_network = copy.deepcopy(self.online_network).requires_grad_(False)
        #: The online network's parameters, listed once (the update clips and steps them every time).
        self.online_parameters = list(self.online_network.parameters())
        training = config.training
        # foreach: one kernel per operation over all tensors instead of a Python loop over them
        # (torch's default on GPUs, not on CPUs); the same arithmetic.
        self.optimizer = torch.optim.RAdam(
            self.online_parameters, lr=self.learning_rate(),
            eps=training.adam_epsilon, betas=(training.adam_beta1, training.adam_beta2), foreach=True,
        )
        #: float16's gradient scaler (None for float32 and bfloat16).
        self.grad_scaler = gradient_scaler(self.precision)

    # ------------------------------------------------------------------ building blocks
    @abc.abstractmethod
    def create_networks(self) -> nn.Module:
        """The online network (the target network is a copy)."""

    def memory_kwargs(self) -> dict[str, Any]:
        """Extra keyword arguments of :func:`memories.replay.make_replay` (none here)."""
        return {}

    def shaping_potential(self) -> DistancePotential | None:
        """The configuration's ``shaping_potential`` (None: no shaping)."""
        return getattr(self.config, "shaping_potential", None)

    def create_memory(self, seed: int | None, capacity: int | None = None, prioritized: bool = True) -> Replay:
        """Uniform replay, or prioritized replay when ``memory.prio_alpha > 0`` (and ``prioritized``).

        ``capacity`` defaults to the current value of ``memory_size_schedule``.
        """
        capacity = capacity or self.memory_sizes()[0]
        t, m = self.config.training, self.config.memory
        return make_replay(self.observation_space, capacity, t.n_steps, t.discard_non_greedy_actions_in_nsteps, seed,
                           prio_alpha=m.prio_alpha if prioritized else 0.0, prio_epsilon=m.prio_epsilon,
                           prio_beta=m.prio_beta, potential=self.shaping_potential(), **self.memory_kwargs())

    def create_exploration_policy(self, seed: int | None) -> ExplorationPolicy:
        e = self.config.exploration
        return EpsilonBoltzmann(self.num_actions, e.epsilon_schedule, e.epsilon_boltzmann_schedule,
                                e.tau_epsilon_boltzmann, e.evaluation_epsilon, seed)

    # ------------------------------------------------------------------ schedules
    def schedule_value(self, schedule: Schedule) -> Any:
        return schedule.value(self.counters.get(schedule.counter), self.config.training.global_schedule_speed)

    def learning_rate(self) -> float:
        return float(self.schedule_value(self.config.training.lr_schedule))

    def gamma(self) -> float:
        return float(self.schedule_value(self.config.training.gamma_schedule))

    def memory_sizes(self) -> tuple[int, int]:
        """(capacity, start_learning_size) from ``memory_size_schedule``."""
        capacity, start = self.schedule_value(self.config.memory.memory_size_schedule)
        return int(capacity), int(start)

    def schedule_step(self, schedule: Schedule) -> float:
        return self.counters.get(schedule.counter) * self.config.training.global_schedule_speed

    def exploration_step(self) -> float:
        """Where the exploration schedules are read now: ``epsilon_schedule``'s counter (scaled by
        ``global_schedule_speed``), advanced by :attr:`exploration_head_start`."""
        return self.schedule_step(self.config.exploration.epsilon_schedule) + self.exploration_head_start

    # ------------------------------------------------------------------ acting
    @abc.abstractmethod
    def q_values(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        """(E, A) action values of a batch of observations, for acting."""

    def deterministic_q_values(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        """(E, A) action values that are the same on every call for the same observations (what
        ``Policy.predict(deterministic=True)`` ranks). :meth:`q_values` here; agents whose
        :meth:`q_values` draws random numbers (IQN's quantile fractions) fix them."""
        return self.q_values(observations)

    def act(self, observation: Observation, phase: RunPhase) -> ActionInfo:
        """Choose one action per environment. ``observation`` holds (E, ...) arrays."""
        count = len(next(iter(observation.values())))
        if phase is RunPhase.HEATUP:
            actions = self.exploration.random_actions(count)
            return ActionInfo(actions, np.zeros(count, dtype=bool))
        with torch.no_grad(), self.precision.act_autocast():
            q = self.q_values(self.to_device(observation)).float().cpu().numpy()
        actions, was_greedy = self.exploration.select(q, self.exploration_step(), phase)
        return ActionInfo(actions, was_greedy, q)

    def to_device(self, observation: Observation) -> dict[str, torch.Tensor]:
        return {k: torch.as_tensor(v).to(self.device, non_blocking=True) for k, v in observation.items()}

    # ------------------------------------------------------------------ observing
    def observe(self, state: Observation, action: int, was_greedy: bool, reward: float,
                next_state: Observation, terminated: bool, truncated: bool) -> None:
        """Record one training step (one environment, unbatched arrays) and count it."""
        self.memory.add(state, action, reward, next_state, terminated, truncated, was_greedy)
        self.counters.env_steps += 1
        capacity, _ = self.memory_sizes()
        if capacity != self.memory.capacity:
            self.memory.set_capacity(capacity)

    def begin_stream(self, stream: Any) -> None:
        """The next observed transitions belong to episode ``stream`` (one key for all the chunks of
        one episode of one environment; None: unknown). Agents that route episodes use it."""

    def forget_streams(self, dead: Any) -> None:
        """Forget the open episodes whose stream key satisfies ``dead(stream)`` (their collector died)."""

    def abandon_episode(self) -> None:
        """Forget the open n-step windows of an episode cut without a final state."""
        self.memory.end_episode_without_final_state()

    def handle_episode_ended(self) -> None:
        self.counters.episodes += 1

    # ------------------------------------------------------------------ training
    def can_learn(self) -> bool:
        _, start = self.memory_sizes()
        return len(self.memory) >= max(start, self.config.training.batch_size)

    def updates_allowed(self) -> int:
        """Gradient updates the replay-ratio gate allows now.

        Learning may sample at most ``number_times_single_memory_is_used_before_discard``
        transitions per transition stored since learning started.
        """
        if self.learning_started_at_transition is None:
            if not self.can_learn():
                return 0
            self.learning_started_at_transition = self.memory.transitions_added
            self.transitions_sampled_at_learning_start = self.counters.transitions_sampled
        stored = self.memory.transitions_added - self.learning_started_at_transition + 1
        budget = self.config.memory.number_times_single_memory_is_used_before_discard * stored
        sampled = self.counters.transitions_sampled - self.transitions_sampled_at_learning_start
        return max(0, int((budget - sampled) // self.config.training.batch_size))

    def train(self, max_updates: int | None = None) -> dict[str, float] | None:
        """Train as much as the replay-ratio gate allows (at most ``max_updates`` batches); the stats
        of the last update, if any."""
        stats = None
        allowed = self.updates_allowed()
        for _ in range(allowed if max_updates is None else min(allowed, max_updates)):
            for group in self.optimizer.param_groups:
                group["lr"] = self.learning_rate()
            batch = self.sample_batch()
            stats = self.learn_from_batch(batch)
            self.counters.transitions_sampled += batch.size
            self.update_target_network_if_due()
        return stats

    def sample_batch(self) -> TransitionBatch:
        return self.memory.sample(self.config.training.batch_size, self.gamma(), self.device)

    @abc.abstractmethod
    def compute_loss(self, batch: TransitionBatch) -> LossOutput:
        """The loss of one batch, its per-sample priority errors and scalars to log."""

    def learn_from_batch(self, batch: TransitionBatch) -> dict[str, float]:
        """One gradient update on ``batch`` and its priority update; returns scalars to log.

        A non-finite loss skips the batch (no optimizer step, no priority update) and is counted;
        :data:`MAX_CONSECUTIVE_NON_FINITE` of them in a row raise a RuntimeError.
        """
        with self.precision.autocast():
            out = self.compute_loss(batch)
        loss = out.loss.detach()
        if not bool(torch.isfinite(loss)):
            self.non_finite_losses += 1
            self.consecutive_non_finite_losses += 1
            if self.consecutive_non_finite_losses >= MAX_CONSECUTIVE_NON_FINITE:
                raise RuntimeError(
                    f"the loss was NaN or infinite in {self.consecutive_non_finite_losses} batches in a row "
                    f"({self.non_finite_losses} in all since the start): training cannot go on. Likely fixes: a "
                    f"lower learning rate (training.lr_schedule), a lower neural_network.clip_grad_norm, "
                    f"rewards of a smaller magnitude, or finite observations (check the environment).")
            return {**out.stats, "loss": float(loss), "non_finite_losses": float(self.non_finite_losses)}
        self.consecutive_non_finite_losses = 0
        grad_norm = self.optimize(out.loss)
        self.counters.gradient_updates += 1
        self.memory.update_priorities(batch, out.priority_errors)
        return {**out.stats, "loss": float(loss), "grad_norm": grad_norm,
                "non_finite_losses": float(self.non_finite_losses)}

    def optimize(self, loss: torch.Tensor) -> float:
        """Backward, clip the gradient norm then each value, step, multiplicative weight decay.

        With float16's gradient scaler: backward on the scaled loss, gradients unscaled before
        clipping, and a step with non-finite gradients skipped (the scaler then lowers its scale).
        """
        nn_params = self.config.neural_network
        scaler = self.grad_scaler
        self.optimizer.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(self.optimizer)
        params = self.online_parameters
        grad_norm = torch.nn.utils.clip_grad_norm_(params, nn_params.clip_grad_norm, foreach=True)
        torch.nn.utils.clip_grad_value_(params, nn_params.clip_grad_value, foreach=True)
        if scaler is None:
            self.optimizer.step()
        else:
            scaler.step(self.optimizer)
            scaler.update()
        decay = self.config.training.weight_decay_lr_ratio
        if decay:
            factor = 1.0 - self.optimizer.param_groups[0]["lr"] * decay
            with torch.no_grad():
                torch._foreach_mul_(params, factor)
        return float(grad_norm)

    def update_target_network_if_due(self) -> None:
        every = self.config.neural_network.number_memories_trained_on_between_target_network_updates
        if self.counters.transitions_sampled - self.transitions_sampled_at_last_target_update >= every:
            self.transitions_sampled_at_last_target_update = self.counters.transitions_sampled
            self.sync_target_network(self.config.neural_network.soft_update_tau)

    def sync_target_network(self, tau: float = 1.0) -> None:
        """target = tau * online + (1 - tau) * target (tau = 1 copies)."""
        with torch.no_grad():
            for target, online in zip(self.target_network.parameters(), self.online_network.parameters()):
                target.lerp_(online, tau)
            for target, online in zip(self.target_network.buffers(), self.online_network.buffers()):
                target.copy_(online)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, include_memory: bool) -> dict[str, Any]:
        state = {
            "online_network": self.online_network.state_dict(),
            "target_network": self.target_network.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "counters": self.counters.to_dict(),
            "learning_started_at_transition": self.learning_started_at_transition,
            "transitions_sampled_at_learning_start": self.transitions_sampled_at_learning_start,
            "transitions_sampled_at_last_target_update": self.transitions_sampled_at_last_target_update,
            "non_finite_losses": self.non_finite_losses,
            "exploration_rng": self.exploration.rng.bit_generator.state,
            "memory_rng": self.memory.rng.bit_generator.state,
            "torch_rng": torch.get_rng_state(),
            "numpy_rng": _numpy_legacy_state(),
            "python_rng": random.getstate(),
        }
        if self.grad_scaler is not None:
            state["grad_scaler"] = self.grad_scaler.state_dict()
        if include_memory:
            state["memory"] = self.memory.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.online_network.load_state_dict(state["online_network"])
        self.target_network.load_state_dict(state["target_network"])
        self.optimizer.load_state_dict(state["optimizer"])
        for group in self.optimizer.param_groups:  # (a checkpoint of older code saved foreach=None)
            group["foreach"] = True
        self.counters = Counters(**state["counters"])
        self.learning_started_at_transition = state["learning_started_at_transition"]
        self.transitions_sampled_at_learning_start = state["transitions_sampled_at_learning_start"]
        self.transitions_sampled_at_last_target_update = state["transitions_sampled_at_last_target_update"]
        self.non_finite_losses = int(state.get("non_finite_losses", 0))
        if self.grad_scaler is not None and "grad_scaler" in state:
            self.grad_scaler.load_state_dict(state["grad_scaler"])
        self.exploration.rng.bit_generator.state = state["exploration_rng"]
        self.memory.rng.bit_generator.state = state["memory_rng"]
        torch.set_rng_state(state["torch_rng"])
        name, keys, pos, has_gauss, cached = state["numpy_rng"]
        np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
        random.setstate(_as_tuples(state["python_rng"]))
        if "memory" in state:
            self.memory.load_state_dict(state["memory"])
        else:  # an empty memory: the replay-ratio gate starts again once it can learn
            self.learning_started_at_transition = None


def _numpy_legacy_state() -> list:
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached]


def _as_tuples(value: Any) -> Any:
    return tuple(_as_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value
