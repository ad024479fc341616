"""How fast is an update? rulka's levers against today's float32 update, and rulka's path against a
bare PyTorch loop doing the same maths.

    python bench/update_speed.py [--seconds 4] [--rounds 3] [--threads 1] [--sizes cartpole,sim]
                                 [--levers LEVER,...] [--no-bare]

Two sizes: CartPole (MLP 64-64, batch 64, N = N' = 8, 3-step returns) and the ``trackmania_iqn_sim``
network (48 x 64 frame + 184 floats, batch 64, mini-race replay). For each, the replay is filled
with random transitions, then updates (the body of ``agent.train()`` without the replay-ratio gate:
sample, loss, backward, clip, step, priorities, target schedule) run ``--seconds`` per measurement.

Levers (``--levers``, default all but compile): each variant runs in the same process as the
baseline, in ``--rounds`` alternating rounds; the table gives updates/s (mean [min-max]) and the
ratio to the baseline of the same round (median [min-max]). The baseline, ``today``, is the update as
it was before issue 23: float32, contiguous (NCHW) convolutions, out-of-place LeakyReLU, RAdam's
foreach path, ``--threads`` threads.

* ``channels_last``: conv weights and images in channels_last (Linesight's layout);
* ``inplace``: LeakyReLU(inplace=True);
* ``shipped_float32``: both (what ``performance.precision: float32`` runs now);
* ``bfloat16``: both plus bfloat16 autocast, which applies to the convolutions only (what ``auto`` runs
  for learning on a CPU with bf16 units);
* ``bfloat16_out_of_place``: the same with out-of-place LeakyReLU;
* ``for_loop``: shipped float32 with RAdam's per-tensor loop instead of foreach (RAdam has no fused
  path in torch <= 2.13);
* ``threads2``: shipped float32 with 2 threads (against the baseline at ``--threads``);
* ``compile``: shipped float32 with ``torch.compile`` of the online and target networks (forward,
  backward and inference; the compile time is printed, not counted);
* ``kept_memory_float32``, ``kept_memory_bfloat16``: shipped float32 and bfloat16 in a process of their own
  that keeps its freed memory for reuse (``performance.keep_freed_memory: true``, the learner's default);
  the baseline's process runs with the system allocator's defaults, as before issue 23;
* ``learner``: the update as the learner runs it, in that process: ``performance.precision: auto``
  and the learner's threads (``performance.torch_num_threads`` of the preset, 0: every core) against
  the baseline at ``--threads`` (before issue 23 the sim preset's learner ran 1 thread);
* ``act_bfloat16``: acting (``agent.act`` on ``envs_per_collector`` observations) in bfloat16
  against acting in float32 (actions/s of one forward pass per batch).

``--no-bare`` leaves out the second table: rulka's update against the bare loop (goal, issue 11:
>= 0.9 at CartPole size, >= 0.95 at the sim preset's size).
Goal (issue 23): at the sim preset's size, the update as the learner runs it (``learner``) >= 1.6x today's float32.
"""
from __future__ import annotations

import argparse
import functools
import os
import time
import warnings
from collections.abc import Callable

import numpy as np
import torch
from gymnasium import spaces

from agents.iqn_agent import IQNAgent
from agents.losses import quantile_huber_loss
from agents.networks.embedders import ImageEmbedder
from agents.networks.iqn_network import sample_symmetric_taus
from agents.precision import cpu_bf16_flags, resolve_precision
from rulka.core_types import RunPhase
from rulka.config import apply_overrides
from rulka.parameters import ExperimentConfig, MemoryParameters, NeuralNetworkParameters, TrainingParameters
from rulka.presets import load_graph_manager
from rulka.schedules import Schedule
from variant_process import VariantProcess, timed  # bench/, beside this script

CAPACITY = 20_000


def cartpole_agent() -> IQNAgent:
    config = ExperimentConfig(
        neural_network=NeuralNetworkParameters(vector_embedder_hidden_sizes=[64, 64], dense_hidden_dimension=64,
                                               dueling=False, iqn_embedding_dimension=64, iqn_n=8, iqn_k=8),
        training=TrainingParameters(batch_size=64, n_steps=3),
        memory=MemoryParameters(memory_size_schedule=Schedule([(0, (CAPACITY, 1_000))], "staircase"),
                                number_times_single_memory_is_used_before_discard=1e9),
    )
    space = spaces.Dict({"observation": spaces.Box(-np.inf, np.inf, (4,), np.float32)})
    return IQNAgent(config, space, spaces.Discrete(2), "cpu", seed=0)


def sim_agent() -> IQNAgent:
    from agents.trackmania_iqn_agent import TrackManiaIQNAgent
    from environments.trackmania.env import TrackManiaEnv

    config = apply_overrides(load_graph_manager("trackmania_iqn_sim").config, overrides=[
        f"memory.memory_size_schedule=[[0, [{CAPACITY}, 1000]]]", "memory.buffer_test_ratio=0",
        "memory.number_times_single_memory_is_used_before_discard=1000000000"])
    env = TrackManiaEnv(config.environment)
    return TrackManiaIQNAgent(config, env.observation_space, env.action_space, "cpu", seed=0)


def fill(agent: IQNAgent, steps: int) -> None:
    rng = np.random.default_rng(0)
    space = agent.observation_space
    def draw():
        return {k: (rng.integers(0, 255, s.shape, dtype=np.uint8) if s.dtype == np.uint8
                    else rng.normal(size=s.shape).astype(np.float32)) for k, s in space.spaces.items()}
    state = draw()
    for t in range(steps):
        nxt = draw()
        end = (t + 1) % 200 == 0
        agent.observe(state, int(rng.integers(agent.num_actions)), True, float(rng.normal()), nxt, end, False)
        state = draw() if end else nxt


def rulka_update(agent: IQNAgent) -> Callable[[], None]:
    """One update of rulka's path: the body of ``agent.train()`` without the replay-ratio gate."""
    def update() -> None:
        for group in agent.optimizer.param_groups:
            group["lr"] = agent.learning_rate()
        batch = agent.sample_batch()
        agent.learn_from_batch(batch)
        agent.counters.transitions_sampled += batch.size
        agent.update_target_network_if_due()
    return update


def bare_update(agent: IQNAgent) -> Callable[[], None]:
    """One update of the same maths without the framework: tensors sampled with torch.randint, loss,
    clip, step (on the agent's networks and optimizer)."""
    p, t = agent.config.neural_network, agent.config.training
    online, target, optimizer = agent.online_network, agent.target_network, agent.optimizer
    storage = getattr(agent.memory, "storage", agent.memory)  # (or a memory of the pre-composition code)
    n = storage.size if hasattr(storage, "cursor") else storage._size
    states = {k: torch.from_numpy(v[:n].copy()) for k, v in storage.states.items()}
    next_states = {k: torch.from_numpy(np.roll(v[:n], -1, axis=0)) for k, v in storage.states.items()}
    actions = torch.from_numpy(storage.actions[:n].copy())
    rewards = torch.from_numpy(storage.rewards[:n].copy())
    discounts = torch.where(torch.from_numpy(storage.terminated[:n].copy()), 0.0, 0.99)
    b, quantiles = t.batch_size, p.iqn_n

    def update() -> None:
        idx = torch.randint(0, n - 1, (b,))
        s = {k: v[idx] for k, v in states.items()}
        s2 = {k: v[idx] for k, v in next_states.items()}
        with torch.no_grad():
            target_taus = sample_symmetric_taus(b, quantiles)
            next_q = target(s2, target_taus)
            chooser = online(s2, sample_symmetric_taus(b, quantiles)) if p.use_ddqn else next_q
            best = chooser.mean(dim=1).argmax(dim=1)
            next_values = next_q.gather(2, best.view(b, 1, 1).expand(b, quantiles, 1)).squeeze(2)
            targets = rewards[idx].unsqueeze(1) + discounts[idx].unsqueeze(1) * next_values
        taus = sample_symmetric_taus(b, quantiles)
        predicted = online(s, taus).gather(2, actions[idx].view(b, 1, 1).expand(b, quantiles, 1)).squeeze(2)
        loss = quantile_huber_loss(predicted, targets, taus, p.iqn_kappa).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(online.parameters(), p.clip_grad_norm)
        torch.nn.utils.clip_grad_value_(online.parameters(), p.clip_grad_value)
        optimizer.step()
    return update


def rulka_rate(agent: IQNAgent, seconds: float) -> float:
    update = rulka_update(agent)
    for _ in range(5):  # warm-up
        update()
    done, elapsed = timed(update, seconds)
    return done / elapsed


def bare_rate(agent: IQNAgent, seconds: float) -> float:
    done, elapsed = timed(bare_update(agent), seconds)
    return done / elapsed


LEVERS = ("channels_last", "inplace", "shipped_float32", "bfloat16", "bfloat16_out_of_place", "for_loop", "threads2",
          "compile", "act_bfloat16", "kept_memory_float32", "kept_memory_bfloat16", "learner")
#: Levers measured in a process of their own, started with performance.keep_freed_memory's allocator.
#: Their precision, and whether they run with the learner's threads (else ``--threads``).
KEPT_MEMORY = {"kept_memory_float32": ("float32", False), "kept_memory_bfloat16": ("bfloat16", False),
               "learner": ("auto", True)}
DEFAULT_LEVERS = tuple(lever for lever in LEVERS if lever != "compile")


def configure(agent: IQNAgent, channels_last: bool, inplace: bool, precision: str, foreach: bool = True) -> None:
    """Set the update's levers on ``agent`` in place (both networks, the optimizer, the precision)."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    for network in (agent.online_network, agent.target_network):
        network.to(memory_format=fmt)
        for module in network.modules():
            if isinstance(module, ImageEmbedder):
                module.memory_format = fmt
            if isinstance(module, torch.nn.LeakyReLU):
                module.inplace = inplace
    for group in agent.optimizer.param_groups:
        group["foreach"] = foreach
    has_convolutions = any(isinstance(m, torch.nn.Conv2d) for m in agent.online_network.modules())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent.precision = resolve_precision(precision, agent.device, has_convolutions)


def variant(agent: IQNAgent, name: str, threads: int) -> Callable[[], None]:
    """Set ``agent`` up as variant ``name``; returns the undo (threads, compiled networks)."""
    undo: list[Callable[[], None]] = []
    shipped = dict(channels_last=True, inplace=True, precision="float32")
    if name == "today":
        configure(agent, False, False, "float32")
    elif name == "channels_last":
        configure(agent, True, False, "float32")
    elif name == "inplace":
        configure(agent, False, True, "float32")
    elif name in ("shipped_float32", "threads2", "compile"):
        configure(agent, **shipped)
    elif name == "bfloat16":
        configure(agent, True, True, "bfloat16")
    elif name == "bfloat16_out_of_place":
        configure(agent, True, False, "bfloat16")
    elif name == "for_loop":
        configure(agent, **shipped, foreach=False)
    if name == "threads2":
        torch.set_num_threads(2)
        undo.append(lambda: torch.set_num_threads(threads))
    if name == "compile":
        online, target = agent.online_network, agent.target_network
        agent.online_network, agent.target_network = COMPILED[id(agent)]
        undo.append(lambda: (setattr(agent, "online_network", online), setattr(agent, "target_network", target)))
    return lambda: [u() for u in undo]


COMPILED: dict[int, tuple] = {}


def compile_networks(agent: IQNAgent, update: Callable[[], None]) -> float:
    """torch.compile both networks (kept in COMPILED) and warm them up; the compile time, s."""
    configure(agent, channels_last=True, inplace=True, precision="float32")
    start = time.perf_counter()
    COMPILED[id(agent)] = (torch.compile(agent.online_network), torch.compile(agent.target_network))
    undo = variant(agent, "compile", torch.get_num_threads())
    for _ in range(3):
        update()
    undo()
    return time.perf_counter() - start


def act_rate(agent: IQNAgent, precision: str, envs: int, seconds: float) -> float:
    """actions/s of ``agent.act`` on batches of ``envs`` observations, acting in ``precision``."""
    configure(agent, True, True, "float32")
    if precision == "bfloat16":
        p = agent.precision
        agent.precision = type(p)(p.setting, p.device_type, p.dtype, torch.bfloat16, "bench")
    rng = np.random.default_rng(1)
    observation = {k: (rng.integers(0, 255, (envs, *s.shape), dtype=np.uint8) if s.dtype == np.uint8
                       else rng.normal(size=(envs, *s.shape)).astype(np.float32))
                   for k, s in agent.observation_space.spaces.items()}
    def act() -> None:
        agent.act(observation, RunPhase.TRAIN)
    for _ in range(5):
        act()
    done, elapsed = timed(act, seconds)
    return done * envs / elapsed


def kept_memory_variants(size: str, levers: tuple[str, ...]) -> tuple[dict[str, Callable[[], None]], str]:
    """The ``kept_memory_*`` levers, built in a process that keeps its freed memory (as the learner does
    with ``performance.keep_freed_memory: true``): the shipped float32 / bfloat16 update there."""
    agent = cartpole_agent() if size == "cartpole" else sim_agent()
    fill(agent, 3_000)
    update = rulka_update(agent)
    current: list[str] = [""]
    threads = {False: torch.get_num_threads(), True: agent.config.performance.torch_num_threads or os.cpu_count()}

    def as_lever(lever: str) -> Callable[[], None]:
        def run() -> None:
            if current[0] != lever:
                precision, learner_threads = KEPT_MEMORY[lever]
                configure(agent, True, True, precision)
                torch.set_num_threads(threads[learner_threads])
                current[0] = lever
            update()
        return run

    return {lever: as_lever(lever) for lever in levers}, ""


def spread(values: list[float], digits: int) -> str:
    return f"{np.mean(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def lever_table(size: str, agent: IQNAgent, levers: list[str], seconds: float, rounds: int, threads: int) -> None:
    update = rulka_update(agent)
    if "compile" in levers:
        print(f"{size}: torch.compile of both networks took {compile_networks(agent, update):.0f} s "
              "(compile and warm-up, not counted)", flush=True)
    update_levers = [lever for lever in levers if lever != "act_bfloat16" and lever not in KEPT_MEMORY]
    kept_levers = tuple(lever for lever in levers if lever in KEPT_MEMORY)
    kept = VariantProcess(functools.partial(kept_memory_variants, size, kept_levers), True, threads) if kept_levers else None
    rates: dict[str, list[float]] = {name: [] for name in ["today", *update_levers, *kept_levers]}
    acts: dict[str, list[float]] = {"float32": [], "bfloat16": []}
    envs = agent.config.performance.envs_per_collector
    for _ in range(rounds):
        for name in ["today", *update_levers]:
            undo = variant(agent, name, threads)
            rates[name].append(rulka_rate(agent, seconds))
            undo()
        for name in kept_levers:
            rates[name].append(kept.rate(name, seconds, warmup=5))
        if "act_bfloat16" in levers:
            for precision in acts:
                acts[precision].append(act_rate(agent, precision, envs, seconds / 2))
    if kept is not None:
        kept.close()
    digits = 0 if np.mean(rates["today"]) > 100 else 1
    for name, values in rates.items():
        ratios = [v / b for v, b in zip(values, rates["today"])]
        print(f"| {size} | {name} | {spread(values, digits)} | {np.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}] |",
              flush=True)
    if acts["float32"]:
        ratios = [b / f for b, f in zip(acts["bfloat16"], acts["float32"])]
        print(f"| {size} | acting on {envs} observation(s): float32 {spread(acts['float32'], 0)} actions/s, "
              f"bfloat16 {spread(acts['bfloat16'], 0)} | | {np.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}] |",
              flush=True)
    configure(agent, True, True, agent.config.performance.precision)  # as shipped again


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4.0, help="measuring time per variant and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (each variant once per round)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the baseline")
    parser.add_argument("--sizes", default="cartpole,sim")
    parser.add_argument("--levers", default=",".join(DEFAULT_LEVERS), help=f"some of {','.join(LEVERS)}")
    parser.add_argument("--no-bare", action="store_true", help="leave out rulka against the bare PyTorch loop")
    args = parser.parse_args()
    levers = [lever for lever in args.levers.split(",") if lever]
    unknown = set(levers) - set(LEVERS)
    if unknown:
        parser.error(f"unknown levers {sorted(unknown)}; choose from {', '.join(LEVERS)}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, bf16 units: "
          f"{', '.join(cpu_bf16_flags()) or 'none'}; {args.threads} thread(s), {args.rounds} alternating rounds of "
          f"{args.seconds:g} s per variant")
    agents = {size: (cartpole_agent() if size == "cartpole" else sim_agent()) for size in args.sizes.split(",")}
    for size, agent in agents.items():
        fill(agent, 3_000)
        params = sum(q.numel() for q in agent.online_network.parameters())
        print(f"{size}: {params:,} parameters; performance.precision auto means: {agent.precision.describe()}")
    print("| size | variant | updates/s | ratio to today (per round: median [min-max]) |")
    print("|---|---|---|---|")
    for size, agent in agents.items():
        lever_table(size, agent, levers, args.seconds, args.rounds, args.threads)
    if args.no_bare:
        return
    print("| size | parameters | rulka updates/s | bare updates/s | rulka / bare |")
    print("|---|---|---|---|---|")
    for size, agent in agents.items():
        params = sum(q.numel() for q in agent.online_network.parameters())
        # alternate the two paths (twice each) so that a change of machine load hits both
        rates = {"rulka": [], "bare": []}
        for _ in range(2):
            rates["rulka"].append(rulka_rate(agent, args.seconds / 2))
            rates["bare"].append(bare_rate(agent, args.seconds / 2))
        r, b = np.mean(rates["rulka"]), np.mean(rates["bare"])
        print(f"| {size} | {params:,} | {r:.0f} | {b:.0f} | {r / b:.2f} |", flush=True)


if __name__ == "__main__":
    main()
