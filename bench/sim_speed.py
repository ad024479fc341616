"""Benchmark: simulator actions per second (physics + render, one core, 120x160 first person) against
gymnasium's CarRacing-v3 steps per second.

Run:  .venv/bin/python bench/sim_speed.py [--seconds S] [--track NAME]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _pin_one_core() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        except OSError:
            pass


def bench_sim(seconds: float, track: str) -> tuple[float, float]:
    """(actions/s with rendering, actions/s physics only) through the full gymnasium env."""
    import numpy as np

    from environments.trackmania.env import TrackManiaEnv

    rates = []
    for render in (True, False):
        env = TrackManiaEnv(track=track, backend_options={"render": render})
        rng = np.random.default_rng(0)
        env.reset(seed=0)
        # a mostly-forward policy, so the car covers the track instead of idling at the start
        actions = rng.choice([0, 1, 2, 0, 0, 3, 6, 9], size=100_000)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            _, _, terminated, truncated, _ = env.step(int(actions[n % len(actions)]))
            n += 1
            if terminated or truncated:
                env.reset()
        rates.append(n / (time.perf_counter() - t0))
        env.close()
    return rates[0], rates[1]


def bench_car_racing(seconds: float) -> float | None:
    """CarRacing-v3 steps/s, or None when gymnasium[box2d] is not installed."""
    import gymnasium as gym
    import numpy as np

    try:
        env = gym.make("CarRacing-v3", continuous=False)
        env.reset(seed=0)
    except Exception as exc:  # box2d / pygame missing
        print(f"CarRacing-v3 unavailable ({type(exc).__name__}: {exc}); "
              'install it with: .venv/bin/pip install "gymnasium[box2d]"')
        return None
    rng = np.random.default_rng(0)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, _, terminated, truncated, _ = env.step(int(rng.integers(5)))
        n += 1
        if terminated or truncated:
            env.reset()
    env.close()
    return n / (time.perf_counter() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measuring time per benchmark")
    parser.add_argument("--track", default="short")
    args = parser.parse_args()
    _pin_one_core()
    with_render, physics_only = bench_sim(args.seconds, args.track)
    print(f"rulka TrackManiaSim ({args.track}, 120x160 first person, physics + render): {with_render:8.0f} actions/s")
    print(f"rulka TrackManiaSim ({args.track}, physics only, no frames):               {physics_only:8.0f} actions/s")
    car_racing = bench_car_racing(args.seconds)
    if car_racing is None:
        print("CarRacing-v3: not measured (gymnasium[box2d] not installed); ratio unavailable")
    else:
        print(f"gymnasium CarRacing-v3 (96x96 RGB, box2d):                          {car_racing:8.0f} steps/s")
        print(f"ratio TrackManiaSim / CarRacing-v3: {with_render / car_racing:6.1f}x")
    print("goal: >= 2000 actions/s per core and >= 10x CarRacing-v3")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
