"""Learner updates/s: rulka's IQN update against Tianshou's IQN update and a bare PyTorch loop.

    /work/bench_venv/bin/python bench/vs_tianshou_updates.py [--seconds 30] [--sizes cartpole,compute,sim]

Needs Tianshou (bench/requirements.txt, installed as bench/README.md says); rulka's own tests never do.

Sizes (observation: 4 floats, 2 actions, as CartPole-v1):

* ``cartpole``: MLP 64-64, a 64-unit quantile head, 64 cosines, batch 64, N = N' = 8 (12,930 parameters);
* ``compute``: MLP 256-256, a 256-unit head, 64 cosines, batch 512, N = N' = 32 (150,018 parameters);
* ``sim``: the ``trackmania_iqn_sim`` network and mini-race replay (rulka and bare only: Tianshou has
  no such network).

Every contender does the same maths per update: sample a batch of 3-step transitions, targets
``R + gamma^n * Z_target(s', a*, tau')`` with ``a*`` the argmax of the online network's quantile mean
(Tianshou's only rule, ``use_ddqn`` in rulka), quantile Huber loss with kappa = 1 (Tianshou's
``smooth_l1_loss``), gradient-norm clip at 10, RAdam step; a full target copy every 320 updates.

* rulka: ``IQNAgent``: the memory samples and assembles a ``TransitionBatch`` (n-step returns at sampling
  time), the agent computes the loss, steps, updates priorities (a no-op: uniform memory), checks the
  target schedule; it also clips each gradient value at 1000 (a no-op here, but it costs a pass).
* tianshou: ``IQN.update(buffer, batch_size)`` on a ``ReplayBuffer``: its sampling, n-step returns,
  target and loss; ``TorchOptimizerFactory(torch.optim.RAdam)`` and Tianshou's own norm clipping.
  Its network is Tianshou's ``ImplicitQuantileNetwork`` over ``Net`` with the same layer sizes (ReLU
  where rulka uses LeakyReLU; uniform taus where rulka stratifies them).
* tianshou, foreach RAdam: the same with ``foreach=True`` passed to RAdam, the implementation rulka's
  agent uses (torch's CPU default is the per-tensor loop that Tianshou's factory gets), to show how
  much of a difference is the optimizer's implementation.
* bare: the rulka agent's own networks and optimizer driven by a plain loop on preallocated tensors
  (one-step transitions stored whole, indices from ``torch.randint``): the cost of the maths alone.

The replays hold 3,000 random transitions (episodes of 200 steps). The contenders run in turns
(``--rounds`` turns of ``--seconds / --rounds`` each) so that a change of machine load hits all of
them; a rate is all updates over all time. torch runs on ``--threads`` threads for all contenders.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from update_speed import CAPACITY, bare_update, fill, rulka_update, sim_agent, timed  # noqa: E402

from agents.iqn_agent import IQNAgent  # noqa: E402
from rulka.parameters import (ExperimentConfig, MemoryParameters, NeuralNetworkParameters,  # noqa: E402
                              TrainingParameters)
from rulka.schedules import Schedule  # noqa: E402

#: name: (width of every hidden layer, batch size, quantiles N = N')
SIZES = {"cartpole": (64, 64, 8), "compute": (256, 512, 32)}
COSINES = 64
N_STEPS = 3
GAMMA = 0.99
LR = 1e-3
ADAM_EPSILON = 1e-8
CLIP_GRAD_NORM = 10.0
TARGET_EVERY_UPDATES = 320  # Tianshou's test_iqn.py target_update_freq
FILL_STEPS = 3_000
EPISODE_LENGTH = 200


def rulka_agent(width: int, batch: int, quantiles: int) -> IQNAgent:
    from gymnasium import spaces
    config = ExperimentConfig(
        neural_network=NeuralNetworkParameters(
            vector_embedder_hidden_sizes=[width, width], dense_hidden_dimension=width, dueling=False,
            iqn_embedding_dimension=COSINES, iqn_n=quantiles, iqn_k=quantiles, iqn_kappa=1.0, use_ddqn=True,
            clip_grad_norm=CLIP_GRAD_NORM, soft_update_tau=1.0,
            number_memories_trained_on_between_target_network_updates=TARGET_EVERY_UPDATES * batch),
        training=TrainingParameters(batch_size=batch, n_steps=N_STEPS, lr_schedule=Schedule([(0, LR)], "staircase"),
                                    gamma_schedule=Schedule([(0, GAMMA)], "staircase"), adam_epsilon=ADAM_EPSILON),
        memory=MemoryParameters(memory_size_schedule=Schedule([(0, (CAPACITY, 1_000))], "staircase"),
                                number_times_single_memory_is_used_before_discard=1e9),
    )
    space = spaces.Dict({"observation": spaces.Box(-np.inf, np.inf, (4,), np.float32)})
    return IQNAgent(config, space, spaces.Discrete(2), "cpu", seed=0)


def tianshou_update(width: int, batch: int, quantiles: int, foreach: bool | None = None
                    ) -> tuple[Callable[[], None], int]:
    """One ``IQN.update`` of Tianshou, and the parameter count of its network. ``foreach``: RAdam's
    implementation flag (None: torch's default, the per-tensor loop on a CPU)."""
    from tianshou.algorithm import IQN
    from tianshou.algorithm.modelfree.iqn import IQNPolicy
    from tianshou.algorithm.optim import TorchOptimizerFactory
    from tianshou.data import Batch, ReplayBuffer
    from tianshou.utils.net.common import Net
    from tianshou.utils.net.discrete import ImplicitQuantileNetwork
    from tianshou.utils.torch_utils import policy_within_training_step

    class ClippedIQN(IQN):
        """Tianshou's IQN with its optimizer wrapper's gradient-norm clipping switched on."""

        def _create_policy_optimizer(self, optim):  # noqa: ANN001, ANN202
            return self._create_optimizer(self.policy, optim, max_grad_norm=CLIP_GRAD_NORM)

    action_space = gym.spaces.Discrete(2)
    features = Net(state_shape=4, hidden_sizes=[width, width])
    net = ImplicitQuantileNetwork(preprocess_net=features, action_shape=2, hidden_sizes=[width], num_cosines=COSINES)
    policy = IQNPolicy(model=net, action_space=action_space, sample_size=quantiles, online_sample_size=quantiles,
                       target_sample_size=quantiles)
    algorithm = ClippedIQN(policy=policy, optim=TorchOptimizerFactory(torch.optim.RAdam, lr=LR, eps=ADAM_EPSILON,
                                                                          foreach=foreach),
                           gamma=GAMMA, n_step_return_horizon=N_STEPS, target_update_freq=TARGET_EVERY_UPDATES)
    buffer = ReplayBuffer(CAPACITY)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=4).astype(np.float32)
    for t in range(FILL_STEPS):
        nxt = rng.normal(size=4).astype(np.float32)
        end = (t + 1) % EPISODE_LENGTH == 0
        buffer.add(Batch(obs=obs, act=int(rng.integers(2)), rew=float(rng.normal()), terminated=end, truncated=False,
                         obs_next=nxt, info={}))
        obs = rng.normal(size=4).astype(np.float32) if end else nxt

    def update() -> None:
        with policy_within_training_step(policy):
            algorithm.update(buffer, batch)

    return update, sum(p.numel() for p in net.parameters())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="measuring time per contender and size")
    parser.add_argument("--rounds", type=int, default=3, help="turns per contender (the time is split)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, for every contender")
    parser.add_argument("--sizes", default="cartpole,compute,sim")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    import tianshou
    print(f"torch {torch.__version__}, tianshou {tianshou.__version__}, python {platform.python_version()}, "
          f"{args.threads} torch thread(s), {args.seconds:g} s per contender and size in {args.rounds} turns")
    print("| size | rulka updates/s | Tianshou updates/s | Tianshou, foreach RAdam | bare updates/s |"
          " rulka / Tianshou | rulka / Tianshou foreach | rulka / bare (range over turns) |"
          " parameters (rulka, Tianshou) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        if size == "sim":
            agent = sim_agent()
        elif size in SIZES:
            agent = rulka_agent(*SIZES[size])
        else:
            parser.error(f"unknown size {size!r}: choose from {', '.join([*SIZES, 'sim'])}")
        fill(agent, FILL_STEPS)
        contenders = {"rulka": rulka_update(agent), "bare": bare_update(agent)}
        params = {"rulka": sum(q.numel() for q in agent.online_network.parameters())}
        if size in SIZES:
            contenders["tianshou"], params["tianshou"] = tianshou_update(*SIZES[size])
            contenders["tianshou_foreach"], _ = tianshou_update(*SIZES[size], foreach=True)
        for update in contenders.values():  # warm-up
            for _ in range(5):
                update()
        totals = {name: [0, 0.0] for name in contenders}
        turn_ratios = []  # rulka / bare in each turn: the spread says how much the machine's noise moves it
        for _ in range(args.rounds):
            turn = {}
            for name, update in contenders.items():
                done, elapsed = timed(update, args.seconds / args.rounds)
                totals[name][0] += done
                totals[name][1] += elapsed
                turn[name] = done / elapsed
            turn_ratios.append(turn["rulka"] / turn["bare"])
        rate = {name: done / elapsed for name, (done, elapsed) in totals.items()}
        fmt = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
        t, tf = rate.get("tianshou"), rate.get("tianshou_foreach")
        r3 = lambda x: "-" if x is None else (f"{x:.0f}" if x >= 100 else f"{x:.3g}")  # noqa: E731
        cells = [size, r3(rate["rulka"]), r3(t), r3(tf), r3(rate["bare"]),
                 fmt(rate["rulka"] / t if t else None, ".2f"), fmt(rate["rulka"] / tf if tf else None, ".2f"),
                 f"{rate['rulka'] / rate['bare']:.2f} ({min(turn_ratios):.2f}-{max(turn_ratios):.2f})",
                 f"{params['rulka']:,}, {fmt(params.get('tianshou'), ',')}"]
        print("| " + " | ".join(cells) + " |", flush=True)
    print(f"finished {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
