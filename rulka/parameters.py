"""Typed parameters of an experiment, one dataclass per configuration section.

The section and field names follow the TrackMania RL configuration guide (environment,
neural_network, training, memory, exploration, rewards, performance), so a YAML file written for it
loads into these objects (TrackMania's ``map_cycle`` section lives with TrackMania's parameters). A preset builds an :class:`ExperimentConfig` in Python;
``--config FILE.yaml`` and ``-cp section.key=value`` then override single fields
(see :mod:`rulka.config`).

Every schedule follows ``env_steps`` (actions played by all collectors) unless it says otherwise,
and is evaluated at ``counter * training.global_schedule_speed``.

Each field declares the values it accepts beside it, ``param(default, RULE)`` (:mod:`rulka.rules`);
checks of several fields together are ``validation_problems`` methods (:mod:`rulka.validation`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from rulka.rules import (BOOL, CAPACITY_PAIR, FINITE, NON_EMPTY_STR, NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE,
                         POSITIVE_EVEN_INT, POSITIVE_INT, PROBABILITY, STR, Rule, choice, is_capacity_pair, is_int,
                         is_number, list_of, number, optional, param, schedule_of)
from rulka.schedules import Schedule

_KEYWORD_ARGUMENTS = Rule("a mapping of keyword arguments",
                          lambda v: isinstance(v, dict) and all(isinstance(k, str) for k in v))
_COLLECTOR_DEVICE = Rule("cpu, cuda, cuda:N or auto",
                         lambda v: isinstance(v, str) and (v in ("cpu", "cuda", "auto") or
                                                           (v.startswith("cuda:") and v[5:].isdigit())))
_AUTO_OR_BOOL = Rule("auto, true or false", lambda v: v == "auto" or isinstance(v, bool))
_RAY_RESOURCES = Rule("a mapping of resource names to amounts >= 0",
                      lambda v: isinstance(v, dict) and all(isinstance(k, str) and is_number(a) and a >= 0
                                                            for k, a in v.items()))


@dataclass
class EnvironmentParameters:
    """Base of the ``environment`` section. Subclasses name the environment they build."""


@dataclass
class GymEnvironmentParameters(EnvironmentParameters):
    """A gymnasium environment made with ``gymnasium.make(level, **kwargs)``."""

    level: str = param("CartPole-v1", NON_EMPTY_STR)
    """The gymnasium environment id passed to ``gymnasium.make``, e.g. ``CartPole-v1`` or
    ``LunarLander-v3``. Its observation space must be a vector (``Box``) and its actions discrete."""
    kwargs: dict[str, Any] = param(rule=_KEYWORD_ARGUMENTS, default_factory=dict)
    """Extra keyword arguments for ``gymnasium.make`` (e.g. ``{continuous: false}``), passed unchanged."""
    max_episode_steps: Optional[int] = param(None, optional(POSITIVE_INT))
    """Cut episodes after this many steps; a cut is a truncation (the value of the last state is
    still bootstrapped), not a terminal state. None keeps the environment's own limit.

    Unit: environment steps | Range: None, or a few hundred to a few thousand | See: training.max_env_steps
    """


@dataclass
class NeuralNetworkParameters:
    """The ``neural_network`` section: network shapes and the parts of learning tied to them."""

    vector_embedder_hidden_sizes: list[int] = param(rule=list_of(POSITIVE_INT), default_factory=lambda: [256, 256])
    """Hidden layer widths of the MLP that embeds vector observations (gymnasium environments).
    Wider or deeper layers add capacity and cost per step; small control tasks need 64-256.
    TrackMania's network has its own float head instead (``float_hidden_dim``).

    Unit: units per layer | Range: 1-3 layers of 64-512 | See: neural_network.dense_hidden_dimension
    """
    dense_hidden_dimension: int = param(512, NON_NEGATIVE_INT)
    """Hidden width of the heads that map the embedding to Q values: the advantage and value heads
    with ``dueling``, else one head. 0 makes each head a single linear layer. Wider heads add
    capacity and most of the head's parameters (width x embedding size).

    Unit: units | Range: 64-2048 (small control tasks 64-256) | See: neural_network.dueling
    """
    dueling: bool = param(True, BOOL)
    """Split the output into a state value V and advantages A, and combine them as
    ``Q = V + A - mean(A)``. Usually learns faster when many actions have similar values (driving:
    most actions are fine most of the time). Off: one head outputs Q directly."""
    iqn_embedding_dimension: int = param(64, POSITIVE_INT)
    """Number of cosines ``cos(pi * k * tau)``, k = 1..n, that embed a quantile fraction tau
    before it modulates the state embedding (IQN). More cosines can express sharper return
    distributions; the IQN paper uses 64 and gains little above.

    Unit: cosines | Range: 32-128 | See: neural_network.iqn_n, neural_network.iqn_k
    """
    iqn_n: int = param(8, POSITIVE_EVEN_INT)
    """Quantile fractions sampled per state for the online and the target network when learning
    (N = N'). Drawn stratified and mirrored around 0.5, so it must be even. More quantiles give a
    less noisy loss and cost proportionally more per batch.

    Unit: quantiles | Range: 8-32 (even) | See: neural_network.iqn_kappa, training.batch_size
    """
    iqn_k: int = param(32, POSITIVE_EVEN_INT)
    """Quantile fractions sampled per state when acting; Q is their mean and the action its argmax.
    Must be even (mirrored draws). More quantiles give a steadier greedy action and cost more per
    inference, which matters when collectors run on a CPU.

    Unit: quantiles | Range: 8-64 (even) | See: neural_network.iqn_n, performance.collector_device
    """
    iqn_kappa: float = param(5e-3, POSITIVE)
    """Threshold of the quantile Huber loss: quadratic for errors below kappa, linear above. Small
    values make the loss almost the plain quantile (L1) loss, robust to large errors; the IQN paper
    uses 1.0, Linesight 5e-3 with its loss scaling (the gradient scale changes with kappa, so the
    learning rate and clipping values are tuned together with it).

    Unit: return units | Range: 1e-3 to 1.0 | See: training.lr_schedule, neural_network.clip_grad_norm, training.target_self_loss_clamp_ratio
    """
    use_ddqn: bool = param(False, BOOL)
    """Double DQN targets: the online network picks the next action (argmax of its Q) and the
    target network evaluates it. Reduces the over-estimation of Q from taking a max over noisy
    values, at one extra forward pass of the online network per batch. Off: the target network
    both picks and evaluates (Linesight's default)."""
    clip_grad_value: float = param(1000.0, POSITIVE)
    """Clip each gradient element to [-value, value], after the norm clipping. At 1000 it almost
    never acts; it is a guard against a single exploding weight.

    Unit: gradient units | Range: 10-1000 | See: neural_network.clip_grad_norm
    """
    clip_grad_norm: float = param(30.0, POSITIVE)
    """Rescale the whole gradient when its L2 norm exceeds this. Lower values make updates more
    cautious (and slower); the value depends on the loss scale (a summed loss, as Linesight's, has
    larger gradients than a mean). The logged ``grad_norm`` shows how often it acts.

    Unit: gradient L2 norm | Range: 10-100 | See: neural_network.clip_grad_value, neural_network.iqn_kappa, training.batch_size
    """
    number_memories_trained_on_between_target_network_updates: int = param(2048, POSITIVE_INT)
    """Update the target network every time the learner has sampled this many more transitions
    (gradient updates x batch size). Larger values give steadier targets and propagate what was
    learned more slowly; with ``soft_update_tau`` < 1 each update moves the target only part way.

    Unit: transitions sampled | Range: 1000-10000 (2048 = every 4 batches of 512) | See: neural_network.soft_update_tau, training.batch_size
    """
    soft_update_tau: float = param(0.02, number(0, 1, low_open=True))
    """Polyak factor of each target update: ``target = tau * online + (1 - tau) * target``. 1.0
    copies the online network (a hard update, as DQN); small values move the target smoothly.
    The target's effective lag is about update_interval / tau transitions.

    Unit: fraction | Range: 0.001-0.1, or 1.0 for hard copies | See: neural_network.number_memories_trained_on_between_target_network_updates
    """


@dataclass
class TrainingParameters:
    """The ``training`` section: optimiser, schedules, returns, and the run's rhythm."""

    run_name: str = param("run", NON_EMPTY_STR)
    """Name of the TensorBoard log folder of the run, ``<run folder>/tensorboard/<run_name><suffix>``
    (the run folder itself is named by ``rulka -e``). Use it to tell runs apart in TensorBoard."""
    global_schedule_speed: float = param(1.0, POSITIVE)
    """Multiplies the step at which every schedule is read: at 2.0 all schedules (learning rate,
    gamma, epsilon, memory size, TensorBoard suffix) run twice as fast. A way to shorten or stretch
    a run without editing every schedule.

    Unit: factor | Range: 0.1-10 | See: training.lr_schedule, exploration.epsilon_schedule, memory.memory_size_schedule
    """
    adam_epsilon: float = param(1e-4, POSITIVE)
    """Epsilon added to the denominator of the RAdam update. Much larger than the usual 1e-8: it
    damps the step of weights whose gradients are tiny and keeps a summed loss stable.

    Unit: gradient units | Range: 1e-8 to 1e-3 | See: training.lr_schedule
    """
    adam_beta1: float = param(0.9, number(0, 1, high_open=True))
    """Decay of RAdam's running mean of the gradient (momentum). Higher smooths the direction more.

    Unit: decay factor | Range: 0.9-0.99 | See: training.adam_beta2
    """
    adam_beta2: float = param(0.999, number(0, 1, high_open=True))
    """Decay of RAdam's running mean of the squared gradient (per-weight step size). Lower adapts
    faster to changing gradient scales, with noisier steps.

    Unit: decay factor | Range: 0.99-0.999 | See: training.adam_beta1
    """
    weight_decay_lr_ratio: float = param(0.0, NON_NEGATIVE)
    """Multiplicative weight decay after each optimiser step: ``w *= 1 - lr * ratio``, so the decay
    follows the learning-rate schedule. 0 disables it; a small decay limits weight growth in long runs.

    Unit: per unit of learning rate | Range: 0 (off) to 1 | See: training.lr_schedule
    """
    batch_size: int = param(512, POSITIVE_INT)
    """Transitions sampled from the replay memory for one gradient step. Larger batches give
    smoother gradients and use a GPU better, but give fewer weight updates for the same data (the
    replay ratio counts transitions, not batches). On a CPU, smaller batches learn faster per second.

    Unit: transitions | Range: 32-512 | See: memory.number_times_single_memory_is_used_before_discard, neural_network.number_memories_trained_on_between_target_network_updates, neural_network.clip_grad_norm
    """
    lr_schedule: Schedule = param(
        rule=schedule_of(POSITIVE),
        default_factory=lambda: Schedule(
            [(0, 1e-3), (3_000_000, 5e-5), (12_000_000, 5e-5), (15_000_000, 1e-5)], "exponential"
        )
    )
    """Learning rate of the RAdam optimiser over the run. The default starts high for fast early
    progress, falls geometrically to 5e-5 by 3M steps for stable improvement, and to 1e-5 at 15M
    for fine-tuning. Too high: the loss or Q values diverge; too low: slow progress.

    Unit: env steps → learning rate | Range: 1e-5 to 1e-3 | See: training.global_schedule_speed, training.weight_decay_lr_ratio, training.adam_epsilon
    """
    gamma_schedule: Schedule = param(
        rule=schedule_of(PROBABILITY),
        default_factory=lambda: Schedule([(0, 0.999), (1_500_000, 0.999), (2_500_000, 1.0)], "linear")
    )
    """Discount factor over the run. TrackMania's mini-races bound the horizon, so gamma reaches 1.0
    (no discount: Q is the reward of the next few seconds); generic tasks use 0.99-0.999. Slightly
    below 1 early helps the first value estimates settle.

    Unit: env steps → discount per action | Range: 0.99-1.0 | See: training.n_steps, environment.temporal_mini_race_duration_ms
    """
    n_steps: int = param(3, POSITIVE_INT)
    """Length of the n-step return: rewards of n actions, then the bootstrapped value of the state
    reached. Longer returns propagate rewards faster with more variance (and more bias from
    exploratory actions).

    Unit: actions | Range: 1-5 | See: training.discard_non_greedy_actions_in_nsteps, training.gamma_schedule
    """
    discard_non_greedy_actions_in_nsteps: bool = param(True, BOOL)
    """Cut an n-step return at the first exploratory (non-greedy) action after its first action,
    bootstrapping there: the return then follows the greedy policy being learned, not the
    exploration's detours. Costs some of the n-step speed-up while exploration is high."""
    tensorboard_suffix_schedule: Schedule = param(
        rule=schedule_of(STR),
        default_factory=lambda: Schedule(
            [(0, ""), (6_000_000, "_2"), (15_000_000, "_3"), (30_000_000, "_4"), (45_000_000, "_5"),
             (80_000_000, "_6"), (150_000_000, "_7")],
            "staircase",
        )
    )
    """Suffix of the TensorBoard folder (``run_name + suffix``), a staircase: a new log folder
    starts at each knot, so very long runs stay fast to browse. ``[[0, ""]]`` keeps one folder.

    Unit: env steps → folder suffix | Range: one knot per 5-50M steps | See: training.run_name
    """
    train_every_n_env_steps: int = param(1, POSITIVE_INT)
    """The learner tries to train each time the environment step count crosses a multiple of this.
    The replay-ratio gate, not this, sets how many transitions it then samples per transition
    played; larger values train in fewer, longer bursts.

    Unit: environment steps | Range: 1-16 | See: memory.number_times_single_memory_is_used_before_discard
    """
    evaluate_every_n_env_steps: int = param(10_000, NON_NEGATIVE_INT)
    """Run greedy evaluation episodes every this many environment steps and keep the best
    checkpoint; 0 never evaluates during training (TrackMania evaluates in its map cycle instead).

    Unit: environment steps | Range: 0, or 1-10% of the run | See: training.evaluation_episodes, exploration.evaluation_epsilon
    """
    evaluation_episodes: int = param(10, POSITIVE_INT)
    """Episodes averaged by one evaluation (and by ``rulka --evaluate``). More episodes give a
    steadier score and take longer.

    Unit: episodes | Range: 5-100 | See: training.evaluate_every_n_env_steps
    """
    checkpoint_every_n_env_steps: int = param(10_000, NON_NEGATIVE_INT)
    """Write ``checkpoints/last.pt`` every this many environment steps (one is always written at the
    end and when the run is stopped); ``--resume`` continues from it. 0 writes only the final one.

    Unit: environment steps | Range: 1-5% of the run | See: memory.save_memory_in_checkpoint
    """
    max_env_steps: int = param(1_000_000, POSITIVE_INT)
    """Length of the run: stop after this many environment steps (all collectors together).
    ``rulka --max-steps`` overrides it.

    Unit: environment steps | Range: 5e4 (CartPole) to 5e7 (TrackMania) | See: training.global_schedule_speed
    """


@dataclass
class MemoryParameters:
    """The ``memory`` section: replay capacity, when learning starts, and how often data is reused."""

    memory_size_schedule: Schedule = param(
        rule=schedule_of(CAPACITY_PAIR),
        default_factory=lambda: Schedule(
            [(0, (50_000, 20_000)), (5_000_000, (100_000, 75_000)), (7_000_000, (200_000, 150_000))],
            "staircase",
        )
    )
    """Staircase of ``(capacity, start_learning_size)``: the replay memory keeps the last
    ``capacity`` transitions, and learning waits until it holds ``start_learning_size``. Small
    early (fills fast, learning starts soon, little RAM), larger later (more diverse data). RAM
    grows with the capacity: with TrackMania's 160 x 120 frames about 1 GB per 50k transitions.

    Unit: env steps → (transitions, transitions) | Range: capacity 1e4-1e6; start 1e3 to 75% of capacity | See: memory.number_times_single_memory_is_used_before_discard, training.n_steps
    """
    number_times_single_memory_is_used_before_discard: float = param(32.0, POSITIVE)
    """The replay ratio: the learner may sample at most this many transitions per transition stored
    since learning started, so each transition is used about this many times. Higher reuses data
    more (more sample-efficient, but older data, and the learner can become the bottleneck); lower
    keeps data fresher and trains less per step played.

    Unit: samples per stored transition | Range: 1-64 | See: training.batch_size, training.train_every_n_env_steps, memory.memory_size_schedule
    """
    prio_alpha: float = param(0.0, NON_NEGATIVE)
    """Prioritised replay exponent: transitions are sampled with probability proportional to
    ``(|TD error| + prio_epsilon) ** alpha``. 0 samples uniformly (the default: simpler and
    unbiased); 0.2-0.6 focuses learning on surprising transitions at the cost of bias and
    bookkeeping.

    Unit: exponent | Range: 0 (uniform) to 0.6 | See: memory.prio_epsilon, memory.prio_beta, performance.make_highest_prio_figures
    """
    prio_epsilon: float = param(2e-3, POSITIVE)
    """Added to each |TD error| before prioritisation, so no transition gets probability 0. Only
    acts when ``prio_alpha`` > 0.

    Unit: return units | Range: 1e-6 to 1e-2 | See: memory.prio_alpha
    """
    prio_beta: float = param(1.0, PROBABILITY)
    """Importance-sampling exponent: each sampled loss is weighted by ``(N * P(i)) ** -beta``
    (normalised), 1.0 fully undoes the bias of prioritised sampling, 0 ignores it. Only acts when
    ``prio_alpha`` > 0.

    Unit: exponent | Range: 0.4-1.0 | See: memory.prio_alpha
    """
    buffer_test_ratio: float = param(0.0, number(0, 1, high_open=True))
    """Fraction of episodes whose transitions go to a held-out test buffer instead of the replay
    memory; the learner logs a test loss on it (to spot over-fitting). Those transitions are never
    trained on. Used by the TrackMania agent.

    Unit: fraction of episodes | Range: 0-0.1 | See: memory.memory_size_schedule
    """
    save_memory_in_checkpoint: bool = param(True, BOOL)
    """Save the replay memory inside checkpoints so ``--resume`` continues with the same data (exact
    resume). Large memories make checkpoints large and slow to write; without it a resumed run
    refills its memory with its current policy before learning again."""


@dataclass
class ExplorationParameters:
    """The ``exploration`` section: epsilon-greedy mixed with epsilon-Boltzmann (noise on Q)."""

    epsilon_schedule: Schedule = param(
        rule=schedule_of(PROBABILITY),
        default_factory=lambda: Schedule(
            [(0, 1.0), (50_000, 1.0), (300_000, 0.1), (3_000_000, 0.03)], "exponential"
        )
    )
    """Probability of a uniformly random action. The default plays at random for the first 50k
    steps (the memory fills with varied data), falls to 0.1 by 300k and 0.03 by 3M steps. Higher
    explores more and learns from a worse policy's data.

    Unit: env steps → probability | Range: from 1.0 down to 0.01-0.1 | See: exploration.epsilon_boltzmann_schedule, training.discard_non_greedy_actions_in_nsteps
    """
    epsilon_boltzmann_schedule: Schedule = param(
        rule=schedule_of(PROBABILITY),
        default_factory=lambda: Schedule([(0, 0.15), (3_000_000, 0.03)], "exponential")
    )
    """When the action is not random: probability of an epsilon-Boltzmann action, the argmax of Q
    plus Gaussian noise of scale ``tau_epsilon_boltzmann``. Such actions differ from the greedy
    one only where Q values are close, which explores near-ties cheaply. With epsilon 0.1 and 0.15
    here: 10% random, 13.5% noisy argmax, 76.5% greedy.

    Unit: env steps → probability | Range: 0-0.2 | See: exploration.tau_epsilon_boltzmann, exploration.epsilon_schedule
    """
    tau_epsilon_boltzmann: float = param(0.01, NON_NEGATIVE)
    """Scale of the Gaussian noise added to Q by an epsilon-Boltzmann action. Compared with the
    gaps between Q values: small values only break near-ties, large ones make such actions almost
    random.

    Unit: Q units (return) | Range: 0.01-1.0 | See: exploration.epsilon_boltzmann_schedule
    """
    evaluation_epsilon: float = param(0.0, PROBABILITY)
    """Probability of a random action during evaluation episodes; 0 is fully greedy. A small value
    (0.001-0.05) shows how robust the policy is to perturbations.

    Unit: probability | Range: 0-0.05 | See: training.evaluate_every_n_env_steps
    """


@dataclass
class RewardParameters:
    """The ``rewards`` section for generic environments: the reward input filters."""

    reward_scale: float = param(1.0, FINITE)
    """Multiply every reward by this (after clipping), so returns sit in a range the network
    learns well. Scales all Q values, hence interacts with ``iqn_kappa`` and the gradient clipping.

    Unit: factor | Range: 0.01-10 | See: rewards.reward_clip, neural_network.iqn_kappa
    """
    reward_clip: Optional[float] = param(None, optional(POSITIVE))
    """Clip rewards to [-reward_clip, reward_clip] before scaling (Atari-style); None does not clip.
    Clipping hides reward magnitudes from the agent.

    Unit: reward units | Range: None, or 1-10 | See: rewards.reward_scale
    """


@dataclass
class PerformanceParameters:
    """The ``performance`` section: processes, devices and the policy's refresh rhythm.

    One learner process trains; ``gpu_collectors_count`` collector processes play
    ``envs_per_collector`` environments each and send what they played. With 0 collectors the
    learner plays one environment itself between updates (small environments, tests, exact resume).
    """

    gpu_collectors_count: int = param(0, NON_NEGATIVE_INT)
    """Collector processes, each playing its environments with a copy of the policy; 0 collects
    inside the learner's process, one environment stepped between updates (deterministic, exact
    resume). More collectors collect faster until the CPU, the GPU or the learner is saturated;
    each real-game collector runs one game instance (about 2 GB of RAM).

    Unit: processes | Range: 0; 2-16 with the real game (about one per 1-2 CPU cores) | See: performance.envs_per_collector, performance.collector_device, performance.max_rollout_queue_size
    """
    envs_per_collector: int = param(1, POSITIVE_INT)
    """Environments each collector steps together, choosing all their actions in one forward pass:
    fewer, larger inferences. Raise it for cheap environments (the simulator); the real game runs
    one game per collector.

    Unit: environments | Range: 1-16 | See: performance.gpu_collectors_count
    """
    collector_device: str = param("cpu", _COLLECTOR_DEVICE)
    """Where collectors run their inference network: ``cpu``, ``cuda``, ``cuda:N``, or ``auto`` (the
    learner's device). A GPU helps with large networks or many environments per collector; the CPU
    leaves the GPU to the learner."""
    collector_torch_threads: int = param(1, POSITIVE_INT)
    """Torch threads per collector process. Keep 1 with several collectors, so they do not fight
    over the cores.

    Unit: threads | Range: 1-4 | See: performance.gpu_collectors_count, performance.torch_num_threads
    """
    running_speed: int = param(160, POSITIVE_INT)
    """Speed of the real game relative to real time (TMInterface's speed); the simulator ignores it.
    Faster collects more per second until the machine cannot keep up; 1 is for watching a race.

    Unit: x real time | Range: 1 (watching) to 200 | See: performance.gpu_collectors_count
    """
    send_shared_network_every_n_batches: int = param(8, POSITIVE_INT)
    """The learner publishes its online network to the collectors every this many batches. More
    often: collectors act with a fresher policy, at the cost of more copies; less often: cheaper,
    staler.

    Unit: batches | Range: 4-16 | See: performance.update_inference_network_every_n_actions
    """
    update_inference_network_every_n_actions: int = param(8, POSITIVE_INT)
    """Collectors load the latest published network every this many actions (and at each episode
    start), so a long race does not end with the policy it started with.

    Unit: actions | Range: 4-16 | See: performance.send_shared_network_every_n_batches
    """
    max_rollout_queue_size: int = param(16, POSITIVE_INT)
    """Rollout chunks waiting for the learner, over all collectors; a collector whose share is full
    waits. Bounds memory and how stale queued data may be when the learner is the bottleneck.

    Unit: chunks | Range: 2 x collectors to 64 | See: performance.rollout_chunk_actions, performance.gpu_collectors_count
    """
    rollout_chunk_actions: int = param(200, POSITIVE_INT)
    """Longest piece of an episode a collector sends at once: the learner can store and learn from
    a long race while it is still being played.

    Unit: actions | Range: 50-1000 | See: performance.max_rollout_queue_size
    """
    collector_buffer_actions: int = param(6_000, POSITIVE_INT)
    """A collector process whose share of the rollout queue is full never waits in the middle of a
    race (the game would drop the race after its in-race timeout): it keeps playing into a local
    buffer of up to this many actions and waits between races, before the next reset. A buffer that
    fills mid-race (the learner stalled for that many actions) makes the collector wait anyway, and a
    game kept waiting past its in-race timeout loses the race in flight. Bounds the collector's
    memory (TrackMania: about 20 KB per action).

    Unit: actions | Range: 2-10 x the longest race | See: performance.max_rollout_queue_size, performance.rollout_chunk_actions
    """
    concurrent_env_steps: bool | str = param("auto", _AUTO_OR_BOOL)
    """Step (and reset) a collector's environments at the same time, one thread each, instead of one
    after another: a step then lasts as long as the slowest environment's, not the sum of them. It
    pays for environments that wait on another process (the real game behind its socket; see
    docs/benchmarks.md for 1 collector x 4 stand-in games), not for environments that compute in
    this process (the simulator: Python's threads would take turns).
    ``auto``: when every environment of the collector declares ``steps_wait_on_io`` (TrackMania's
    real-game backend does, the simulator does not); ``true``: always (with 2 or more environments);
    ``false``: never. The rollouts are the same either way (results are recorded in slot order).
    Environments that also offer phased steps (``step_phases``: TrackMania's real-game backend) are
    stepped interleaved in the collector's own thread instead of in threads: every game's request
    goes out before any reply is read, with no hand-off between threads.

    Range: auto, true, false | See: performance.envs_per_collector
    """
    collector_timeout_s: float = param(300.0, POSITIVE)
    """A collector that gives no sign of life for this long (a hung game) is killed and replaced, and
    the processes its environments reported (its games) are killed with it. Collector processes beat
    while they wait for the learner and while an environment resets (a game's launch, map load,
    countdown), so it need only exceed one step: TrackMania's real game refuses, before the run starts,
    a value below its in-race timeout (environment.timeout_during_run_ms, 30 s) + 30 s. A Ray actor
    shows life only when a call returns, which may span a game's start: there the real game refuses a
    value below its start deadline (TMI_START_TIMEOUT_S, default 600 s) + 60 s.

    Unit: s | Range: 60-600 | See: environment.timeout_during_run_ms
    """
    collector_backend: str = param("processes", choice("processes", "ray"))
    """How collectors run: ``processes`` (this machine) or ``ray`` (Ray actors, on this machine or a
    Ray cluster: ``rulka --ray-address``; needs ``pip install 'rulka[ray]'``)."""
    ray_collector_cpus: float = param(1.0, NON_NEGATIVE)
    """CPUs Ray reserves for each collector actor (``collector_backend: ray``).

    Unit: CPUs | Range: 0.5-4 | See: performance.collector_backend
    """
    ray_collector_gpus: float = param(0.0, NON_NEGATIVE)
    """GPUs Ray gives each collector actor, fractions allowed (0: none; needed for
    ``collector_device: cuda``).

    Unit: GPUs | Range: 0-1 | See: performance.collector_backend, performance.collector_device
    """
    ray_collector_resources: dict[str, float] = param(rule=_RAY_RESOURCES, default_factory=dict)
    """Custom Ray resources each collector actor needs, e.g. ``{tmnf: 1}`` so game-running collectors
    go to nodes started with ``ray start --resources '{"tmnf": 2}'`` (one unit per game instance)."""
    make_highest_prio_figures: bool = param(False, BOOL)
    """At each checkpoint, save PNG images of the transitions with the highest priority (state and
    next-state frames side by side) under ``high_prio_figures/``: where the network is most wrong.
    Only with prioritised replay (``prio_alpha`` > 0) and image observations; slow, for debugging."""
    torch_num_threads: int = param(0, NON_NEGATIVE_INT)
    """Torch threads of the learner process; 0 keeps torch's default (all cores). Lower it when
    collectors share the machine's cores.

    Unit: threads | Range: 0, or 1 to the number of cores | See: performance.collector_torch_threads
    """
    keep_freed_memory: bool = param(True, BOOL)
    """The learner process keeps the memory it frees for reuse instead of returning it to the
    system (glibc malloc's mmap and trim thresholds raised; Linux only, ignored elsewhere). Each
    update then reuses the previous update's activations instead of page-faulting them in again.
    Measured on a 2-core CPU (``bench/update_speed.py``, ``bench/vs_linesight_learner.py``): float32
    updates/s 1.1-1.2x at the sim preset's shape and 1.3x at Linesight's (160 x 120, batch 512);
    bfloat16 at the sim preset's shape unchanged (1.01x). The cost: the process holds on to its peak
    memory (about one update's activations), as a GPU's caching allocator does.

    See: performance.torch_num_threads
    """
    precision: str = param("auto", choice("auto", "float32", "bfloat16", "float16"))
    """The dtype the networks compute in (autocast), for learning and for acting (the collectors'
    inference). ``float32``: none. ``bfloat16``: learning and acting, the convolutions only (every
    other layer computes in float32: with them in bfloat16 too, ``short``'s best races were 6-8 %
    slower than in float32); on a CPU it pays only with bf16 units (avx512_bf16 or amx_bf16) and is slower
    without (a warning says so). ``float16``: every layer but the heads' output layers, with a
    gradient scaler, as Linesight trains; for CUDA (a CPU, e.g. CPU collectors, does what ``auto``
    does there). ``auto``, what measured fastest without hurting learning: on a CPU with bf16 units,
    bfloat16 learning for a network with convolutions (1.2-1.3x the float32 updates/s at the sim
    preset's shape) and float32 for acting (bfloat16 ran 0.6-1.0x on 1-8 observations) and for
    MLP-only networks; on CUDA float16 learning with a gradient scaler, float32 acting; float32
    elsewhere. The learner prints what it picked when a run starts. Weights, gradients, optimizer
    state, quantile values, targets, losses, priorities and the replay stay float32. Set float32 to
    compare bit for bit with runs of older versions.

    Range: auto, float32, bfloat16, float16 | See: performance.collector_device
    """


@dataclass
class DemonstrationParameters:
    """The ``demonstrations`` section: whole episodes another driver played (a demonstration set,
    :mod:`memories.demonstrations`; ``rulka demos record`` writes one) give the agent a head start.
    Empty ``folders`` turns the section off."""

    folders: list[str] = param(rule=list_of(NON_EMPTY_STR), default_factory=list)
    """Demonstration set folders (each holds a ``demonstrations.yaml``), read when the run is built;
    their observations must have the environment's names and shapes (record them with the run's
    environment settings). A resumed run reads them again (checkpoints do not hold them).

    Unit: paths | Range: [] (off), or one folder per driver or track | See: demonstrations.pretrain_updates, demonstrations.batch_share_schedule
    """
    pretrain_updates: int = param(500, NON_NEGATIVE_INT)
    """Supervised updates of the online network on the demonstrations before the first collected
    action (the target network is then copied from it); they count as gradient updates, so a run
    that pretrains skips heat-up and its collectors act with the pretrained network from the first
    action (exploration as ``exploration.epsilon_schedule`` says). Not repeated on ``--resume``.

    Unit: gradient updates | Range: 0 (off) - a few thousand | See: demonstrations.pretrain_loss
    """
    pretrain_loss: str = param("large_margin", choice("large_margin", "cross_entropy"))
    """What a pretraining update minimises on a batch of demonstrated states ``s`` and actions ``a_E``
    (the agent's acting Q-values: quantile means for IQN and QR-DQN):
    ``large_margin`` is DQfD's ``max_a [Q(s, a) + margin * (a != a_E)] - Q(s, a_E)`` (zero once the
    demonstrated action leads by ``margin``; Q keeps its scale for the TD updates that follow),
    ``cross_entropy`` treats Q as logits of the demonstrated action.

    Unit: - | Range: large_margin, cross_entropy | See: demonstrations.margin
    """
    margin: float = param(0.8, POSITIVE)
    """DQfD's margin of ``large_margin``: how far the demonstrated action's Q must lead the others.

    Unit: Q units (return) | Range: 0.1-1 (DQfD: 0.8) | See: demonstrations.pretrain_loss
    """
    start_epsilon: float = param(0.1, PROBABILITY)
    """In a run that pretrains, the exploration schedules start where ``exploration.epsilon_schedule``
    first comes down to this value: the pretrained network drives its exploring races from the first
    action instead of a stretch of (mostly) random actions that would waste what it learned
    (``trackmania_iqn_sim`` starts at step 60,000 of its schedule, ``trackmania_iqn_uni`` at 300,000).
    1.0 keeps the schedules as they are. Counts as ``exploration.epsilon_schedule``'s counter does;
    applies on ``--resume`` too (the run pretrained when it started). 0.1 was chosen on
    ``procedural:11`` (first finish after 0.3 minute instead of 1.2 with 1.0; docs/benchmarks.md).

    Unit: probability | Range: 0.03-1.0 (at least the schedule's last value) | See: demonstrations.pretrain_updates, exploration.epsilon_schedule
    """
    batch_share_schedule: Schedule = param(
        rule=schedule_of(PROBABILITY),
        default_factory=lambda: Schedule([(0, 0.25), (200_000, 0.0)], "linear"))
    """Fraction of each training batch drawn (uniformly) from the demonstrations, the rest from the
    collected replay; the demonstrations are assembled like collected episodes (n-step returns,
    mini-races, shaping). 0 stops drawing them (pretraining still happens).

    Unit: env steps → fraction of a batch | Range: 0-0.5, decaying to 0 | See: demonstrations.folders
    """

    def pretrains(self) -> bool:
        """Whether a run with this section pretrains when it starts (and so skips its random start)."""
        return bool(self.folders) and self.pretrain_updates > 0

    def exploration_head_start(self, epsilon_schedule: Schedule) -> float | None:
        """Steps of ``epsilon_schedule`` (in its knots' units) the exploration schedules skip: where it
        first comes down to ``start_epsilon`` in a run that pretrains, else 0; None when it never does."""
        if not self.pretrains() or self.start_epsilon >= 1.0:
            return 0.0
        return epsilon_schedule.first_step_at_most(self.start_epsilon)


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
    demonstrations: DemonstrationParameters = field(default_factory=DemonstrationParameters)

    def validation_problems(self) -> list[str]:
        """Checks across sections, with full key paths (run even when a field is out of range, so
        they tolerate any value). Each replay capacity must exceed ``n_steps + 1`` (an n-step window
        plus the next state)."""
        return self._start_epsilon_problems() + self._capacity_problems()

    def _start_epsilon_problems(self) -> list[str]:
        try:
            target, epsilon = self.demonstrations.start_epsilon, self.exploration.epsilon_schedule
            if self.demonstrations.exploration_head_start(epsilon) is not None:
                return []
            lowest = min(float(v) for _, v in epsilon.points)
        except (AttributeError, TypeError, ValueError):  # a field out of range: its own rule reports it
            return []
        return [f"demonstrations.start_epsilon: {target} is below every value of exploration.epsilon_schedule "
                f"(lowest {lowest:g}); raise it to at least {lowest:g} (-cp demonstrations.start_epsilon={lowest:g}), "
                "or lower the schedule's last value"]

    def _capacity_problems(self) -> list[str]:
        schedule = getattr(self.memory, "memory_size_schedule", None)
        n_steps = getattr(self.training, "n_steps", None)
        if not isinstance(schedule, Schedule) or not is_int(n_steps):
            return []
        small = [i for i, (_, v) in enumerate(schedule.points) if is_capacity_pair(v) and v[0] <= n_steps + 1]
        if not small:
            return []
        raised = [[step, [max(v[0], n_steps + 2), v[1]]] if is_capacity_pair(v) else [step, v]
                  for step, v in schedule.points]
        raise_all = f"memory.memory_size_schedule={json.dumps(raised, separators=(',', ':'))}"
        problems = []
        for i in small:
            capacity = schedule.points[i][1][0]
            lower = (f" or lower training.n_steps to at most {capacity - 2} (-cp training.n_steps={capacity - 2})"
                     if capacity > 2 else "")
            problems.append(f"memory.memory_size_schedule.points[{i}]: capacity {capacity} must exceed training.n_steps "
                            f"+ 1 = {n_steps + 1}; raise the capacity to at least {n_steps + 2} (-cp {raise_all})" + lower)
        return problems


@dataclass
class PresetValidationParameters:
    """Coach's golden test of a preset: reach ``min_reward_threshold`` (the average return of one
    evaluation) within ``max_env_steps`` environment steps."""

    test: bool = False
    """Run this preset in the golden test suite (``tests/presets/test_golden.py``)."""
    min_reward_threshold: float = 0.0
    """Evaluation average the preset must reach to pass.

    Unit: return | Range: the task's solved score (CartPole-v1: 475)
    """
    max_env_steps: int = 0
    """Environment steps the preset may take to reach the threshold.

    Unit: environment steps | Range: the run length the preset is meant for
    """
