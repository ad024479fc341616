"""Train trackmania_iqn_sim for a fixed wall-time budget and compare its best greedy race time with
the classical baseline driver's on the same track.

    python bench/trackmania_vs_baseline.py --minutes 30 [--track short] [--seed 0] [--out DIR]
    python bench/trackmania_vs_baseline.py --summarize RUN_DIR --minutes 30   # a finished run's first 30 min

Prints the baseline time, the agent's best finished time (greedy map-cycle runs, and any run), the
ratio agent / baseline (below 1.0: the agent beats the classical driver), when the agent first
finished, and writes a PNG of progress and race time against wall time.
"""
from __future__ import annotations

import argparse
import csv
import math
import tempfile
import threading
from pathlib import Path

from environments.trackmania.baseline import run_baseline
from rulka.presets import load_graph_manager


def plot(rows: list[dict], baseline_s: float, png: Path) -> None:
    """Two panels against wall time: the progress of every race (top) and the race time of finished
    races next to the baseline driver's (bottom). Blue: greedy races; green: exploring races."""
    from PIL import Image, ImageDraw

    width, panel, margin = 900, 230, 55
    image = Image.new("RGB", (width, 2 * panel + 2 * margin), "white")
    draw = ImageDraw.Draw(image)
    t_max = max(float(r["wall_time_s"]) for r in rows) or 1.0
    times = [float(r["race_time_s"]) for r in rows if r["finished"] == "1"] + [baseline_s]
    y_max = max(times) * 1.15

    def xy(t: float, fraction: float, top: int) -> tuple[float, float]:
        return margin + (width - 2 * margin) * t / t_max, top + panel * (1 - fraction)

    tops = (margin // 2 + 10, margin // 2 + panel + margin)
    for top, title in zip(tops, ("progress along the track (1 = finish line) of each race",
                                 "race time of finished races, s (red: classical baseline driver)")):
        draw.rectangle([margin, top, width - margin, top + panel], outline="black")
        draw.text((margin, top - 14), title + "   blue: greedy, green: exploring", fill="black")
    draw.text((4, tops[0]), "1.0", fill="black")
    draw.text((4, tops[0] + panel - 10), "0", fill="black")
    draw.text((4, tops[1]), f"{y_max:.0f} s", fill="black")
    draw.text((4, tops[1] + panel - 10), "0 s", fill="black")
    y_base = xy(0, baseline_s / y_max, tops[1])[1]
    draw.line([margin, y_base, width - margin, y_base], fill="red")
    draw.text((width - margin - 150, y_base - 13), f"baseline {baseline_s:.2f} s", fill="red")
    for r in rows:
        t = float(r["wall_time_s"])
        color = (30, 60, 220) if r["exploration"] == "0" else (40, 170, 60)
        x, y = xy(t, min(max(float(r["progress_fraction"]), 0.0), 1.0), tops[0])
        draw.ellipse([x - 1.5, y - 1.5, x + 1.5, y + 1.5], fill=color)
        if r["finished"] == "1":
            x, y = xy(t, float(r["race_time_s"]) / y_max, tops[1])
            draw.ellipse([x - 2.5, y - 2.5, x + 2.5, y + 2.5], fill=color)
    draw.text((margin, tops[1] + panel + 6), f"wall time 0 .. {t_max / 60:.1f} min (rulka -p trackmania_iqn_sim, "
              "2 CPU cores, no GPU)", fill="black")
    image.save(png)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--track", default="short")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="run folder (default: a temporary folder)")
    parser.add_argument("--summarize", metavar="RUN_DIR", default=None,
                        help="do not train: summarise the first --minutes of an existing run's races.csv")
    args = parser.parse_args()

    baseline_s = run_baseline(args.track).race_time_s
    if args.summarize:
        report(Path(args.summarize), baseline_s, args)
        return
    graph_manager = load_graph_manager("trackmania_iqn_sim")
    for entry in graph_manager.config.map_cycle.entries:
        entry.map_path = entry.short_name = args.track
    run_dir = Path(args.out or tempfile.mkdtemp(prefix="rulka_bench_"))
    graph_manager.create(run_dir, "cpu", args.seed)
    timer = threading.Timer(args.minutes * 60, lambda: setattr(graph_manager, "stop_requested", True))
    timer.start()
    try:
        graph_manager.improve(show_progress=False)
    finally:
        timer.cancel()
        graph_manager.close()

    report(run_dir, baseline_s, args)


def report(run_dir: Path, baseline_s: float, args: argparse.Namespace) -> None:
    rows = [r for r in csv.DictReader((run_dir / "races.csv").open())
            if float(r["wall_time_s"]) <= args.minutes * 60 and r["map"] == args.track]
    finished = [r for r in rows if r["finished"] == "1"]
    greedy = [r for r in finished if r["exploration"] == "0"]
    best_any = min((float(r["race_time_s"]) for r in finished), default=math.inf)
    best_greedy = min((float(r["race_time_s"]) for r in greedy), default=math.inf)
    steps = rows[-1]["env_steps"] if rows else 0
    print(f"track {args.track}: baseline driver {baseline_s:.2f} s")
    print(f"training: first {args.minutes:.0f} min of wall time, {steps} actions, {len(rows)} races, run folder {run_dir}")
    if finished:
        first = finished[0]
        print(f"first finish after {float(first['wall_time_s']) / 60:.1f} min ({first['env_steps']} actions)")
        print(f"finished races: {len(finished)} ({len(greedy)} greedy)")
    if greedy:
        print(f"first greedy finish after {float(greedy[0]['wall_time_s']) / 60:.1f} min ({greedy[0]['env_steps']} actions)")
    for label, pool in (("race", finished), ("greedy race", greedy)):
        faster = [r for r in pool if float(r["race_time_s"]) < baseline_s]
        if faster:
            print(f"first {label} faster than the baseline after {float(faster[0]['wall_time_s']) / 60:.1f} min "
                  f"({faster[0]['race_time_s']} s, {faster[0]['env_steps']} actions)")
    print(f"agent best greedy race: {best_greedy:.2f} s   ratio agent/baseline {best_greedy / baseline_s:.3f}")
    print(f"agent best race (any):  {best_any:.2f} s   ratio agent/baseline {best_any / baseline_s:.3f}")
    if rows:
        plot(rows, baseline_s, run_dir / "curve.png")
        print(f"curve: {run_dir / 'curve.png'}")


if __name__ == "__main__":
    main()
