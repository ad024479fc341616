"""Typed parameters of an experiment, one dataclass per configuration section.

The section and field names follow the TrackMania RL configuration guide (environment,
neural_network, training, memory, exploration, rewards, performance), so a YAML file written for it
loads into these objects (TrackMania's ``map_cycle`` section lives with TrackMania's parameters). A preset builds an :class:`ExperimentConfig` in Python;
``--config FILE.yaml`` and ``-cp section.key=value`` then override single fields
(see :mod:`rulka.config`).

Every schedule follows ``env_steps`` (actions played by all collectors) unless it says otherwise,
and is evaluated at ``counter * training.global_schedule_speed``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from rulka.schedules import Schedule


@dataclass
class EnvironmentParameters:
    """Base of the ``environment`` section. Subclasses name the environment they build."""


@dataclass
class GymEnvironmentParameters(EnvironmentParameters):
    """A gymnasium environment made with ``gymnasium.make(level, **kwargs)``."""

    level: str = "CartPole-v1"
    #: Extra keyword arguments for ``gymnasium.make``.
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: Cut episodes after this many steps (a truncation), None keeps the environment's own limit.
    max_episode_steps: Optional[int] = None


@dataclass
class NeuralNetworkParameters:
    """The ``neural_network`` section: network shapes and the parts of learning tied to them."""

    #: Hidden sizes of the MLP embedder of vector observations.
    vector_embedder_hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    #: Hidden size of the dueling advantage / value heads (0: a single linear Q head).
    dense_hidden_dimension: int = 512
    #: Use dueling heads (Q = V + A - mean(A)).
    dueling: bool = True
    iqn_embedding_dimension: int = 64
    #: Quantiles sampled for the online and target networks when training (must be even).
    iqn_n: int = 8
    #: Quantiles sampled when acting (must be even).
    iqn_k: int = 32
    #: Threshold of the quantile Huber loss.
    iqn_kappa: float = 5e-3
    use_ddqn: bool = False
    clip_grad_value: float = 1000.0
    clip_grad_norm: float = 30.0
    #: Sync the target network every this many sampled transitions (gradient_updates * batch_size).
    number_memories_trained_on_between_target_network_updates: int = 2048
    #: Polyak factor of the target update: target = tau * online + (1 - tau) * target; 1.0 = copy.
    soft_update_tau: float = 0.02


@dataclass
class TrainingParameters:
    """The ``training`` section: optimiser, schedules, returns, and the run's rhythm."""

    run_name: str = "run"
    global_schedule_speed: float = 1.0
    adam_epsilon: float = 1e-4
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    #: Multiplicative weight decay after each step: w *= 1 - lr * weight_decay_lr_ratio.
    weight_decay_lr_ratio: float = 0.0
    batch_size: int = 512
    lr_schedule: Schedule = field(
        default_factory=lambda: Schedule(
            [(0, 1e-3), (3_000_000, 5e-5), (12_000_000, 5e-5), (15_000_000, 1e-5)], "exponential"
        )
    )
    gamma_schedule: Schedule = field(
        default_factory=lambda: Schedule([(0, 0.999), (1_500_000, 0.999), (2_500_000, 1.0)], "linear")
    )
    n_steps: int = 3
    discard_non_greedy_actions_in_nsteps: bool = True
    tensorboard_suffix_schedule: Schedule = field(
        default_factory=lambda: Schedule(
            [(0, ""), (6_000_000, "_2"), (15_000_000, "_3"), (30_000_000, "_4"), (45_000_000, "_5"),
             (80_000_000, "_6"), (150_000_000, "_7")],
            "staircase",
        )
    )
    #: Try to train after every this many environment steps (the memory gate decides how much).
    train_every_n_env_steps: int = 1
    #: Run evaluation episodes every this many environment steps (0: never during training).
    evaluate_every_n_env_steps: int = 10_000
    #: Greedy episodes averaged by one evaluation.
    evaluation_episodes: int = 10
    #: Write a checkpoint every this many environment steps (one is always written at the end).
    checkpoint_every_n_env_steps: int = 10_000
    #: Stop after this many environment steps (``--max-steps`` overrides it).
    max_env_steps: int = 1_000_000


@dataclass
class MemoryParameters:
    """The ``memory`` section: replay capacity, when learning starts, and how often data is reused."""

    #: Staircase of (env_steps, (capacity, start_learning_size)).
    memory_size_schedule: Schedule = field(
        default_factory=lambda: Schedule(
            [(0, (50_000, 20_000)), (5_000_000, (100_000, 75_000)), (7_000_000, (200_000, 150_000))],
            "staircase",
        )
    )
    #: Replay ratio: learning may sample at most this many transitions per transition stored
    #: since learning started (each transition is used about this many times).
    number_times_single_memory_is_used_before_discard: float = 32.0
    prio_alpha: float = 0.0
    prio_epsilon: float = 2e-3
    prio_beta: float = 1.0
    #: Fraction of transitions kept out of training in a test buffer (for a test loss).
    buffer_test_ratio: float = 0.0
    #: Save the replay memory inside checkpoints so ``--resume`` continues with the same data.
    save_memory_in_checkpoint: bool = True


@dataclass
class ExplorationParameters:
    """The ``exploration`` section: epsilon-greedy mixed with epsilon-Boltzmann (noise on Q)."""

    epsilon_schedule: Schedule = field(
        default_factory=lambda: Schedule(
            [(0, 1.0), (50_000, 1.0), (300_000, 0.1), (3_000_000, 0.03)], "exponential"
        )
    )
    epsilon_boltzmann_schedule: Schedule = field(
        default_factory=lambda: Schedule([(0, 0.15), (3_000_000, 0.03)], "exponential")
    )
    #: Scale of the Gaussian noise added to Q by an epsilon-Boltzmann action.
    tau_epsilon_boltzmann: float = 0.01
    #: Epsilon during evaluation (0: greedy).
    evaluation_epsilon: float = 0.0


@dataclass
class RewardParameters:
    """The ``rewards`` section for generic environments: the reward input filters."""

    #: Multiply every reward by this (after clipping).
    reward_scale: float = 1.0
    #: Clip rewards to [-reward_clip, reward_clip] before scaling (None: no clipping).
    reward_clip: Optional[float] = None


@dataclass
class PerformanceParameters:
    """The ``performance`` section: processes, devices and the policy's refresh rhythm.

    One learner process trains; ``gpu_collectors_count`` collector processes play
    ``envs_per_collector`` environments each and send what they played. With 0 collectors the
    learner plays one environment itself between updates (small environments, tests, exact resume).
    """

    #: Collector processes (0: collect inside the learner's process).
    gpu_collectors_count: int = 0
    #: Environments each collector steps together, choosing all their actions in one forward pass.
    envs_per_collector: int = 1
    #: Where collectors run their inference network: ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (the learner's).
    collector_device: str = "cpu"
    #: Torch threads per collector process.
    collector_torch_threads: int = 1
    #: Game speed of the real game (1 = real time); the simulator ignores it.
    running_speed: int = 160
    #: The learner publishes its online network to the collectors every this many batches.
    send_shared_network_every_n_batches: int = 8
    #: Collectors refresh their inference network every this many actions (and at each episode start).
    update_inference_network_every_n_actions: int = 8
    #: Rollout chunks waiting for the learner, over all collectors; a collector waits while its share is full.
    max_rollout_queue_size: int = 16
    #: Longest chunk a collector sends, actions: a long race is learned from while it goes on.
    rollout_chunk_actions: int = 200
    #: A collector silent for this long (a hung game) is killed and replaced, seconds.
    collector_timeout_s: float = 300.0
    #: How collectors run: ``processes`` (this machine) or ``ray`` (Ray actors, on this machine or a Ray
    #: cluster: ``rulka --ray-address``; needs ``pip install 'rulka[ray]'``).
    collector_backend: str = "processes"
    #: CPUs Ray reserves for each collector actor (``collector_backend: ray``).
    ray_collector_cpus: float = 1.0
    #: GPUs Ray gives each collector actor, fractions allowed (0: none; needed for ``collector_device: cuda``).
    ray_collector_gpus: float = 0.0
    #: Custom Ray resources each collector actor needs, e.g. ``{tmnf: 1}`` so game-running collectors
    #: go to nodes started with ``ray start --resources '{"tmnf": 2}'`` (one unit per game instance).
    ray_collector_resources: dict[str, float] = field(default_factory=dict)
    make_highest_prio_figures: bool = False
    #: Torch threads of the learner (0: torch's default).
    torch_num_threads: int = 0


@dataclass
class ExperimentConfig:
    """The whole definition of an experiment, as the sections of the configuration guide."""

    environment: EnvironmentParameters = field(default_factory=GymEnvironmentParameters)
    neural_network: NeuralNetworkParameters = field(default_factory=NeuralNetworkParameters)
    training: TrainingParameters = field(default_factory=TrainingParameters)
    memory: MemoryParameters = field(default_factory=MemoryParameters)
    exploration: ExplorationParameters = field(default_factory=ExplorationParameters)
    rewards: RewardParameters = field(default_factory=RewardParameters)
    performance: PerformanceParameters = field(default_factory=PerformanceParameters)


@dataclass
class PresetValidationParameters:
    """Coach's golden test of a preset: reach ``min_reward_threshold`` (the average return of one
    evaluation) within ``max_env_steps`` environment steps."""

    test: bool = False
    min_reward_threshold: float = 0.0
    max_env_steps: int = 0
