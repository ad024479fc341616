"""How lean is an update? rulka's sample + update path against a bare PyTorch loop doing the same maths.

    python bench/update_speed.py [--seconds 10] [--threads 1]

Two sizes: CartPole (MLP 64-64, batch 64, N = N' = 8, 3-step returns) and the ``trackmania_iqn_sim``
network (48 x 64 frame + 184 floats, batch 64, mini-race replay). For each, the replay is filled
with random transitions, then updates run for ``--seconds``:

* rulka: the body of ``agent.train()`` (the replay-ratio gate left out): the memory samples and assembles a
  :class:`TransitionBatch`, the agent computes the loss, steps the optimizer, updates priorities
  (a no-op for the uniform memory used here) and checks the target-network schedule;
* bare: the same network, optimizer and loss (IQN targets from the target network, the bootstrap
  action chosen by the online network when ``use_ddqn``, quantile Huber, clip, RAdam step) on batches gathered from preallocated torch tensors with ``torch.randint``
  (one-step transitions stored whole: no n-step or mini-race assembly).

Prints updates/s of each and the ratio rulka / bare (goal, issue 11: >= 0.9 at CartPole size,
>= 0.95 at the sim preset's size).
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch
from gymnasium import spaces

from agents.iqn_agent import IQNAgent
from agents.losses import quantile_huber_loss
from agents.networks.iqn_network import sample_symmetric_taus
from rulka.config import apply_overrides
from rulka.parameters import ExperimentConfig, MemoryParameters, NeuralNetworkParameters, TrainingParameters
from rulka.presets import load_graph_manager
from rulka.schedules import Schedule

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


def timed(update: Callable[[], None], seconds: float) -> tuple[int, float]:
    """Run ``update`` for about ``seconds``: (updates done, seconds taken)."""
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        update()
        done += 1
    return done, time.perf_counter() - start


def rulka_rate(agent: IQNAgent, seconds: float) -> float:
    update = rulka_update(agent)
    for _ in range(5):  # warm-up
        update()
    done, elapsed = timed(update, seconds)
    return done / elapsed


def bare_rate(agent: IQNAgent, seconds: float) -> float:
    done, elapsed = timed(bare_update(agent), seconds)
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="measuring time per path and size")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--sizes", default="cartpole,sim")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.seconds:g} s per measurement")
    print("| size | parameters | rulka updates/s | bare updates/s | rulka / bare |")
    print("|---|---|---|---|---|")
    for size in args.sizes.split(","):
        agent = cartpole_agent() if size == "cartpole" else sim_agent()
        fill(agent, 3_000)
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
