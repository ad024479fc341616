"""``rulka demos record`` and ``rulka demos from-best-run``: demonstration sets of simulator races
(:mod:`environments.trackmania.tools.demos`); a run learns from them with ``demonstrations.folders``."""
from __future__ import annotations

import argparse
import sys

from environments.trackmania.tracks import DEFAULT_TRACK


def _margins(text: str):
    from environments.trackmania.tools.baseline import DriverMargins

    parts = text.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 3 or not all(v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected GRIP,BRAKE,LOOKAHEAD_S (three positive numbers, e.g. "
                                         f"1.0,0.9,0.45, as rulka baseline --tune prints them); got {text!r}")
    return DriverMargins(*values)


def cmd_demos_record(args: argparse.Namespace) -> int:
    from environments.trackmania.tools.demos import record_demonstrations
    from rulka.config import ConfigError, apply_overrides
    from rulka.presets import PresetError, load_graph_manager

    margins = args.margins
    if args.policy != "baseline" and (margins is not None or args.tuned):
        print("rulka demos record: error: --margins and --tuned are for --policy baseline", file=sys.stderr)
        return 2
    params = None
    if args.policy == "baseline":
        try:
            config = apply_overrides(load_graph_manager(args.preset).config, [], args.custom_parameter)
        except (ConfigError, PresetError, FileNotFoundError) as error:
            print(f"rulka demos record: error: {error}", file=sys.stderr)
            return 2
        params = config.environment
        if args.tuned:
            from environments.trackmania.tools.baseline import tune_baseline

            tuned = tune_baseline(args.track, seed=args.seed)
            margins = tuned.margins
            print(f"tuned driver on {tuned.track}: {tuned.race_time_s:.2f} s with {margins}")
    try:
        races = record_demonstrations(args.out, args.track, args.races, policy=args.policy, params=params,
                                      margins=margins, seed=args.seed, max_steps=args.max_steps, progress=print)
    except (ValueError, FileNotFoundError, RuntimeError) as error:
        print(f"rulka demos record: error: {error}", file=sys.stderr)
        return 2
    finished = sum(r.finished for r in races)
    print(f"wrote {args.out}: {len(races)} race(s), {finished} finished, {sum(r.steps for r in races)} actions; "
          f"train with -cp demonstrations.folders=[{args.out}]")
    return 0


def cmd_demos_best_run(args: argparse.Namespace) -> int:
    from environments.trackmania.tools.demos import best_run_demonstrations
    from environments.trackmania.tools.race_replay import ReplayError

    try:
        race = best_run_demonstrations(args.best_run, args.out, run_seed=args.run_seed)
    except ReplayError as error:
        print(f"rulka demos from-best-run: error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: the best run replayed from reset seed {race.seed}, finished in "
          f"{race.race_time_ms / 1000:.2f} s ({race.steps} actions)")
    return 0


def register_demos_command(subparsers: "argparse._SubParsersAction") -> None:
    """Add ``demos`` with ``record`` and ``from-best-run``."""
    demos = subparsers.add_parser("demos", help="demonstration sets: record a driver's simulator races")
    sub = demos.add_subparsers(dest="demos_command", required=True)
    p = sub.add_parser("record", help="race a driver on a simulator track and save every race whole")
    p.add_argument("--policy", default="baseline", metavar="baseline|EXPORT_DIR",
                   help="the classical driver, or a `rulka export` folder (greedy, its run's environment)")
    p.add_argument("--track", default=DEFAULT_TRACK, help="simulator track (a name, procedural:SEED, ...)")
    p.add_argument("--races", type=int, default=5, help="races to record (reset seeds SEED, SEED+1, ...)")
    p.add_argument("--out", required=True, help="the demonstration set's folder")
    p.add_argument("--seed", type=int, default=0, help="reset seed of the first race")
    p.add_argument("-p", "--preset", default="trackmania_iqn_sim",
                   help="with baseline: the preset whose environment section the races use (the run's)")
    p.add_argument("-cp", "--custom-parameter", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="with baseline: override the preset as the run will (e.g. environment.H_downsized=48)")
    p.add_argument("--margins", type=_margins, default=None, metavar="GRIP,BRAKE,LOOKAHEAD_S",
                   help="with baseline: the driver's margins (default: the shipped ones)")
    p.add_argument("--tuned", action="store_true",
                   help="with baseline: search the margins on the track first (rulka baseline --tune; about a minute)")
    p.add_argument("--max-steps", type=int, default=None, help="cut each race after this many actions")
    p.set_defaults(func=cmd_demos_record)
    p = sub.add_parser("from-best-run", help="a one-race set from a training run's best race (simulator runs)")
    p.add_argument("best_run", metavar="RUN_DIR/best_runs/MAP", help="a best-run folder or one of its .json files")
    p.add_argument("--out", required=True, help="the demonstration set's folder")
    p.add_argument("--run-seed", type=int, default=0, help="the run's --seed (best runs saved without their seed)")
    p.set_defaults(func=cmd_demos_best_run)
    from environments.trackmania.tools.demos_from_inputs_cli import add_from_inputs_parser

    add_from_inputs_parser(sub)
