"""TrackMania subcommands for the ``rulka`` CLI: ``baseline``, ``record`` and ``stats``.

The main CLI calls :func:`register_commands(subparsers)`; each subcommand sets ``func`` to a
callable ``(args) -> exit code``.
"""
from __future__ import annotations

import argparse
import dataclasses

from environments.trackmania.tools.record import ANIMATION_STRIDE, CAMERA_HEIGHT, CAMERA_WIDTH
from environments.trackmania.tracks import BUILTIN_TRACK_NAMES, DEFAULT_TRACK

_TRACK_HELP = (f"track: {', '.join(BUILTIN_TRACK_NAMES)} (default {DEFAULT_TRACK}), procedural:SEED, loop:SEED, "
               "hockolicious, or PATH.npy[@ROAD_WIDTH_M]")


def cmd_baseline(args: argparse.Namespace) -> int:
    """Print the classical driver's race time on ``--track`` (with ``--tune``: search its margins)."""
    from environments.trackmania.tools.baseline import run_baseline, tune_baseline

    if args.tune:
        tuned = tune_baseline(args.track, seed=args.seed, progress=print)
        shipped = f"{tuned.shipped_time_s:.2f} s" if tuned.shipped_finished else "did not finish"
        print(f"track {tuned.track}: tuned driver finished in {tuned.race_time_s:.2f} s with {tuned.margins} "
              f"({tuned.races} races tried); shipped margins: {shipped}")
        return _tune_racing_line(args)
    result = run_baseline(args.track, seed=args.seed)
    status = "finished" if result.finished else f"did not finish ({result.end_reason})"
    print(f"track {result.track}: {status} in {result.race_time_s:.2f} s "
          f"({result.steps} actions; speed-profile prediction {result.predicted_time_s:.2f} s)")
    return 0 if result.finished else 1


def _tune_racing_line(args: argparse.Namespace) -> int:
    """The racing-line driver's part of ``rulka baseline --tune``: its tuned race, its shipped margins' race
    and the speed-profile bound of its line."""
    try:
        from environments.trackmania.tools.racing_line import tune_racing_line

        racing = tune_racing_line(args.track, seed=args.seed, max_races=args.racing_races, progress=print)
    except (ImportError, ValueError) as error:
        print(f"racing-line driver: {error}")
        return 1
    shipped = f"{racing.shipped_time_s:.2f} s" if racing.shipped_time_s is not None else "no clean finish"
    print(f"track {racing.track}: racing-line driver finished in {racing.race_time_s:.2f} s with {racing.margins} "
          f"({racing.races} races tried; shipped margins: {shipped}); speed-profile bound of its line "
          f"{racing.bound_s:.2f} s (race / bound {racing.bound_ratio:.3f})")
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    """Write a GIF of the frames and a PNG of the trajectory for one episode; with ``--best-run``,
    replay a saved best run and draw its pictures next to the classical driver's race."""
    if args.best_run is not None:
        return _record_best_run(args)
    if args.out is None:
        print("rulka record: give --out DIR (where to write the episode), or --best-run RUN_DIR/best_runs/MAP")
        return 2
    from environments.trackmania.env import TrackManiaEnv
    from environments.trackmania.parameters import TrackManiaEnvironmentParameters
    from environments.trackmania.tools.record import baseline_policy, random_policy, record_episode

    params = TrackManiaEnvironmentParameters(game_camera_number=args.camera)
    trained = None
    if args.policy not in ("baseline", "random"):  # a trained policy: its run's observation sizes and rewards
        from rulka.policy import load_policy

        trained = load_policy(args.policy)
        params = dataclasses.replace(trained.config.environment, backend="sim", game_camera_number=args.camera)
    env = TrackManiaEnv(params=params, track=args.track)
    if trained is not None:
        policy = lambda obs: trained.predict(obs, deterministic=True)  # noqa: E731
    else:
        policy = baseline_policy(env) if args.policy == "baseline" else random_policy(env, args.seed)
    label = args.policy if trained is None else "policy"
    result = record_episode(env, policy, args.out, seed=args.seed, name=f"{args.track.replace(':', '_').replace('/', '_')}_{label}",
                            max_steps=args.max_steps)
    env.close()
    print(f"wrote {result.gif_path} and {result.png_path}: {result.steps} actions, "
          f"race time {result.info['race_time_ms'] / 1000:.2f} s, end: {result.info['end_reason'] or 'max steps'}")
    return 0


def _record_best_run(args: argparse.Namespace) -> int:
    import time

    from environments.trackmania.tools.race_gaps import format_sector_gaps
    from environments.trackmania.tools.race_replay import ReplayError
    from environments.trackmania.tools.record import record_best_run

    start = time.perf_counter()
    try:
        width, _, height = args.camera_size.partition("x")
        result = record_best_run(args.best_run, args.out, driver=args.driver, run_seed=args.run_seed,
                                 animation_suffix=f".{args.format}", stride=args.stride,
                                 camera_size=(int(width), int(height)), sector_m=args.sector_m)
    except ReplayError as error:
        print(f"rulka record: {error}")
        return 2
    pictures = result.pictures
    written = [p for p in (result.trajectory_npz, pictures.map_png, pictures.speed_png, pictures.animation) if p]
    driver = f"; {result.driver_label}" if result.driver_label else ""
    print(f"replayed the best run (reset seed {result.reset_seed}): {result.race_time_s:.2f} s as saved{driver}")
    for path in written:
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} kB)")
    if result.sectors:
        print(format_sector_gaps(result.sectors, "agent", "driver"))
    print(f"took {time.perf_counter() - start:.1f} s (replay rendering the {args.camera_size} camera "
          f"{result.replay_s:.1f} s, pictures {pictures.seconds:.1f} s)")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Measure the floats' mean / std from noisy classical-driver rollouts and write a YAML section."""
    from environments.trackmania.training.normalization import measure_float_stats, write_state_normalization_yaml

    mean, std, n = measure_float_stats(args.track, episodes=args.episodes, noise=args.noise, seed=args.seed)
    path = write_state_normalization_yaml(args.out, mean, std)
    print(f"wrote state_normalization ({len(mean)} floats, {n} samples) to {path}")
    return 0


def _camera_size(text: str) -> str:
    width, sep, height = text.partition("x")
    if not (sep and width.isdigit() and height.isdigit() and int(width) >= 16 and int(height) >= 16):
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT in pixels, at least 16x16, e.g. 480x360; got {text!r}")
    return text


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, e.g. 80; got {text!r}")
    return int(text)


def _positive_metres(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive length in metres, e.g. 100; got {text!r}")
    return value


def register_commands(subparsers: "argparse._SubParsersAction") -> None:
    """Add ``baseline``, ``record`` and ``stats`` to the main CLI's subparsers."""
    p = subparsers.add_parser("baseline", help="race time of the classical driver on a simulator track (--tune: "
                                               "both classical drivers, tuned)")
    p.add_argument("--track", default=DEFAULT_TRACK, help=_TRACK_HELP)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tune", action="store_true",
                   help="search the margins of both classical drivers for the fastest finish: the line-following "
                        "driver's (grip, braking, look-ahead; a grid) and the racing-line driver's (edge margin too; "
                        "scipy's Nelder-Mead, the tune extra)")
    p.add_argument("--racing-races", type=_positive_int, default=None, metavar="N",
                   help="with --tune: races the racing-line driver's search may run (default "
                        "racing_line.TUNE_MAX_RACES)")
    p.set_defaults(func=cmd_baseline)

    p = subparsers.add_parser("record", help="write an episode as GIF (frames) + PNG (top-down trajectory); "
                                             "--best-run: pictures of a training run's best race")
    p.add_argument("--track", default=DEFAULT_TRACK, help=_TRACK_HELP)
    p.add_argument("--policy", default="baseline", metavar="baseline|random|RUN_DIR|EXPORT_DIR",
                   help="who drives: the classical driver, random actions, or a trained policy (a run folder, a "
                        "checkpoint in one, or a `rulka export` folder), greedy, with its run's environment settings")
    p.add_argument("--out", default=None, help="output directory (with --best-run: default the best run's folder)")
    p.add_argument("--best-run", default=None, metavar="PATH",
                   help="RUN_DIR/best_runs/MAP (its fastest race) or one of its .json files: replay it in the "
                        "simulator and write its trajectory (.npz), a map coloured by speed with the classical "
                        "driver's line (_map.png), speed along the track for both (_speed.png) and a first-person "
                        "| map animation (_race.webp)")
    p.add_argument("--driver", choices=["shipped", "tuned", "none"], default="shipped",
                   help="with --best-run: the classical driver to compare with (tuned: searches its margins, "
                        "about a minute)")
    p.add_argument("--sector-m", type=_positive_metres, default=100.0, metavar="METRES",
                   help="with --best-run and a driver: print the run against the driver in sectors this long "
                        "(time per sector, the gap, lowest speeds, share off the road)")
    p.add_argument("--run-seed", type=int, default=0,
                   help="with --best-run: the training run's --seed (only for best runs saved without their seed)")
    p.add_argument("--format", choices=["webp", "gif"], default="webp", help="with --best-run: animation format")
    p.add_argument("--camera-size", type=_camera_size, default=f"{CAMERA_WIDTH}x{CAMERA_HEIGHT}", metavar="WxH",
                   help="with --best-run: the first-person view's size in pixels (the simulator renders it "
                        "at this size; the network's frames are separate)")
    p.add_argument("--stride", type=int, default=ANIMATION_STRIDE,
                   help="with --best-run: one animation frame every this many actions (more for long races)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--camera", type=int, choices=[1, 2, 3], default=2, help="game_camera_number")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many actions")
    p.set_defaults(func=cmd_record)

    p = subparsers.add_parser("stats", help="measure float mean/std from rollouts into a YAML state_normalization")
    p.add_argument("--track", default=DEFAULT_TRACK, help=_TRACK_HELP)
    p.add_argument("--episodes", type=int, default=4)
    p.add_argument("--noise", type=float, default=0.15, help="probability of a random action")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="YAML file to write")
    p.set_defaults(func=cmd_stats)

    from environments.trackmania.tools.demos_cli import register_demos_command

    register_demos_command(subparsers)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m environments.trackmania.tools.cli``) until the main CLI hooks us in."""
    parser = argparse.ArgumentParser(prog="rulka-trackmania")
    register_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
