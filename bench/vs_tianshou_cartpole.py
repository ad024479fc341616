"""CartPole-v1: environment steps and wall time to an evaluation average of 475, rulka against Tianshou's IQN.

    /work/bench_venv/bin/python bench/vs_tianshou_cartpole.py [--seeds 0,1,2,3,4] [--max-steps 100000]
        [--contenders rulka,tianshou,tianshou-g99]

Needs Tianshou (bench/requirements.txt, installed as bench/README.md says).

Contenders:

* ``rulka``: the ``cartpole_iqn`` preset as it ships (``graph_manager.improve`` with
  ``stop_at_evaluation``, as ``bench/golden_presets.py`` runs it);
* ``tianshou``: Tianshou's IQN with the settings of its own test (``test/discrete/test_iqn.py`` of
  Tianshou 2.0.1: 10 training envs, a ``VectorReplayBuffer`` of 20,000, 64-64-64 features, 64 cosines,
  N = N' = 8, 32 quantiles to act, Adam at lr 3e-3, gamma 0.9, 3-step returns, a target copy every 320
  updates, batch 64, 10 env steps per collection and 0.1 update per env step, epsilon 0.1 annealed to
  0.01 between 10k and 50k steps, 640 steps collected before training) run by its own
  ``OffPolicyTrainer``;
* ``tianshou-g99``: the same with gamma 0.99 (rulka's preset's gamma).

Both are evaluated the same way: every 2,500 environment steps (Tianshou: an epoch of 2,500 steps;
its trainer also tests once before training), 10 greedy episodes (epsilon 0; Tianshou's test used 100
episodes at epsilon 0.05 and a check on training returns, ``test_in_training``, which is switched off
here), and a run stops at the first evaluation whose average return is at least 475, or at
``--max-steps``. Environment steps count training steps only (Tianshou's 640 initial steps
included). Wall time runs from building the run to its stop, evaluations included; the time spent
evaluating is also given. torch runs on ``--threads`` threads for every contender; ``--jobs`` runs
go at once, each in a fresh process, taken in the order seed by seed, contender by contender.
"""
from __future__ import annotations

import argparse
import multiprocessing
import platform
import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch

THRESHOLD = 475.0
EVAL_EVERY = 2_500
EVAL_EPISODES = 10


@dataclass
class Outcome:
    reached: bool
    env_steps: int
    wall_s: float
    eval_s: float
    gradient_updates: int


def run_rulka(seed: int, max_steps: int) -> Outcome:
    from rulka.presets import load_graph_manager

    start = time.perf_counter()
    graph_manager = load_graph_manager("cartpole_iqn")
    training = graph_manager.config.training
    assert training.evaluate_every_n_env_steps == EVAL_EVERY and training.evaluation_episodes == EVAL_EPISODES
    assert graph_manager.config.exploration.evaluation_epsilon == 0.0
    graph_manager.create(None, "cpu", seed=seed)
    torch.set_num_threads(THREADS)  # (create may set the global seed, not the threads; make sure)
    spent = [0.0]
    evaluate = graph_manager.evaluate

    def timed_evaluate(*args, **kwargs) -> float:  # noqa: ANN002, ANN003
        t0 = time.perf_counter()
        try:
            return evaluate(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t0

    graph_manager.evaluate = timed_evaluate
    summary = graph_manager.improve(max_steps, stop_at_evaluation=THRESHOLD, show_progress=False)
    graph_manager.close()
    return Outcome(summary.reached_threshold, summary.env_steps, time.perf_counter() - start, spent[0],
                   summary.gradient_updates)


def run_tianshou(seed: int, max_steps: int, gamma: float) -> Outcome:
    import gymnasium as gym
    from tianshou.algorithm import IQN
    from tianshou.algorithm.modelfree.iqn import IQNPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Collector, CollectStats, VectorReplayBuffer
    from tianshou.env import DummyVectorEnv
    from tianshou.trainer import OffPolicyTrainerParams
    from tianshou.utils.net.common import Net
    from tianshou.utils.net.discrete import ImplicitQuantileNetwork
    from tianshou.utils.torch_utils import policy_within_training_step

    # test/discrete/test_iqn.py's defaults
    eps_train, buffer_size, lr, n_step, target_update_freq = 0.1, 20_000, 3e-3, 3, 320
    collection_steps, update_per_step, batch_size, hidden_sizes, num_envs = 10, 0.1, 64, [64, 64, 64], 10

    start = time.perf_counter()
    env = gym.make("CartPole-v1")
    training_envs = DummyVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(num_envs)])
    test_envs = DummyVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(EVAL_EPISODES)])
    np.random.seed(seed)
    torch.manual_seed(seed)
    training_envs.seed(seed)
    test_envs.seed(seed)
    feature_net = Net(state_shape=env.observation_space.shape, action_shape=hidden_sizes[-1],
                      hidden_sizes=hidden_sizes[:-1], softmax=False)
    net = ImplicitQuantileNetwork(preprocess_net=feature_net, action_shape=env.action_space.n, num_cosines=64)
    policy = IQNPolicy(model=net, action_space=env.action_space, sample_size=32, online_sample_size=8,
                       target_sample_size=8, eps_training=eps_train, eps_inference=0.0)
    algorithm = IQN(policy=policy, optim=AdamOptimizerFactory(lr=lr), gamma=gamma, n_step_return_horizon=n_step,
                    target_update_freq=target_update_freq)
    buffer = VectorReplayBuffer(buffer_size, buffer_num=num_envs)
    training_collector = Collector[CollectStats](algorithm, training_envs, buffer, exploration_noise=True)
    test_collector = Collector[CollectStats](algorithm, test_envs, exploration_noise=True)
    with policy_within_training_step(policy):
        training_collector.reset()
        initial = training_collector.collect(n_step=batch_size * num_envs).n_collected_steps

    spent = [0.0]
    collect = test_collector.collect

    def timed_collect(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        t0 = time.perf_counter()
        try:
            return collect(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t0

    test_collector.collect = timed_collect

    def training_fn(epoch: int, env_step: int) -> None:  # the test's epsilon annealing
        if env_step <= 10_000:
            policy.set_eps_training(eps_train)
        elif env_step <= 50_000:
            policy.set_eps_training(eps_train - (env_step - 10_000) / 40_000 * (0.9 * eps_train))
        else:
            policy.set_eps_training(0.1 * eps_train)

    epochs = (max_steps - initial) // EVAL_EVERY  # its last check at most max_steps
    result = algorithm.run_training(OffPolicyTrainerParams(
        training_collector=training_collector, test_collector=test_collector, max_epochs=epochs,
        epoch_num_steps=EVAL_EVERY, collection_step_num_env_steps=collection_steps,
        test_step_num_episodes=EVAL_EPISODES, batch_size=batch_size, training_fn=training_fn,
        stop_fn=lambda mean_return: mean_return >= THRESHOLD, logger=None,
        update_step_num_gradient_steps_per_sample=update_per_step, test_in_training=False,
        verbose=False, show_progress=False,
    ))
    reached = result.best_score >= THRESHOLD
    return Outcome(reached, initial + result.train_step, time.perf_counter() - start, spent[0], algorithm._iter)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


THREADS = 1
RUNNERS = {"rulka": run_rulka, "tianshou": lambda s, m: run_tianshou(s, m, 0.9),
           "tianshou-g99": lambda s, m: run_tianshou(s, m, 0.99)}


def run_job(job: tuple[str, int, int, int]) -> tuple[str, int, Outcome]:
    """One (contender, seed) run in a fresh worker process."""
    global THREADS
    name, seed, max_steps, THREADS = job
    torch.set_num_threads(THREADS)
    return name, seed, RUNNERS[name](seed, max_steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--max-steps", type=int, default=100_000, help="environment steps at most per run")
    parser.add_argument("--contenders", default="rulka,tianshou,tianshou-g99")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, for every contender")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time, each in its own process")
    args = parser.parse_args()
    import tianshou
    seeds = [int(s) for s in args.seeds.split(",")]
    names = args.contenders.split(",")
    unknown = [n for n in names if n not in RUNNERS]
    if unknown:
        parser.error(f"unknown contender(s) {unknown}: choose from {', '.join(RUNNERS)}")
    print(f"torch {torch.__version__}, tianshou {tianshou.__version__}, python {platform.python_version()}, "
          f"{args.threads} torch thread(s), {args.jobs} run(s) at a time; threshold {THRESHOLD:g}, {EVAL_EPISODES} greedy episodes every "
          f"{EVAL_EVERY} env steps, at most {args.max_steps} env steps", flush=True)
    # contenders in turn for each seed, so that a change of machine load hits all of them
    jobs = [(name, seed, args.max_steps, args.threads) for seed in seeds for name in names]
    results: dict[tuple[str, int], Outcome] = {}
    with multiprocessing.get_context("spawn").Pool(args.jobs, maxtasksperchild=1) as pool:
        for name, seed, o in pool.imap_unordered(run_job, jobs):
            results[name, seed] = o
            print(f"  {name} seed {seed}: {'reached' if o.reached else 'MISSED'} after {o.env_steps} env steps, "
                  f"{o.gradient_updates} updates, {o.wall_s:.1f} s wall ({o.eval_s:.1f} s evaluating)", flush=True)
    outcomes = {name: [results[name, seed] for seed in seeds] for name in names}
    print()
    print("| contender | seeds reaching 475 | within 50k steps | env steps to 475 per seed | median env steps |"
          " wall s per seed | median wall s | median s evaluating |")
    print("|---|---|---|---|---|---|---|---|")
    for name, runs in outcomes.items():
        reached = [o for o in runs if o.reached]
        steps = ", ".join(f"{o.env_steps}" if o.reached else f">{o.env_steps}" for o in runs)
        walls = ", ".join(f"{o.wall_s:.0f}" for o in runs)
        print(f"| {name} | {len(reached)}/{len(runs)} | {sum(o.env_steps <= 50_000 for o in reached)}/{len(runs)} | "
              f"{steps} | {median([o.env_steps for o in reached]):.0f} | {walls} | "
              f"{median([o.wall_s for o in reached]):.0f} | {median([o.eval_s for o in reached]):.0f} |")
    print(f"finished {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
