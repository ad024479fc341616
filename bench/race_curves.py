"""Training curves of a TrackMania run, drawn with matplotlib (the optional ``plots`` extra:
``pip install -e .[plots]``), with real axes: wall time in minutes, progress as a fraction of the
track, race times in seconds.

    plot_races(rows, baseline_s, "curve.png")

``rows`` are the rows of a run's ``races.csv`` (``csv.DictReader``: ``wall_time_s``, ``exploration``,
``finished``, ``race_time_s``, ``progress_fraction`` as strings), in any order.
"""
from __future__ import annotations

import os
from pathlib import Path

INSTALL_HINT = "pip install -e .[plots]"
GREEDY, EXPLORING, DRIVER = "#1e3cdc", "#28aa3c", "#d62728"


class PlottingUnavailable(RuntimeError):
    """matplotlib is not installed; the message names the extra that installs it."""


def require_matplotlib() -> None:
    """Raise :class:`PlottingUnavailable` (naming ``pip install -e .[plots]``) when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        raise PlottingUnavailable(
            f"training curves need matplotlib, an optional extra: run `{INSTALL_HINT}` "
            f"(from the repository root) and try again ({error})") from None


def plot_races(rows: list[dict[str, str]], baseline_s: float, png: str | Path, title: str | None = None) -> None:
    """Two panels against wall time (minutes) saved to ``png``: the progress of every race (top, 0 to 1,
    1 = the finish line) and the race time of finished races (bottom, seconds) beside the tuned
    classical driver's ``baseline_s`` (a red line). Blue: greedy races; green: exploring races."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg", force=True)  # files only: no display needed
    import matplotlib.pyplot as plt

    races = [(float(r["wall_time_s"]) / 60, r["exploration"] != "0", r["finished"] == "1",
              float(r["race_time_s"]), min(max(float(r["progress_fraction"]), 0.0), 1.0)) for r in rows]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.4), sharex=True, dpi=100)
    for exploring, color, label in ((True, EXPLORING, "exploring"), (False, GREEDY, "greedy")):
        mine = [race for race in races if race[1] == exploring]
        top.scatter([m for m, *_ in mine], [race[4] for race in mine], s=4, color=color, label=f"{label} race")
        done = [race for race in mine if race[2]]
        bottom.scatter([race[0] for race in done], [race[3] for race in done], s=9, color=color,
                       label=f"{label} race")
    bottom.axhline(baseline_s, color=DRIVER, linewidth=1.2, label=f"tuned classical driver {baseline_s:.2f} s")
    top.set_ylim(-0.02, 1.05)
    top.set_ylabel("progress along the track\n(1 = finish line)")
    top.set_title("progress of each race")
    finished_times = [race[3] for race in races if race[2]] + [baseline_s]
    bottom.set_ylim(min(finished_times) * 0.9, max(finished_times) * 1.1)
    bottom.set_ylabel("race time, s")
    bottom.set_title("race time of finished races")
    bottom.set_xlabel("wall time, minutes")
    bottom.set_xlim(left=0)
    for axis in (top, bottom):
        axis.grid(True, alpha=0.3)
        axis.legend(loc="best", fontsize=8, markerscale=2)
    figure.suptitle(title or f"rulka -p trackmania_iqn_sim, {os.cpu_count()} CPU cores, no GPU", fontsize=10)
    figure.tight_layout()
    figure.savefig(png)
    plt.close(figure)
