"""rulka's learner against Linesight's own learner, on the CPU, at the same shapes and threads.

    python bench/vs_linesight_learner.py LINESIGHT_CHECKOUT [--seconds 20] [--rounds 3] [--threads 2]
                                         [--shapes linesight,sim]

LINESIGHT_CHECKOUT is a checkout of https://github.com/Linesight-RL/linesight (nothing of it is
copied into rulka): ``git clone https://github.com/Linesight-RL/linesight /tmp/linesight``. Only its
``trackmania_rl/`` and ``config_files/`` are read. Its ``trackmania_rl/agents/iqn.py`` is imported as
it is; its ``IQN_Network`` and ``Trainer.train_on_batch`` then run unchanged but for the ``torch``
they see: the module's name ``torch`` is rebound to torch with three names replaced, so that what
it puts on ``"cuda"`` stays on the CPU (``torch.arange`` / ``torch.rand(device="cuda")``,
``torch.tensor(...).to("cuda")``) and its float16 autocast (``torch.amp.autocast``) becomes a CPU
autocast that is off (``linesight float32``) or bfloat16 (``linesight bfloat16``, only on a CPU
with bf16 units); its gradient scaler is a disabled one (an identity). ``torch.compile`` of its loss
is off (its ``is_linux`` set False), as rulka compiles nothing. Its replay buffer is replaced by one
prebuilt random batch (images already scaled and channels_last, as its collate function leaves
them); Linesight modules the learner does not need and that are not installed (torchrl, joblib,
prettytable, its video export) are stubbed.

rulka runs the body of ``agent.train()`` (sample from a filled replay, loss, backward, clip, step,
priorities, target schedule) of a ``TrackManiaIQNAgent``, in float32 and with its shipped
``performance.precision: auto``; ``rulka float32 update only`` is ``learn_from_batch`` on one
prebuilt batch, as Linesight's.

Each side runs in processes of its own (spawned, one measuring at a time), because rulka's learner
process sets glibc malloc's thresholds at its start (``performance.keep_freed_memory``, default on)
and Linesight's does not: ``linesight float32`` / ``bfloat16`` run with the system allocator's
defaults, as Linesight runs; ``linesight float32, freed memory kept`` is Linesight's update in a
process given rulka's setting; ``rulka float32`` / ``update only`` / ``auto`` run as rulka ships
(freed memory kept); ``rulka float32, keep_freed_memory false`` without it. A last line gives rulka's
float32 against Linesight's with the same allocator setting on both sides.

Shapes: ``linesight``, Linesight's defaults (its config_files: 160 x 120 frames, batch 512, N = 8,
dense 1024, float head 256; 6,578,333 parameters on both sides; rulka's side is the configuration
guide's defaults, ``TrackManiaExperimentConfig()``); ``sim``, the trackmania_iqn_sim
preset's (48 x 64 frames, batch 64, dense 256 in Linesight's counting; 210,845 parameters).
Every variant runs ``--seconds`` per round, the variants alternating, ``--rounds`` rounds; the table
gives updates/s (mean [min-max]) and each variant's ratio to ``linesight float32`` of the same round
(median [min-max]). Goal (issue 23): rulka float32 >= 1.0x Linesight float32 at Linesight's shape, and
rulka's mixed precision faster still.
"""
from __future__ import annotations

import argparse
import functools
import importlib
import sys
import types
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.precision import cpu_bf16_flags, resolve_precision  # noqa: E402
from agents.trackmania_iqn_agent import TrackManiaIQNAgent  # noqa: E402
from rulka.config import apply_overrides  # noqa: E402
from rulka.presets import load_graph_manager  # noqa: E402
from update_speed import fill, rulka_update  # noqa: E402  (bench/, beside this script)
from variant_process import VariantProcess  # noqa: E402

CAPACITY = 5_000
FILL = 3_000
HOWTO = "get it with: git clone https://github.com/Linesight-RL/linesight /tmp/linesight"


# ------------------------------------------------------------------ Linesight, from its checkout
def load_linesight(checkout: Path) -> types.ModuleType:
    """Linesight's ``trackmania_rl.agents.iqn`` from ``checkout``, run on the CPU (see the module docstring)."""
    if not (checkout / "trackmania_rl" / "agents" / "iqn.py").is_file() or not (checkout / "config_files" / "config.py").is_file():
        raise SystemExit(f"{checkout} is not a Linesight checkout (no trackmania_rl/agents/iqn.py or "
                         f"config_files/config.py); {HOWTO}")
    sys.path.insert(0, str(checkout))
    _stub_if_missing("torchrl.data", ReplayBuffer=object)
    _stub_if_missing("joblib")
    _stub_if_missing("prettytable", PrettyTable=object)
    _stub_if_missing("trackmania_rl.run_to_video")
    config = importlib.import_module("config_files.config")
    config.is_linux = False  # no torch.compile of its loss (rulka compiles nothing either)
    sys.modules["config_files.config_copy"] = config
    importlib.import_module("config_files").config_copy = config
    iqn = importlib.import_module("trackmania_rl.agents.iqn")
    iqn.BENCH_BF16 = False
    iqn.BENCH_AUTOCASTS = 0  # how often its autocast was entered: checks that the substitution took
    iqn.torch = cpu_torch(iqn)
    return iqn


class _CudaMeansCpu(torch.Tensor):
    """A CPU tensor whose ``.to("cuda")`` stays on the CPU (and returns a plain tensor)."""

    def to(self, *args: object, **kwargs: object) -> torch.Tensor:
        args = tuple("cpu" if isinstance(a, str) and a == "cuda" else a for a in args)
        if kwargs.get("device") == "cuda":
            kwargs["device"] = "cpu"
        return torch.Tensor.to(self.as_subclass(torch.Tensor), *args, **kwargs)


def cpu_torch(iqn: types.ModuleType) -> types.ModuleType:
    """``torch`` as Linesight's ``iqn`` module sees it here: every name is torch's (a module dict
    lookup, no per-call cost) but ``arange`` and ``rand`` (device "cuda" -> "cpu"), ``tensor`` (its
    ``.to("cuda")`` stays on the CPU) and ``amp.autocast`` (its float16 CUDA autocast -> a CPU
    autocast in bfloat16, on when ``iqn.BENCH_BF16``)."""
    def on_cpu(function: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        def call(*args: object, **kwargs: object) -> torch.Tensor:
            if kwargs.get("device") == "cuda":
                kwargs["device"] = "cpu"
            return function(*args, **kwargs)
        return call

    def autocast(device_type: str, dtype: torch.dtype | None = None, **kwargs: object) -> torch.amp.autocast:
        if device_type != "cuda" or dtype != torch.float16 or kwargs:
            raise SystemExit(f"Linesight's iqn.py asks for autocast({device_type!r}, {dtype}, {kwargs}), not the float16 "
                             "CUDA autocast this bench knows (its iqn.py as of 2024-2025); use such a checkout")
        iqn.BENCH_AUTOCASTS += 1
        return torch.amp.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=iqn.BENCH_BF16)

    cpu = types.ModuleType("torch")
    cpu.__dict__.update(torch.__dict__)
    cpu.arange, cpu.rand = on_cpu(torch.arange), on_cpu(torch.rand)
    cpu.tensor = lambda *args, **kwargs: torch.tensor(*args, **kwargs).as_subclass(_CudaMeansCpu)
    cpu.amp = types.ModuleType("torch.amp")
    cpu.amp.__dict__.update(torch.amp.__dict__)
    cpu.amp.autocast = autocast
    return cpu


def _stub_if_missing(name: str, **attributes: object) -> None:
    try:
        importlib.import_module(name)
    except ImportError:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
        for key, value in attributes.items():
            setattr(sys.modules[name], key, value)


class PrebuiltBuffer:
    """Stands for Linesight's replay buffer: ``sample`` returns the same batch every time."""

    def __init__(self, batch: tuple[torch.Tensor, ...]) -> None:
        self.batch = batch

    def sample(self, batch_size: int, return_info: bool = True):
        return self.batch, {}

    def update_priority(self, *args: object) -> None:
        pass


def linesight_trainer(iqn: types.ModuleType, height: int, width: int, batch_size: int, float_dim: int,
                      float_hidden: int, dense_hidden: int, embedding: int, actions: int):
    """Linesight's networks, RAdam (as its learner_process builds it) and Trainer, and a buffer."""
    config = sys.modules["config_files.config_copy"]
    config.batch_size, config.iqn_n = batch_size, 8
    conv_out = _conv_output(iqn, height, width)
    def network():
        return iqn.IQN_Network(float_dim, float_hidden, conv_out, dense_hidden, embedding, actions,
                               np.zeros(float_dim, np.float32), np.ones(float_dim, np.float32)
                               ).to(memory_format=torch.channels_last).train()
    online = network()
    target = network()
    target.load_state_dict(online.state_dict())
    optimizer = torch.optim.RAdam(online.parameters(), lr=5e-5, eps=config.adam_epsilon,
                                  betas=(config.adam_beta1, config.adam_beta2))
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    trainer = iqn.Trainer(online, target, optimizer, scaler, batch_size, 8)
    g = torch.Generator().manual_seed(0)
    def images():
        pixels = torch.randint(0, 255, (batch_size, 1, height, width), generator=g).float()
        return ((pixels - 128) / 128).contiguous(memory_format=torch.channels_last)
    batch = (images(), torch.randn(batch_size, float_dim, generator=g), torch.randint(0, actions, (batch_size,), generator=g),
             torch.randn(batch_size, generator=g), images(), torch.randn(batch_size, float_dim, generator=g),
             torch.full((batch_size,), 0.99))
    buffer = PrebuiltBuffer(batch)
    def update() -> None:
        trainer.train_on_batch(buffer, do_learn=True)
    update()
    if not iqn.BENCH_AUTOCASTS:
        raise SystemExit("Linesight's Trainer.train_on_batch entered no torch.amp.autocast: this bench knows its iqn.py "
                         "as of 2024-2025 (float16 autocast around the update); use such a checkout")
    return trainer, online, update


def _conv_output(iqn: types.ModuleType, height: int, width: int) -> int:
    probe = iqn.IQN_Network(1, 8, 1, 8, 8, 2, np.zeros(1), np.ones(1))
    with torch.no_grad():
        return int(probe.img_head(torch.zeros(1, 1, height, width)).shape[1])


# ------------------------------------------------------------------ rulka
def rulka_agent_config(shape: str):
    """rulka's configuration at ``shape``: the guide's defaults (Linesight's: 160 x 120, batch 512,
    6,578,333 parameters) or the sim preset's, with a small replay."""
    from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig

    base = TrackManiaExperimentConfig() if shape == "linesight" else load_graph_manager("trackmania_iqn_sim").config
    return apply_overrides(base, overrides=[
        "environment.backend=sim", f"memory.memory_size_schedule=[[0, [{CAPACITY}, 1000]]]", "memory.buffer_test_ratio=0",
        "memory.number_times_single_memory_is_used_before_discard=1000000000", "performance.precision=auto"])


def rulka_agent(shape: str) -> TrackManiaIQNAgent:
    """The TrackMania IQN agent at ``shape`` (its replay filled with random transitions)."""
    from environments.trackmania.env import TrackManiaEnv

    config = rulka_agent_config(shape)
    env = TrackManiaEnv(config.environment)
    agent = TrackManiaIQNAgent(config, env.observation_space, env.action_space, "cpu", seed=0)
    env.close()
    fill(agent, FILL)
    return agent


def rulka_updates(agent: TrackManiaIQNAgent) -> tuple[Callable[[], None], Callable[[], None]]:
    """(the body of ``agent.train()`` without the replay-ratio gate, ``learn_from_batch`` on one batch)."""
    batch = agent.sample_batch()
    return rulka_update(agent), lambda: agent.learn_from_batch(batch)


def with_precision(agent: TrackManiaIQNAgent, setting: str, fn: Callable[[], None]) -> Callable[[], None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        precision = resolve_precision(setting, agent.device)
    def run() -> None:
        agent.precision = precision
        fn()
    return run


# ------------------------------------------------------------------ the processes' variants
def shape_dims(shape: str) -> dict[str, int]:
    """The networks' sizes at ``shape``, read from rulka's configuration (both sides are built to them)."""
    from environments.trackmania.env import TrackManiaEnv

    config = rulka_agent_config(shape)
    env = TrackManiaEnv(config.environment)
    frame, floats, actions = env.observation_space["frame"].shape, env.observation_space["floats"].shape[0], env.action_space.n
    env.close()
    p = config.neural_network
    return dict(height=frame[1], width=frame[2], batch_size=config.training.batch_size, float_dim=floats,
                float_hidden=p.float_hidden_dim, dense_hidden=2 * p.dense_hidden_dimension,
                embedding=p.iqn_embedding_dimension, actions=int(actions))


def linesight_variants(checkout: str, dims: dict[str, int], bfloat16: bool, label: str = ""
                       ) -> tuple[dict[str, Callable[[], None]], str]:
    """Linesight's update in float32 (and bfloat16 with ``bfloat16``), named ``linesight PRECISION{label}``."""
    iqn = load_linesight(Path(checkout))
    trainer, online, update = linesight_trainer(iqn, **dims)

    def run(bf16: bool) -> Callable[[], None]:
        def step() -> None:
            iqn.BENCH_BF16 = bf16
            update()
        return step

    variants = {f"linesight float32{label}": run(False)}
    if bfloat16:
        variants[f"linesight bfloat16{label}"] = run(True)
    return variants, f"Linesight {sum(q.numel() for q in online.parameters()):,} parameters"


def rulka_variants(shape: str, shipped: bool) -> tuple[dict[str, Callable[[], None]], str]:
    """rulka's update as shipped (float32, float32 on one batch, auto), or float32 alone (``shipped`` False:
    the process runs with ``performance.keep_freed_memory: false``)."""
    agent = rulka_agent(shape)
    update, learn_only = rulka_updates(agent)
    if not shipped:
        return {"rulka float32, keep_freed_memory false": with_precision(agent, "float32", update)}, ""
    variants = {"rulka float32": with_precision(agent, "float32", update),
                "rulka float32 update only": with_precision(agent, "float32", learn_only),
                f"rulka auto ({agent.precision.name})": with_precision(agent, "auto", update)}
    return variants, (f"rulka {sum(q.numel() for q in agent.online_network.parameters()):,} parameters; "
                      f"rulka's auto: {agent.precision.describe()}")


# ------------------------------------------------------------------ measuring
def spread(values: list[float]) -> str:
    digits = 2 if np.mean(values) < 10 else 1
    return f"{np.mean(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def compare(shape: str, checkout: Path, seconds: float, rounds: int, threads: int) -> None:
    """Each side in processes of its own: Linesight with the system's allocator (as it runs) and with
    rulka's ``keep_freed_memory``; rulka as shipped (``keep_freed_memory: true``) and without it."""
    dims = shape_dims(shape)
    keep = rulka_agent_config(shape).performance.keep_freed_memory
    processes = [
        VariantProcess(functools.partial(linesight_variants, str(checkout), dims, bool(cpu_bf16_flags())), False, threads),
        VariantProcess(functools.partial(linesight_variants, str(checkout), dims, False, ", freed memory kept"), True, threads),
        VariantProcess(functools.partial(rulka_variants, shape, True), keep, threads),
        VariantProcess(functools.partial(rulka_variants, shape, False), False, threads),
    ]
    print(f"{shape}: {dims['height']} x {dims['width']} frames, batch {dims['batch_size']}, {dims['float_dim']} floats, "
          f"{dims['actions']} actions; {processes[0].info}, {processes[2].info}", flush=True)
    rates: dict[str, list[float]] = {name: [] for process in processes for name in process.names}
    for _ in range(rounds):
        for process in processes:
            for name in process.names:
                rates[name].append(process.rate(name, seconds))
    for process in processes:
        process.close()
    base = rates["linesight float32"]
    for name, values in rates.items():
        print(f"| {shape} | {name} | {spread(values)} | {ratio(values, base)} |", flush=True)
    same = rates["linesight float32, freed memory kept"]
    print(f"{shape}, both sides keeping freed memory: rulka float32 / Linesight float32 {ratio(rates['rulka float32'], same)}",
          flush=True)


def ratio(values: list[float], base: list[float]) -> str:
    """Per-round ratios: median [min-max]."""
    ratios = [v / b for v, b in zip(values, base)]
    return f"{np.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("linesight", type=Path, help=f"a checkout of Linesight's repository ({HOWTO})")
    parser.add_argument("--seconds", type=float, default=20.0, help="measuring time per variant and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (both learners)")
    parser.add_argument("--shapes", default="linesight,sim")
    args = parser.parse_args()
    load_linesight(args.linesight.resolve())  # refuses a wrong checkout before any process starts
    print(f"torch {torch.__version__}, {args.threads} thread(s), CPU bf16 units: {', '.join(cpu_bf16_flags()) or 'none'}; "
          f"{args.rounds} alternating rounds of {args.seconds:g} s per variant")
    print("| shape | variant | updates/s | ratio to linesight float32 (per round: median [min-max]) |")
    print("|---|---|---|---|")
    for shape in args.shapes.split(","):
        compare(shape, args.linesight.resolve(), args.seconds, args.rounds, args.threads)


if __name__ == "__main__":
    main()
