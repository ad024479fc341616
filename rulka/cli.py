"""The ``rulka`` command: run a preset, resume a run, evaluate a checkpoint, and the tool commands."""
from __future__ import annotations

import argparse
import datetime as dt
import shutil
import signal
import sys
from pathlib import Path
from typing import Callable, Sequence

import yaml

from rulka import checkpoints, export
from rulka.collection.remote import CollectorFailure
from rulka.config import ConfigError, apply_dict, apply_overrides, load_yaml_file
from rulka.export_command import add_export_command
from rulka.tune_command import add_tune_command
from rulka.graph_manager import BasicRLGraphManager
from rulka.machine import describe_machine, record_resume
from rulka.params_command import add_params_command
from rulka.presets import PresetError, available_presets, load_graph_manager
from rulka.ray_address import parse_ray_address
from rulka.seeding import resolve_device

RUN_INFO = "run_info.yaml"
#: Called with the graph manager of a run (``-p`` or ``--resume``) just before it trains (``rulka tune``'s
#: trials add the one that reports their evaluations: :mod:`rulka.tune_trial`).
RUN_HOOKS: list[Callable[[BasicRLGraphManager], None]] = []

DESCRIPTION = """\
Run a reinforcement-learning experiment defined by a preset.

examples:
  rulka -p cartpole_iqn                      train until the preset's max_env_steps
  rulka -p cartpole_iqn --seed 1 -e my_run   named run folder experiments/my_run
  rulka -p my_preset.py --config cfg.yaml -cp training.batch_size=256
  rulka --resume experiments/my_run --max-steps 200000
  rulka --evaluate experiments/my_run            greedy episodes with the run's network (its config snapshot)
  rulka -p cartpole_iqn --evaluate model.pt -cp neural_network.dense_hidden_dimension=64   a bare checkpoint
  rulka export experiments/my_run --out exports/my_policy      weights + config + spaces + filters
  rulka -p cartpole_iqn --init-from experiments/my_run        a new run whose networks start trained
  rulka params cartpole_iqn -cp training.batch_size=256   every parameter: value, default, unit, docs
  rulka tune cartpole_dqn --space space.yaml --samples 8 --scheduler asha --max-steps 30000   a sweep (Ray Tune)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rulka", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-p", "--preset", help="preset name (see -l) or path to a preset .py file")
    parser.add_argument("-l", "--list", action="store_true", help="list the built-in presets and exit")
    parser.add_argument("-e", "--experiment-name",
                        help="name of the run folder under --experiments-dir (default: preset name + timestamp)")
    parser.add_argument("--experiments-dir", default="experiments", help="where run folders go (default: ./experiments)")
    parser.add_argument("--config", action="append", default=[], metavar="FILE.yaml",
                        help="YAML file whose sections override the preset's parameters (repeatable, applied in order)")
    parser.add_argument("-cp", "--custom-parameter", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override one parameter, value written in YAML, e.g. -cp training.batch_size=256 (repeatable)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random generator (default: 0)")
    parser.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"],
                        help="where networks run (default: auto = cuda when available)")
    parser.add_argument("--evaluate", metavar="RUN_DIR|CHECKPOINT|EXPORT_DIR",
                        help="only evaluate a trained network with greedy episodes and print the average return; the "
                             "network is built from the run's config snapshot (a bare checkpoint outside a run folder "
                             "needs -p and the run's -cp flags)")
    parser.add_argument("--init-from", metavar="RUN_DIR|CHECKPOINT|EXPORT_DIR",
                        help="a new run whose online and target networks start from these weights; its optimizer, "
                             "memory, counters and schedules start fresh; only the layer shapes are checked (another "
                             "map or backend takes them when the network sizes match; simulator weights in the real "
                             "game: see docs/trackmania.md, 'From the simulator to the real game')")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    parser.add_argument("--max-steps", type=int, metavar="N",
                        help="stop when the run has taken N environment steps in total (default: the preset's max_env_steps)")
    parser.add_argument("--no-progress", action="store_true", help="do not show the progress line")
    parser.add_argument("--ray-address", metavar="ADDRESS",
                        help="with performance.collector_backend: ray, the Ray cluster to join: auto (the cluster this "
                             "machine joined with ray start) or HOST:PORT; default none = a local Ray instance")
    subparsers = parser.add_subparsers(dest="command", title="tool commands", metavar="COMMAND")
    add_params_command(subparsers)
    add_export_command(subparsers)
    add_tune_command(subparsers)
    _register_tool_commands(subparsers)
    return parser


def _register_tool_commands(subparsers: argparse._SubParsersAction) -> None:
    """Tool subcommands come from the ``rulka.commands`` entry points (setup.cfg): the core's own
    command is only ``params``."""
    from importlib.metadata import entry_points

    for entry_point in sorted(entry_points(group="rulka.commands"), key=lambda e: e.name):
        entry_point.load()(subparsers)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command is not None:
            return int(args.func(args) or 0)
        if args.list:
            print("\n".join(available_presets()))
            return 0
        if args.init_from and (args.resume or args.evaluate):
            parser.error("--init-from starts a new run: use it without --resume and --evaluate")
        if args.resume:
            return resume(args)
        if args.evaluate:
            return evaluate(args)
        if not args.preset:
            parser.error("give a preset with -p NAME (rulka -l lists them), --resume RUN_DIR or --evaluate RUN_DIR")
        return train(args)
    except (ConfigError, FileNotFoundError, checkpoints.CheckpointError) as error:
        print(f"rulka: error: {error}", file=sys.stderr)
        return 2
    except CollectorFailure as error:
        print(f"rulka: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("rulka: aborted without a final checkpoint; --resume RUN_DIR continues from the last one",
              file=sys.stderr)
        return 130


def _prepare(preset: str, yaml_files: list[str], overrides: list[str]) -> BasicRLGraphManager:
    graph_manager = load_graph_manager(preset)
    graph_manager.config = apply_overrides(graph_manager.config, yaml_files, overrides)
    return graph_manager


def train(args: argparse.Namespace) -> int:
    device = _device(args.device)
    graph_manager = _prepare(args.preset, args.config, args.custom_parameter)
    graph_manager.preflight()
    name = args.experiment_name or f"{Path(args.preset).stem}_{dt.datetime.now():%Y%m%d-%H%M%S}"
    run_dir = Path(args.experiments_dir) / name
    if checkpoints.has_checkpoint(run_dir / "checkpoints" / checkpoints.LAST):  # killed before one: start again
        raise ConfigError(f"run folder {run_dir} already holds a run; continue it with --resume {run_dir} or pick another -e")
    new_folder = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    preset = args.preset if not args.preset.endswith(".py") else str(Path(args.preset).resolve())
    info = {"preset": preset, "seed": args.seed, "device": args.device, "machine": describe_machine()}
    if args.init_from:
        info["init_from"] = str(Path(args.init_from).resolve())
    write_run_info(run_dir, info)
    print(f"rulka: run folder {run_dir}", file=sys.stderr)
    graph_manager.create(run_dir, device, args.seed)
    if args.init_from:
        try:
            origin = export.init_networks_from(graph_manager, args.init_from)
        except (ConfigError, FileNotFoundError, checkpoints.CheckpointError):
            graph_manager.close()
            if new_folder:  # nothing ran: leave no half-made run behind
                shutil.rmtree(run_dir, ignore_errors=True)
            raise
        steps = (origin.get("counters") or {}).get("env_steps")
        print(f"rulka: networks start from {origin.get('checkpoint') or args.init_from}"
              + (f" ({steps} environment steps of training)" if steps is not None else "")
              + "; optimizer, memory, counters and schedules start fresh", file=sys.stderr)
    graph_manager.ray_address = _ray_address(args.ray_address)
    return _improve(graph_manager, args.max_steps, args.no_progress)


def resume(args: argparse.Namespace) -> int:
    graph_manager = load_run(args.resume, args.device, args.config, args.custom_parameter, args.preset)
    steps = graph_manager.agent.counters.env_steps
    run_dir = Path(args.resume)
    write_run_info(run_dir, record_resume(load_yaml_file(run_dir / RUN_INFO), steps))  # its later minutes ran here
    print(f"rulka: resumed {args.resume} at {steps} environment steps", file=sys.stderr)
    graph_manager.ray_address = _ray_address(args.ray_address)
    return _improve(graph_manager, args.max_steps, args.no_progress)


def write_run_info(run_dir: Path, info: dict) -> None:
    """Write ``run_info.yaml`` whole or not at all: ``--resume`` rewrites it, and a run killed during that
    write must keep the old file, without which it cannot resume."""
    checkpoints.write_file_atomic(run_dir / RUN_INFO, yaml.safe_dump(info).encode("utf-8"))


def load_run(run_dir: str | Path, device: str = "auto", yaml_files: Sequence[str] = (),
             overrides: Sequence[str] = (), preset: str | None = None) -> BasicRLGraphManager:
    """Rebuild a run from its folder: its preset, its config snapshot, then its last checkpoint."""
    run_dir = Path(run_dir)
    info_path = run_dir / RUN_INFO
    if not info_path.is_file():
        raise ConfigError(f"{run_dir} is not a rulka run folder (no {RUN_INFO})")
    if not checkpoints.has_checkpoint(run_dir / "checkpoints" / checkpoints.LAST):
        raise ConfigError(f"{run_dir} has no checkpoint to resume from (checkpoints/last.pt)")
    info = load_yaml_file(info_path)
    graph_manager = load_graph_manager(preset or info["preset"])
    graph_manager.config = apply_dict(graph_manager.config, load_yaml_file(run_dir / "config_snapshot.yaml"))
    graph_manager.config = apply_overrides(graph_manager.config, list(yaml_files), list(overrides))
    device = device if device != "auto" else info.get("device", "auto")
    graph_manager.create(run_dir, _device(device), int(info.get("seed", 0)), resume=True)
    return graph_manager


def evaluate(args: argparse.Namespace) -> int:
    """Greedy episodes with the network of a run folder, checkpoint or export, built from the run's own
    config snapshot; a bare checkpoint (no run folder around it) is built from -p and -cp."""
    source = Path(args.evaluate)
    if export.is_export(source):
        snapshot_dir, preset = source, export.read_description(source).get("preset")
    else:
        _, run_dir = export.locate(source)
        snapshot_dir = run_dir
        preset = load_yaml_file(run_dir / RUN_INFO).get("preset") if run_dir and (run_dir / RUN_INFO).is_file() else None
    preset = args.preset or preset
    if not preset:
        raise ConfigError(f"{source} names no preset (no run folder around it): give the run's preset with -p NAME "
                          f"and the run's -cp flags")
    graph_manager = load_graph_manager(preset)
    if snapshot_dir is not None:
        graph_manager.config = apply_dict(graph_manager.config, load_yaml_file(snapshot_dir / export.SNAPSHOT_FILE))
        print(f"rulka: network built from {snapshot_dir / export.SNAPSHOT_FILE}", file=sys.stderr)
    graph_manager.config = apply_overrides(graph_manager.config, args.config, args.custom_parameter)
    graph_manager.create(None, _device(args.device), args.seed)
    weights, _ = export.load_online_weights(source)
    export.check_same_shapes(graph_manager.agent.online_network, weights, str(source))
    graph_manager.agent.online_network.load_state_dict(weights)
    episodes = graph_manager.config.training.evaluation_episodes
    score = graph_manager.evaluate(episodes)
    print(f"evaluation: average return {score:.2f} over {episodes} greedy episodes")
    for line in graph_manager.describe_evaluation():
        print(f"evaluation: {line}")
    graph_manager.close()
    return 0


def _improve(graph_manager: BasicRLGraphManager, max_steps: int | None, no_progress: bool) -> int:
    for hook in RUN_HOOKS:
        hook(graph_manager)
    try:
        summary = graph_manager.improve(max_steps, show_progress=not no_progress)
    finally:
        graph_manager.close()
    if graph_manager.stop_signal is not None:
        name = signal.Signals(graph_manager.stop_signal).name
        print(f"rulka: stopped by {name} at {summary.env_steps} env steps; final checkpoint written; continue with "
              f"--resume {graph_manager.run_dir}", file=sys.stderr)
        return 128 + int(graph_manager.stop_signal)
    last = "-" if summary.last_evaluation is None else f"{summary.last_evaluation:.2f}"
    best = "-" if summary.best_evaluation is None else f"{summary.best_evaluation:.2f}"
    print(f"done: {summary.env_steps} env steps, {summary.episodes} episodes, {summary.gradient_updates} gradient "
          f"updates, last evaluation {last}, best {best}, {summary.wall_time_s:.0f} s")
    return 0


def _ray_address(address: str | None) -> str | None:
    return parse_ray_address(address)


def _device(name: str):
    try:
        return resolve_device(name)
    except ValueError as error:
        raise ConfigError(str(error)) from None


if __name__ == "__main__":
    sys.exit(main())
