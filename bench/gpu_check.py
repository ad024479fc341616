"""GPU check: learner updates/s at batch 512 with the full 160 x 120 network, and batched inference latency.

Prints, on a machine with an NVIDIA GPU (under 5 minutes):
* learner updates/s of ``trackmania_iqn_uni``'s agent (the configuration guide's network, 120 x 160
  frames, batch 512) in fp32 and with bf16 autocast, each without and with ``torch.compile``;
* inference latency (ms per forward pass, K = 32 quantiles) for k = 1, 8 and 32 observations.
Published figure to compare with: Linesight's learner takes ~18 ms per batch of 512 on an RTX 4070 Ti.

Run:  bash bench/gpu_check.sh     (or .venv/bin/python bench/gpu_check.py [--updates 60])
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build_agent(device: torch.device):
    from agents.trackmania_iqn_agent import TrackManiaIQNAgent
    from environments.trackmania.env import trackmania_spaces
    from rulka.presets import load_graph_manager

    config = load_graph_manager("trackmania_iqn_uni").config
    config.memory.buffer_test_ratio = 0.0
    observation_space, action_space = trackmania_spaces(config.environment)
    agent = TrackManiaIQNAgent(config, observation_space, action_space, device, seed=0)
    rng = np.random.default_rng(0)
    frame_shape = observation_space["frame"].shape
    floats = observation_space["floats"].shape[0]

    def observation():
        return {"frame": rng.integers(0, 255, frame_shape, dtype=np.uint8),
                "floats": rng.normal(size=floats).astype(np.float32)}

    state = observation()
    for t in range(3_000):  # a few synthetic races, enough to sample batches of 512
        next_state = observation()
        end = t % 300 == 299
        agent.observe(state, int(rng.integers(12)), True, float(rng.normal()), next_state, False, end)
        state = next_state
    return agent, observation


def time_updates(agent, n: int, autocast: bool) -> float:
    device = agent.device
    batches = [agent.sample_batch() for _ in range(4)]
    context = torch.autocast(device.type, dtype=torch.bfloat16) if autocast else torch.autocast(device.type, enabled=False)
    with context:
        for i in range(5):
            agent.learn_from_batch(batches[i % 4])
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        for i in range(n):
            agent.learn_from_batch(batches[i % 4])
        torch.cuda.synchronize(device)
    return n / (time.perf_counter() - start)


def time_inference(agent, observation, k: int, repeats: int = 50) -> float:
    batch = {key: np.stack([observation()[key] for _ in range(k)]) for key in ("frame", "floats")}
    from rulka.core_types import RunPhase

    for _ in range(5):
        agent.act(batch, RunPhase.EVALUATE)
    torch.cuda.synchronize(agent.device)
    start = time.perf_counter()
    for _ in range(repeats):
        agent.act(batch, RunPhase.EVALUATE)
    torch.cuda.synchronize(agent.device)
    return (time.perf_counter() - start) / repeats * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=60, help="timed updates per row (default 60)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_check: torch sees no CUDA device (install a CUDA build of torch on a machine with an NVIDIA GPU)")
    device = torch.device("cuda")
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    agent, observation = build_agent(device)
    params = sum(p.numel() for p in agent.online_network.parameters())
    print(f"network: {params:,} parameters, frames {tuple(agent.observation_space['frame'].shape)}, batch "
          f"{agent.config.training.batch_size}")
    print(f"{'learner':<34} {'updates/s':>10} {'ms/batch':>9}")
    eager = agent.online_network
    for compiled in (False, True):
        if compiled:
            try:
                agent.online_network = torch.compile(eager)
            except Exception as error:  # noqa: BLE001 - report and go on
                print(f"torch.compile unavailable: {error}")
                break
        for autocast in (False, True):
            name = f"{'bf16 autocast' if autocast else 'fp32'}{', torch.compile' if compiled else ''}"
            try:
                rate = time_updates(agent, args.updates, autocast)
                print(f"{name:<34} {rate:>10.1f} {1000 / rate:>9.1f}", flush=True)
            except Exception as error:  # noqa: BLE001
                print(f"{name:<34} failed: {type(error).__name__}: {error}"[:300], flush=True)
    agent.online_network = eager
    print(f"{'inference (K = ' + str(agent.config.neural_network.iqn_k) + ')':<34} {'ms/pass':>10}")
    for k in (1, 8, 32):
        print(f"{'k = ' + str(k):<34} {time_inference(agent, observation, k):>10.2f}", flush=True)
    print("Linesight (published): ~18 ms per batch of 512 on an RTX 4070 Ti")


if __name__ == "__main__":
    main()
