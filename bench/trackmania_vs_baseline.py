"""Train trackmania_iqn_sim on several tracks and seeds for a wall-time budget each, and compare it
with the classical driver, shipped and tuned (``rulka baseline --tune``).

    python bench/trackmania_vs_baseline.py [--minutes 30] [--rows short:0,short:1,...] [--out DIR] [-cp K=V ...]
    python bench/trackmania_vs_baseline.py --seeds 3 [--tracks short,medium,technical,procedural:1] [--out DIR]
    python bench/trackmania_vs_baseline.py --summarize RUN_DIR [RUN_DIR ...] [--minutes 30] [--windows 3]
    python bench/trackmania_vs_baseline.py --rows medium:0 --minutes 15 --init-from RUNS/short_seed0 --out DIR

Default rows: ``short`` with seeds 0, 1, 2, then ``medium``, ``technical``, ``procedural:1`` and
``procedural:2`` with seed 0; each trains for ``--minutes`` of wall time. One table row per run: the
wall time to the agent's first finish, to its first race faster than the shipped driver and than the
tuned driver (any race, exploring or greedy), and the best greedy race time divided by the tuned
driver's (below 1: the agent beats it). Each run folder keeps its ``races.csv`` and a ``curve.png``.
``--summarize`` prints the table again from run folders already trained (their track from the run's
``config_snapshot.yaml``, their seed from the folder's name), without training.
``--init-from`` (a run folder, checkpoint or export) starts every row's networks from trained weights,
as ``rulka --init-from`` does (the transfer bench of docs/benchmarks.md: ``short`` for 15 minutes, then
``medium`` from scratch and from the ``short`` run); the table's ``init from`` column names the source.
Goal (issue 11): on ``short`` a ratio <= 0.97 within 30 minutes in 3 of 3 seeds on 2 CPU cores;
every other track finished within 30 minutes. Under the table: how each run's races ended, and for
the races after the budget's midpoint the share that ended at a missed gate (issue 23: under 20 %).
``--windows M`` adds, per run, the median of its finished greedy races in each M minutes of wall time
(whether a run still improved at its end, or stopped improving early).

References (issue 45): the line-following driver tuned by ``rulka baseline --tune`` and the racing-line
driver tuned there too (environments/trackmania/tools/racing_line.py; it needs scipy, the ``tune``
extra: without it the racing-line columns print ``-``). ``--seeds N`` trains seeds 0..N-1 of every
track of ``--tracks`` (default ``short,medium,technical,procedural:1`` and the held-out
``procedural:13``, ``procedural:14``), one run at a time. Under the
table (for ``--summarize`` too), one line per track over its seeds: the median, best and worst of each
seed's best greedy race, in s and over both references; the minute each seed first beat each
reference (any race, as the table's columns); and per seed the share of the races after the budget's
midpoint (minute 15 of 30) that ended at a missed gate (issue 45's goal: under 5 %).
"""
from __future__ import annotations

import argparse
import csv
import math
import re
import statistics
import sys
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from race_curves import PlottingUnavailable, plot_races, require_matplotlib  # noqa: E402

from environments.trackmania.tools.baseline import run_baseline, tune_baseline
from rulka.config import apply_overrides
from rulka.machine import describe_machine, run_machines_line
from rulka.presets import load_graph_manager

PRESET = "trackmania_iqn_sim"
DEFAULT_ROWS = "short:0,short:1,short:2,medium:0,technical:0,procedural:1:0,procedural:2:0"
#: The tracks of ``--seeds N`` (issue 45's table). ``procedural:13`` and ``procedural:14`` are its held-out
#: tracks, written down here on 2026-12-05 before any run on them: no default was chosen watching them.
DEFAULT_TRACKS = "short,medium,technical,procedural:1,procedural:13,procedural:14"


def plot(rows: list[dict], baseline_s: float, png: Path) -> None:
    """The run's training curves (bench/race_curves.py, matplotlib): the progress of every race and the
    race time of finished races next to the tuned baseline driver's, against wall time. Without
    matplotlib (``--summarize`` does not need it) the curve is left out and stderr says why."""
    try:
        plot_races(rows, baseline_s, png)
    except PlottingUnavailable as error:
        print(f"{png} not drawn: {error}", file=sys.stderr)


def parse_rows(spec: str) -> list[tuple[str, int]]:
    """``"short:0,procedural:1:0"`` -> [("short", 0), ("procedural:1", 0)]: the last field is the seed."""
    rows = []
    for item in spec.split(","):
        track, _, seed = item.strip().rpartition(":")
        if not track or not seed.isdigit():
            raise SystemExit(f"bad row {item!r}: expected TRACK:SEED, e.g. short:0 or procedural:1:0")
        rows.append((track, int(seed)))
    return rows


def seed_rows(tracks: str, seeds: int) -> list[tuple[str, int]]:
    """``"short,procedural:1"``, 2 -> [("short", 0), ("short", 1), ("procedural:1", 0), ("procedural:1", 1)]."""
    names = [t.strip() for t in tracks.split(",") if t.strip()]
    if seeds < 1 or not names:
        raise SystemExit(f"--seeds {seeds} --tracks {tracks!r}: give at least one seed and one track, e.g. "
                         f"--seeds 3 --tracks {DEFAULT_TRACKS}")
    return [(track, seed) for track in names for seed in range(seeds)]


@dataclass
class References:
    """The classical drivers on one track, race times in s: the line-following driver at its shipped
    margins and tuned, and the racing-line driver tuned (NaN when it could not run: ``racing_setting``
    says why) with the speed-profile bound of its line."""

    shipped_s: float
    tuned_s: float
    tuned_setting: str
    racing_s: float = math.nan
    racing_setting: str = "not run"
    racing_bound_s: float = math.nan


def references(track: str) -> References:
    shipped = run_baseline(track)
    tuned = tune_baseline(track)
    refs = References(shipped.race_time_s if shipped.finished else math.inf, tuned.race_time_s, str(tuned.margins))
    try:
        from environments.trackmania.tools.racing_line import tune_racing_line

        racing = tune_racing_line(track)
    except (ImportError, ValueError) as error:
        refs.racing_setting = f"not run: {error}"
    else:
        refs.racing_s, refs.racing_bound_s = racing.race_time_s, racing.bound_s
        refs.racing_setting = str(racing.margins)
    return refs


def require_racing_line() -> None:
    """Refuse (before minutes of training) when the racing-line reference cannot run: scipy is missing."""
    try:
        from environments.trackmania.tools.racing_line import _scipy

        _scipy("optimize")
    except ImportError as error:
        raise SystemExit(f"the table's racing-line reference: {error}") from None


def _seconds(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "-"


def _ratio(value: float, reference: float) -> str:
    return f"{value / reference:.3f}" if math.isfinite(value) and math.isfinite(reference) else "-"


def train(track: str, seed: int, minutes: float, run_dir: Path, overrides: list[str],
          init_from: str | None = None) -> None:
    """trackmania_iqn_sim on ``track`` (every map-cycle entry) for ``minutes`` of wall time, with the
    ``-cp SECTION.KEY=VALUE`` overrides of the command line; with ``init_from`` (a run folder,
    checkpoint or export) its networks start from those weights, as ``rulka --init-from`` does."""
    graph_manager = load_graph_manager(PRESET)
    graph_manager.config = apply_overrides(graph_manager.config, [], overrides)
    for entry in graph_manager.config.map_cycle.entries:
        entry.map_path = entry.short_name = track
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run_info.yaml").write_text(yaml.safe_dump({"preset": PRESET, "seed": seed, "device": "cpu",
                                                                "machine": describe_machine()}))
    graph_manager.create(run_dir, "cpu", seed)
    if init_from:
        from rulka.export import init_networks_from

        init_networks_from(graph_manager, init_from)
    improve_for(graph_manager, minutes)


def improve_for(graph_manager, minutes: float) -> None:
    """Train a created graph manager for ``minutes`` of wall time, then close it."""
    timer = threading.Timer(minutes * 60, lambda: setattr(graph_manager, "stop_requested", True))
    timer.start()
    try:
        graph_manager.improve(show_progress=False)
    finally:
        timer.cancel()
        graph_manager.close()


def races(run_dir: Path, map_name: str, minutes: float) -> list[dict[str, str]]:
    """A run's races.csv rows on ``map_name`` in the first ``minutes`` of wall time, in the file's order."""
    with (run_dir / "races.csv").open(newline="") as f:
        return [r for r in csv.DictReader(f) if float(r["wall_time_s"]) <= minutes * 60 and r["map"] == map_name]


@dataclass
class SeedStats:
    """One run's numbers for the per-track lines: its best greedy race (s, inf: none), the minute (wall
    time) its first race beat each reference (None: never), and after the budget's midpoint how many
    races there were and the share (0-1) that ended at a missed gate."""

    best_greedy_s: float
    beats_tuned_min: float | None
    beats_racing_min: float | None
    late_races: int
    late_missed_share: float


def _first_minute(pool: list[dict], below: float = math.inf) -> float | None:
    hits = [r for r in pool if float(r["race_time_s"]) < below]
    return float(hits[0]["wall_time_s"]) / 60 if hits else None


def _minute(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "-"


def _missed_gate(reason: str) -> bool:
    return reason.startswith("missed_")


def summarize(run_dir: Path, map_name: str, minutes: float, refs: References) -> dict:
    """One table row from a run's races.csv (its races on ``map_name`` in the first ``minutes`` of wall time);
    its ``stats`` (:class:`SeedStats`) feed the per-track lines."""
    rows = races(run_dir, map_name, minutes)
    finished = [r for r in rows if r["finished"] == "1"]
    greedy = [r for r in finished if r["exploration"] == "0"]
    best_greedy = min((float(r["race_time_s"]) for r in greedy), default=math.inf)
    ended = Counter(r["end_reason"] for r in rows)
    late = [r for r in rows if float(r["wall_time_s"]) > minutes * 30]
    late_ended = Counter(r["end_reason"] for r in late)
    stats = SeedStats(best_greedy, _first_minute(finished, refs.tuned_s), _first_minute(finished, refs.racing_s),
                      len(late), sum(_missed_gate(r["end_reason"]) for r in late) / len(late) if late else math.nan)
    if rows:
        plot(rows, refs.tuned_s, run_dir / "curve.png")
    return {
        "actions": rows[-1]["env_steps"] if rows else "0", "races": str(len(rows)), "finished": str(len(finished)),
        "first finish (min)": _minute(_first_minute(finished)),
        "beats shipped (min)": _minute(_first_minute(finished, refs.shipped_s)),
        "beats tuned (min)": _minute(stats.beats_tuned_min), "beats racing (min)": _minute(stats.beats_racing_min),
        "best greedy (s)": _seconds(best_greedy), "best greedy / tuned": _ratio(best_greedy, refs.tuned_s),
        "best greedy / racing": _ratio(best_greedy, refs.racing_s),
        "ended": ", ".join(f"{reason} {n}" for reason, n in ended.most_common()),
        "late": f"after minute {minutes / 2:g}: {late_summary(late_ended)}",
        "stats": stats,
    }


def late_summary(ended: Counter) -> str:
    """How the races of the second half ended: the share at a missed gate (``missed_checkpoint_K_of_N``,
    ``missed_finish_gate``: the goal of issue 23 is under 20 %), the share held at a checkpoint passed
    too far from it (``far_from_checkpoint_K_of_N``), finished, and every reason."""
    total = sum(ended.values())
    if not total:
        return "no races"

    def share(prefix: str) -> str:
        return f"{100 * sum(n for reason, n in ended.items() if reason.startswith(prefix)) / total:.0f} %"

    return (f"{total} races, {share('missed_')} at a missed gate, {share('far_from_checkpoint')} held far from a "
            f"checkpoint, {share('finished')} finished ({', '.join(f'{r} {n}' for r, n in ended.most_common())})")


def greedy_medians(run_dir: Path, map_name: str, minutes: float, window: float) -> str:
    """The median time (s) of the finished greedy races on ``map_name`` in each ``window`` minutes of
    the first ``minutes``, with how many there were: ``0-3: 25.55 s (19) | 3-6: - | ...``."""
    times: dict[int, list[float]] = {}
    for r in races(run_dir, map_name, minutes):
        wall_min = float(r["wall_time_s"]) / 60
        if r["exploration"] == "0" and r["finished"] == "1":
            times.setdefault(min(int(wall_min // window), math.ceil(minutes / window) - 1), []).append(
                float(r["race_time_s"]))
    cells = []
    for i in range(math.ceil(minutes / window)):
        span = f"{i * window:g}-{min((i + 1) * window, minutes):g}"
        got = times.get(i)
        cells.append(f"{span}: {statistics.median(got):.2f} s ({len(got)})" if got else f"{span}: -")
    return " | ".join(cells)


def table_row(map_name: str, seed: str, minutes: float, refs: References, run_dir: Path) -> dict:
    init = run_dir / "init_from.yaml"
    source = (yaml.safe_load(init.read_text()) or {}).get("source", "?") if init.is_file() else "-"
    info = run_dir / "run_info.yaml"
    machines = run_machines_line((yaml.safe_load(info.read_text()) or {}) if info.is_file() else {})
    return {"track": map_name, "seed": seed, "init from": Path(source).name if source != "-" else "-",
            "machine": machines,
            "minutes": f"{minutes:g}", "shipped (s)": f"{refs.shipped_s:.2f}",
            "tuned (s)": f"{refs.tuned_s:.2f}", "racing (s)": _seconds(refs.racing_s),
            **summarize(run_dir, map_name, minutes, refs)}


@dataclass
class RunFolder:
    """A bench run folder: its map's name (the map cycle's ``short_name``, the ``map`` of its
    races.csv), the track the driver races for the references (what the simulator raced: the
    entry's ``reference_line_path`` or ``map_path``, a built-in name or a ``.npy`` path) and its seed."""

    path: Path
    map_name: str
    track: str
    seed: str


def run_folder(run_dir: Path) -> RunFolder:
    """The map a bench run trained on (its config snapshot's map cycle) and its seed (the
    ``TRACK_seedN`` folder name this bench gives it; ``?`` for a folder named otherwise)."""
    snapshot = run_dir / "config_snapshot.yaml"
    if not (run_dir / "races.csv").is_file() or not snapshot.is_file():
        raise SystemExit(f"{run_dir} is not a training run folder (it needs races.csv and config_snapshot.yaml); "
                         "pass the folders this bench made, e.g. RUNS/short_seed0")
    entries = (yaml.safe_load(snapshot.read_text()) or {}).get("map_cycle", {}).get("entries") or []
    maps = {(str(e.get("short_name")), str(e.get("reference_line_path") or e.get("map_path"))) for e in entries}
    if len(maps) != 1:
        raise SystemExit(f"{run_dir} trained on {sorted(name for name, _ in maps) or 'no map'}; "
                         "this bench summarizes one-track runs")
    seed = re.search(r"_seed(\d+)$", run_dir.name)
    (map_name, track), = maps
    return RunFolder(run_dir, map_name, track, seed.group(1) if seed else "?")


COLUMNS = ("track", "seed", "init from", "minutes", "shipped (s)", "tuned (s)", "racing (s)", "actions", "races",
           "finished", "first finish (min)", "beats shipped (min)", "beats tuned (min)", "beats racing (min)",
           "best greedy (s)", "best greedy / tuned", "best greedy / racing")


def _spread(values: list[float], fmt) -> str:
    """``median (best .. worst)`` of per-seed values where lower is better (inf: a seed without one)."""
    return f"{fmt(statistics.median(values))} ({fmt(min(values))} .. {fmt(max(values))})"


def seed_lines(rows: list[dict], minutes: float) -> list[str]:
    """Per track (rows grouped by track, in order): over its seeds the median (best .. worst) of the best
    greedy race in s and over both references, the minute each seed first beat each reference, and each
    seed's share of races ending at a missed gate after the budget's midpoint."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["track"], []).append(row)
    lines = []
    for track, group in groups.items():
        stats = [row["stats"] for row in group]
        refs = group[0]
        best = [st.best_greedy_s for st in stats]
        tuned, racing = float(refs["tuned (s)"]), float(refs["racing (s)"]) if refs["racing (s)"] != "-" else math.nan
        seeds = ", ".join(row["seed"] for row in group)
        beats = "; ".join(
            f"seed {row['seed']} tuned {_minute(row['stats'].beats_tuned_min)}, racing "
            f"{_minute(row['stats'].beats_racing_min)}" for row in group)
        missed = ", ".join(
            f"seed {row['seed']} " + (f"{100 * row['stats'].late_missed_share:.1f} % of {row['stats'].late_races}"
                                      if row["stats"].late_races else "no races") for row in group)
        lines += [
            f"{track}, {len(group)} seed(s) ({seeds}): best greedy race median (best .. worst) "
            f"{_spread(best, _seconds)} s; "
            f"/ tuned line-following ({tuned:.2f} s) {_spread(best, lambda v: _ratio(v, tuned))}; "
            f"/ racing line ({_seconds(racing)} s) {_spread(best, lambda v: _ratio(v, racing))}",
            f"  first beat the references at minute: {beats}",
            f"  races after minute {minutes / 2:g} ended at a missed gate: {missed}",
        ]
    return lines


def print_table(rows: list[dict], minutes: float = 30.0) -> None:
    """The table, then how each row's races ended (most frequent end first), then the per-track lines
    over seeds (:func:`seed_lines`)."""
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "|".join("---" for _ in COLUMNS) + "|")
    for row in rows:
        print("| " + " | ".join(row.get(c, "") for c in COLUMNS) + " |", flush=True)
    for row in rows:
        print(f"races of {row['track']} seed {row['seed']} ended: {row['ended']}")
        print(f"  {row['late']}")
        print(f"  machine: {row['machine']}")
    print("per track, over its seeds:")
    for line in seed_lines(rows, minutes):
        print(line)


def print_windows(runs: list[tuple[str, str, Path]], minutes: float, window: float | None) -> None:
    """Under the table with ``--windows``: each run's (map, seed, folder) greedy medians per window."""
    if not window:
        return
    print(f"median greedy race per {window:g} minutes (finished greedy races in the window):")
    for map_name, seed, run_dir in runs:
        print(f"  {map_name} seed {seed}: {greedy_medians(run_dir, map_name, minutes, window)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0, help="wall-time budget per row (default 30)")
    parser.add_argument("--rows", default=None, help=f"TRACK:SEED,... (default {DEFAULT_ROWS})")
    parser.add_argument("--seeds", type=int, default=None, metavar="N",
                        help="train seeds 0..N-1 of every track of --tracks (instead of --rows)")
    parser.add_argument("--tracks", default=DEFAULT_TRACKS,
                        help=f"with --seeds: TRACK,... (default {DEFAULT_TRACKS})")
    parser.add_argument("--out", default=None, help="parent folder of the run folders (default: a temporary one)")
    parser.add_argument("--summarize", metavar="RUN_DIR", nargs="+", default=None,
                        help="do not train: the table from run folders this bench made (their races.csv)")
    parser.add_argument("--windows", type=float, default=None, metavar="MINUTES",
                        help="also print each run's median greedy race time per MINUTES of wall time")
    parser.add_argument("-cp", "--custom-parameter", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a preset parameter as `rulka -cp` does, e.g. -cp performance.gpu_collectors_count=1")
    parser.add_argument("--init-from", metavar="RUN_DIR|CHECKPOINT|EXPORT_DIR", default=None,
                        help="start every row's networks from these weights (rulka --init-from): a transfer run")
    args = parser.parse_args()

    cache: dict[str, References] = {}

    def refs_of(track: str) -> References:
        if track not in cache:
            cache[track] = references(track)
            refs = cache[track]
            print(f"{track}: shipped driver {refs.shipped_s:.2f} s, tuned driver {refs.tuned_s:.2f} s "
                  f"({refs.tuned_setting}), racing-line driver {_seconds(refs.racing_s)} s ({refs.racing_setting}; "
                  f"speed-profile bound of its line {_seconds(refs.racing_bound_s)} s)", flush=True)
        return cache[track]

    if args.summarize:
        runs = [run_folder(Path(d)) for d in args.summarize]
        print_table([table_row(run.map_name, run.seed, args.minutes, refs_of(run.track), run.path) for run in runs],
                    args.minutes)
        print_windows([(run.map_name, run.seed, run.path) for run in runs], args.minutes, args.windows)
        return
    if args.seeds is not None and args.rows is not None:
        raise SystemExit("give --rows TRACK:SEED,... or --seeds N [--tracks ...], not both")
    plan = seed_rows(args.tracks, args.seeds) if args.seeds is not None else parse_rows(args.rows or DEFAULT_ROWS)
    try:
        require_matplotlib()  # each run draws its curve.png: refused before minutes of training
    except PlottingUnavailable as error:
        raise SystemExit(str(error)) from None
    require_racing_line()
    out = Path(args.out or tempfile.mkdtemp(prefix="rulka_bench_"))
    table, trained = [], []
    for track, seed in plan:
        refs = refs_of(track)
        run_dir = out / f"{track.replace(':', '_')}_seed{seed}"
        train(track, seed, args.minutes, run_dir, args.custom_parameter, args.init_from)
        table.append(table_row(track, str(seed), args.minutes, refs, run_dir))
        trained.append((track, str(seed), run_dir))
        print(f"done: {track} seed {seed} ({run_dir})", flush=True)
    print(f"run folders: {out}")
    print_table(table, args.minutes)
    print_windows(trained, args.minutes, args.windows)


if __name__ == "__main__":
    main()
