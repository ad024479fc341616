"""``rulka demos from-inputs INPUTS.txt``: a race's inputs played back through the game link into a
demonstration set (:mod:`environments.trackmania.tools.demos_from_inputs`)."""
from __future__ import annotations

import argparse
import sys


def _track(args: argparse.Namespace, config):
    """The ``--map``/``--line`` track, else the map cycle's first entry (``--map`` alone picks its entry)."""
    from environments.trackmania.track import track_from_map
    from environments.trackmania.training.map_cycle import TMI_ROAD_WIDTH_M, cycle_entries, entry_track
    from rulka.config import ConfigError

    if args.line:
        if not args.map:
            raise ConfigError("--line goes with --map (the map the game loads)")
        return track_from_map(args.map, args.line, road_width=TMI_ROAD_WIDTH_M)
    entries = cycle_entries(config)
    if args.map:
        entries = [e for e in entries if e.map_path == args.map or e.short_name == args.map]
        if not entries:
            raise ConfigError(f"--map {args.map}: not in the configuration's map cycle; give its reference line "
                              f"with --line LINE.npy (rulka tmi line REPLAY.Gbx LINE.npy writes one)")
    return entry_track(entries[0], "tmi")


def cmd_demos_from_inputs(args: argparse.Namespace) -> int:
    from environments.trackmania.tmi.maps.inputs_script import InputsScriptError  # a ValueError, named for the reader
    from environments.trackmania.tmi.link.protocol import TMInterfaceError
    from environments.trackmania.tools.demos_from_inputs import record_from_inputs
    from rulka.config import ConfigError, apply_overrides
    from rulka.presets import PresetError, load_graph_manager

    def fail(error: object) -> int:
        print(f"rulka demos from-inputs: error: {error}", file=sys.stderr)
        return 2

    try:
        config = apply_overrides(load_graph_manager(args.preset).config, args.config, args.custom_parameter)
        track = _track(args, config)
    except (ConfigError, PresetError, FileNotFoundError, ValueError) as error:
        return fail(error)
    speed = args.running_speed if args.running_speed is not None else config.performance.running_speed
    try:
        result = record_from_inputs(args.inputs, args.out, track, params=config.environment, port=args.port,
                                    launch=args.launch, running_speed=speed, snap=args.snap,
                                    max_steps=args.max_steps)
    except (InputsScriptError, ValueError, FileNotFoundError, RuntimeError, TimeoutError, TMInterfaceError) as error:
        return fail(error)
    race = result.race
    if result.moved:
        print(f"--snap moved {result.moved} key change(s) to the action grid: the race played differs from "
              "the script's")
    status = (f"finished in {race.race_time_ms / 1000:.2f} s" if race.finished
              else f"NOT finished ({race.end_reason} at {race.race_time_ms / 1000:.2f} s)")
    print(f"wrote {args.out}: {race.steps} actions ({result.script_actions} from the script), {status}; "
          f"train with -cp demonstrations.folders=[{args.out}]")
    return 0


def add_from_inputs_parser(sub: "argparse._SubParsersAction") -> None:
    """``demos from-inputs`` under ``rulka demos``."""
    p = sub.add_parser("from-inputs", help="play a race's TMInterface inputs through the game and save it whole")
    p.add_argument("inputs", metavar="INPUTS.txt",
                   help="TMInterface inputs script (`<time> press|rel <key>`, `<start>-<end> press <key>`)")
    p.add_argument("--out", required=True, help="the demonstration set's folder")
    p.add_argument("--port", type=int, default=8478,
                   help="the port of the game running TMInterface with the rulka_link plugin (default 8478)")
    p.add_argument("--launch", action="store_true",
                   help="launch a game on --port with the TMI_* settings (.env), as a training run does; "
                        "stopped after")
    p.add_argument("--map", default=None,
                   help="map the game loads (a map-cycle entry's map_path or short_name; default: the cycle's first)")
    p.add_argument("--line", default=None, metavar="LINE.npy",
                   help="the map's reference line, for a map not in the cycle")
    p.add_argument("-p", "--preset", default="trackmania_iqn_uni", help="the preset of the run that will learn from it")
    p.add_argument("--config", action="append", default=[], metavar="YAML", help="YAML files applied to the preset")
    p.add_argument("-cp", "--custom-parameter", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override the preset as the run will (e.g. environment.H_downsized=48)")
    p.add_argument("--running-speed", type=float, default=None, help="game speed (default performance.running_speed)")
    p.add_argument("--snap", action="store_true",
                   help="move key changes off the action grid to the nearest action instead of refusing the script")
    p.add_argument("--max-steps", type=int, default=None, help="cut the race after this many actions")
    p.set_defaults(func=cmd_demos_from_inputs)
