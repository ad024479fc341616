"""Linesight's own training and rulka's ``trackmania_iqn_uni`` raced side by side on the same stand-in games.

    python bench/vs_linesight_training.py LINESIGHT_CHECKOUT [--minutes 60] [--tracks short,hockolicious]
        [--games 4] [--repeats 1] [--out DIR] [--venv DIR] [--sides linesight,rulka] [--cp K=V] [--keep]

For each track and repeat, one side after the other (the order alternates between repeats):

* **linesight**: ``scripts/train.py`` of a temporary copy of LINESIGHT_CHECKOUT (its learner and its
  collector processes), patched as ``bench/linesight_patches.py`` lists (CPU device, no pinned memory,
  float32 buffers, no compile; shims for the X11 window lookup and the ``.Gbx`` reads), with its
  ``user_config`` / ``config`` values set for the map cycle (4 exploring races, 1 greedy, as the
  stand-in preset), ``--games`` games and the stand-in configuration's CPU network sizes (48 x 64
  frames, 128-wide float and dense heads, iqn_k 8). It runs in its own virtual environment (``--venv``,
  created on first use with :data:`LINESIGHT_REQUIREMENTS`). Its games are stand-in games running
  Linesight's own ``Python_Link.as`` (the one ``train.py`` copies to its plugin folder), started by the
  stand-in's own ``launch.sh`` in its detached mode (:func:`linesight_launch_script`,
  :func:`linesight_game_environment`).
* **rulka**: ``rulka -p trackmania_iqn_uni --config presets/trackmania_iqn_uni_standin.yaml`` with the
  same track and ``performance.gpu_collectors_count = --games``.

Each side runs ``--minutes`` from its start, then gets SIGINT (both stop on it) and 120 s to exit.
Printed per side: actions, gradient updates, actions/s, updates/s, races (evaluation races), finished
races, first finish (minute), best race at minutes 15, 30 and 60 (``-`` past the end of the run), and
its processes alive after it ended; below the table, issue 42's goals as measured (best race at minute
60, the minute rulka matched Linesight's minute-60 best, the actions/s ratio). Races: Linesight's from
its TensorBoard logs, rulka's from its ``races.csv`` (see ``bench/linesight_logs.py``). Files in ``--out``: ``table.md``, ``summary.json``,
``races_<side>_<track>_r<repeat>.csv``, ``best_race.png``, and the logs of each side.

How the counts line up: both sides log every race they keep, exploring and greedy; a race counts as
"eval" on Linesight when its map-cycle entry is not exploring, on rulka when it is greedy and was not
played in heatup (rulka logs a greedy race played at random before learning starts as exploring).
Linesight logs every rollout its collectors send to the learner; rulka leaves out
races whose game failed ("race discarded" in its log). "best" is the best finished race of any kind on
both sides (what Linesight's ``alltime_min_ms`` and rulka's best runs keep).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import linesight_logs as logs  # noqa: E402
import linesight_patches as patches  # noqa: E402

STANDIN_YAML = ROOT / "presets" / "trackmania_iqn_uni_standin.yaml"
SHARED = ROOT / ".." / "shared"
#: Tracks of the table: stand-in track name, short name in both sides' logs, Linesight's reference line.
TRACKS = {
    "short": ("short", "short", ROOT / "environments" / "trackmania" / "tmi" / "standin" / "lines" / "short.npy"),
    "hockolicious": ("hockolicious", "hock", SHARED / "tracks" / "ESL-Hockolicious_0.5m_cl2.npy"),
}
#: The stand-in configuration's CPU network (presets/trackmania_iqn_uni_standin.yaml), in Linesight's names.
NETWORK = {"H_downsized": 48, "W_downsized": 64, "float_hidden_dim": 128, "dense_hidden_dimension": 128, "iqn_k": 8}
#: Linesight's dependencies (its requirements_pip.txt / requirements_conda.txt), at versions that install
#: and import with torch 2.13 on Python 3.11. Left out: torchvision (PyPI's wheel fails to import beside torch+cpu; see
#: linesight_patches), pygbx and python-libxdo (shims), readwritememory and pywin32 (Windows only).
LINESIGHT_REQUIREMENTS = (
    "torch==2.13.0", "torchrl==0.14.1", "tensordict==0.14.3", "hoptorch==0.1.4", "tminterface==1.0.2",
    "numba==0.68.1", "numpy==2.4.6", "scipy==1.17.1", "opencv-python-headless==5.1.0.95", "psutil==7.2.2",
    "joblib==1.6.0", "art==6.5", "prettytable==3.19.0", "matplotlib==3.11.2", "tensorboard==2.21.0",
)
MARKER = "RULKA_VS_LINESIGHT_ROW"  # in the environment of every process a side starts (games included)
STOP_GRACE_S = 120.0


class BenchError(RuntimeError):
    """Something the bench needs is missing; the message says what to do."""


# ----------------------------------------------------------------------------- Linesight's environment
def ensure_venv(folder: Path) -> Path:
    """Linesight's virtual environment in ``folder`` (created and filled on first use); returns its python."""
    python = folder / "bin" / "python"
    stamp = folder / "rulka_requirements.txt"
    wanted = "\n".join(LINESIGHT_REQUIREMENTS) + "\n"
    if python.exists() and stamp.is_file() and stamp.read_text() == wanted:
        return python
    print(f"vs_linesight: creating Linesight's virtual environment in {folder} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", *LINESIGHT_REQUIREMENTS],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"installing Linesight's dependencies into {folder} failed:\n{proc.stdout[-3000:]}\n"
                         f"{proc.stderr[-3000:]}")
    stamp.write_text(wanted)
    return python


# ----------------------------------------------------------------------------- games for Linesight
#: The stand-in's variables that make its ``launch.sh`` start Linesight's games (set for Linesight's
#: side only; removed from rulka's, whose own launcher needs the game in its place, not detached).
STANDIN_LAUNCH_VARIABLES = ("RULKA_STANDIN_PLUGIN", "RULKA_STANDIN_DETACH", "RULKA_STANDIN_PYTHON",
                            "RULKA_STANDIN_LOG", "RULKA_STANDIN_START_TIMEOUT_S", "RULKA_STANDIN_OPTIONS")
#: Seconds a game of Linesight's may take until its plugin listens (the stand-in's default is 60; two
#: cores shared with Linesight's learner and its other games start them slower).
GAME_START_TIMEOUT_S = 120


def linesight_launch_script(folder: Path) -> Path:
    """What Linesight's ``user_config.linux_launch_game_path`` points at: the stand-in's own
    ``environments/trackmania/tmi/standin/launch.sh``, which, with :func:`linesight_game_environment` in
    the environment of Linesight's processes (``os.system`` passes it on), keeps Linesight's contract:
    ``launch.sh PORT`` returns once the game's plugin listens, and the game is the new process named
    ``TmForever``. Makes the plugin folder Linesight's ``train.py`` copies ``Python_Link.as`` into."""
    from environments.trackmania.tmi.standin.build import LAUNCH_SCRIPT

    (folder / "TMInterface" / "Plugins").mkdir(parents=True, exist_ok=True)
    return Path(LAUNCH_SCRIPT)


def linesight_game_environment(folder: Path) -> dict[str, str]:
    """The stand-in's launch variables for Linesight's games (see docs/real_game.md, "Another plugin"):
    the plugin is the ``Python_Link.as`` that Linesight's ``train.py`` copies to its plugin folder
    (``target_python_link_path``, in ``folder``), the launch detaches the game and returns once it
    listens, the game's Python is this bench's (rulka's venv) and each game logs to
    ``folder/game_{port}.log`` (overwritten when Linesight relaunches that port). ``RULKA_STANDIN_OPTIONS``
    is emptied: the host's defaults run Linesight's plugin. ``PYTHONPATH`` is left as Linesight's side
    has it (its shims, then its copy): ``launch.sh`` puts rulka's repository before it, and the stand-in
    imports no module of those names."""
    return {"RULKA_STANDIN_PLUGIN": str(folder / "TMInterface" / "Plugins" / "Python_Link.as"),
            "RULKA_STANDIN_DETACH": "1",
            "RULKA_STANDIN_PYTHON": sys.executable,
            "RULKA_STANDIN_LOG": str(folder / "game_{port}.log"),
            "RULKA_STANDIN_START_TIMEOUT_S": str(GAME_START_TIMEOUT_S),
            "RULKA_STANDIN_OPTIONS": ""}


def checkpoint_positions(track_name: str):
    """World positions (N, 3) of the stand-in track's checkpoints (finish included), for the pygbx shim."""
    import numpy as np

    from environments.trackmania.tracks import get_track

    track = get_track(track_name)
    line = np.asarray(track.reference_line, dtype=float)
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(line, axis=0), axis=1))])
    cps = np.asarray(track.checkpoint_s, dtype=float)
    return np.stack([np.interp(cps, s, line[:, k]) for k in range(3)], axis=1)


def parse_values(items: list[str]) -> dict[str, str]:
    """``NAME=LITERAL`` items (``--linesight-value``) as config assignments; LITERAL must be a Python literal
    (number, string, tuple, list...), checked with ast.literal_eval: nothing else is written."""
    import ast

    out = {}
    for item in items:
        name, sep, literal = item.partition("=")
        try:
            if not sep or not name.strip().isidentifier():
                raise ValueError
            value = ast.literal_eval(literal.strip())
        except (ValueError, SyntaxError):
            raise BenchError(f"--linesight-value {item!r}: give NAME=LITERAL, e.g. "
                             "'memory_size_schedule=[(0, (50000, 2000))]'") from None
        out[name.strip()] = repr(value)
    return out


def prepare_linesight(checkout: Path, work: Path, track: str, games: int, base_port: int, run_name: str,
                      extra_values: dict[str, str] | None = None) -> Path:
    """A patched copy of ``checkout`` in ``work/linesight`` with this row's values; returns the copy."""
    import numpy as np

    stand_in_name, short_name, line = TRACKS[track]
    copy = work / "linesight"
    shutil.copytree(checkout, copy, ignore=shutil.ignore_patterns(".git", "tensorboard", "save", "__pycache__"))
    (copy / "save").mkdir(exist_ok=True)
    patches.apply_patches(copy)
    patches.write_shims(work / "shims")
    if not line.is_file():
        raise BenchError(f"the reference line of {track} is not at {line}")
    shutil.copyfile(line, copy / "maps" / line.name)
    tm_base = work / "TrackMania"
    challenges = tm_base / "Tracks" / "Challenges"
    challenges.mkdir(parents=True, exist_ok=True)
    with open(challenges / stand_in_name, "wb") as f:  # read by the pygbx shim (no .npy suffix added)
        np.save(f, checkpoint_positions(stand_in_name), allow_pickle=False)
    launch = linesight_launch_script(work)
    entry = f"({short_name!r}, {stand_in_name!r}, {line.name!r}, {{explo}}, True)"
    user_values = {
        "username": repr("standin"),
        "target_python_link_path": f"Path({str(work / 'TMInterface' / 'Plugins' / 'Python_Link.as')!r})",
        "trackmania_base_path": f"Path({str(tm_base)!r})",
        "base_tmi_port": str(base_port),
        "linux_launch_game_path": repr(str(launch)),
    }
    run_values = {
        "run_name": repr(run_name),
        "gpu_collectors_count": str(games),
        "map_cycle": f"[repeat({entry.format(explo=True)}, 4), repeat({entry.format(explo=False)}, 1)]",
        **{k: str(v) for k, v in NETWORK.items()},
        "conv_head_output_dim": str(patches.conv_output_dim(NETWORK["H_downsized"], NETWORK["W_downsized"])),
        "use_jit": "False",  # torch.compile of the network: see linesight_patches (compile)
        **(extra_values or {}),
    }
    patches.set_config_values(copy, user_values, run_values)
    return copy


# ----------------------------------------------------------------------------- processes
def marked_processes(token: str) -> dict[int, str]:
    """Live processes (pid -> name and the start of the command line) whose environment carries ``MARKER=token``."""
    from environments.trackmania.tmi.games.processes import list_processes, process_cmdline, process_environ

    return {p.pid: f"{p.name}: {process_cmdline(p.pid)[:70]}" for p in list_processes()
            if p.pid != os.getpid() and (process_environ(p.pid) or {}).get(MARKER) == token}


def stop(proc: subprocess.Popen, token: str) -> tuple[int | None, dict[int, str], int]:
    """SIGINT to ``proc``, up to STOP_GRACE_S for it to exit, then SIGKILL to its group; then count the
    processes carrying ``token`` (its own) still alive 5 s later, kill them and count again.
    Returns (exit status or None, own processes left by it (pid -> name), own processes alive after the clean-up)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this bench created (start_new_session)
            proc.wait(30)
    time.sleep(5.0)
    left = marked_processes(token)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(1.0)
    return proc.returncode, left, len(marked_processes(token))


@dataclass
class SideRun:
    races: list[logs.Race]
    actions: int
    updates: int | None
    minutes: float
    left_by_it: int
    alive_after: int
    exit_status: int | None
    note: str


def run_linesight(copy: Path, python: Path, work: Path, minutes: float, short_name: str, run_name: str) -> SideRun:
    token = uuid.uuid4().hex
    env = dict(os.environ, PYTHONPATH=f"{work / 'shims'}{os.pathsep}{copy}", PYTHONUNBUFFERED="1",
               OMP_NUM_THREADS="1", **linesight_game_environment(work), **{MARKER: token})
    env.pop("VIRTUAL_ENV", None)
    log_path = work / "linesight.log"
    started_at = time.time()
    with log_path.open("w") as log:
        proc = subprocess.Popen([str(python), "scripts/train.py"], cwd=copy, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + minutes * 60.0
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(1.0)
    except KeyboardInterrupt:  # the bench stopped by hand: stop the side too (it runs in its own session)
        stop(proc, token)
        raise
    ran_min = (time.time() - started_at) / 60.0
    died = proc.poll()
    status, left, alive = stop(proc, token)
    text = log_path.read_text(errors="replace")
    scalars = [s for f in logs.event_files(copy / "tensorboard") for s in logs.read_scalars(f)]
    races = logs.linesight_races(scalars, started_at, short_name)
    frames = [step for tag, step, _, _ in scalars if tag.startswith(("explo_race_time", "eval_race_time"))]
    note = f"exited by itself with status {died} before the end; " if died is not None else ""
    note += f"{text.count('Traceback')} tracebacks in its log; left by it: {sorted(left.values()) or 'nothing'}"
    return SideRun(races, max(frames, default=0), logs.linesight_updates(text), ran_min, len(left), alive, status, note)


def run_rulka(work: Path, track: str, games: int, minutes: float, seed: int, overrides: list[str]) -> SideRun:
    from environments.trackmania.tmi.standin.build import LAUNCH_SCRIPT
    from environments.trackmania.tmi.standin.ports import free_port_block
    from environments.trackmania.tmi.standin.tracks import write_track_files

    stand_in_name, short_name, _ = TRACKS[track]
    line, _ = write_track_files(stand_in_name, work / "lines")
    cycle = work / "map_cycle.yaml"
    entry = f"{{short_name: {short_name}, map_path: {stand_in_name}, reference_line_path: \"{line}\", fill_buffer: true, "
    cycle.write_text("map_cycle:\n  entries:\n"
                     f"    - {entry}is_exploration: true, repeat: 4}}\n"
                     f"    - {entry}is_exploration: false, repeat: 1}}\n")
    token = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k not in STANDIN_LAUNCH_VARIABLES}  # its games: rulka_link, in place
    env.update(TMI_LINUX_LAUNCH_SCRIPT=str(LAUNCH_SCRIPT), TMI_ACCOUNT_NAME="standin",
               TMI_BASE_PORT=str(free_port_block(4 * games + 8)), RULKA_STANDIN_PYTHON=sys.executable,
               PYTHONPATH=str(ROOT), **{MARKER: token})
    command = [sys.executable, "-m", "rulka.cli", "-p", "trackmania_iqn_uni", "--config", str(STANDIN_YAML),
               "--config", str(cycle), "-cp", f"performance.gpu_collectors_count={games}",
               *[a for o in overrides for a in ("-cp", o)],
               "--experiments-dir", str(work / "runs"), "-e", "rulka", "--max-steps", "1000000000",
               "--no-progress", "--seed", str(seed)]
    log_path = work / "rulka.log"
    races_csv = work / "runs" / "rulka" / "races.csv"
    seen: list[logs.Race] = []
    started_at = time.time()
    with log_path.open("w") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def poll() -> None:
        if races_csv.is_file():
            with races_csv.open() as f:
                rows = list(csv.DictReader(f))
            minute = (time.time() - started_at) / 60.0
            seen.extend(logs.rulka_race(row, minute) for row in rows[len(seen):] if row.get("race_time_s"))

    deadline = time.monotonic() + minutes * 60.0
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            poll()
            time.sleep(1.0)
    except KeyboardInterrupt:  # the bench stopped by hand: stop the side too (it runs in its own session)
        stop(proc, token)
        raise
    poll()
    ran_min = (time.time() - started_at) / 60.0
    died = proc.poll()
    status, left, alive = stop(proc, token)
    poll()  # races the learner wrote while stopping count at the minute it saw them
    updates, counters = rulka_updates(work / "runs" / "rulka")
    text = log_path.read_text(errors="replace")
    note = f"exited by itself with status {died} before the end; " if died is not None else ""
    note += f"counters at the stop: {counters}; " if counters else ""
    note += f"{text.count('Traceback')} tracebacks in its log; {text.count('race discarded')} races discarded; "
    note += f"left by it: {sorted(left.values()) or 'nothing'}"
    return SideRun(seen, max([r.actions for r in seen], default=0), updates, ran_min, len(left), alive, status, note)


def rulka_updates(run_dir: Path) -> tuple[int | None, dict | None]:
    """rulka's gradient updates at the stop: the counters of the final checkpoint (written on SIGINT), else
    the last ``RL/gradient_updates`` in TensorBoard (logged only once learning has started), else None."""
    from rulka.checkpoints import load_checkpoint

    last = run_dir / "checkpoints" / "last.pt"
    if last.is_file():
        try:
            counters = dict(load_checkpoint(last, "cpu")["agent"]["counters"])
            return int(counters["gradient_updates"]), counters
        except (OSError, KeyError, RuntimeError, ValueError):
            pass
    scalars = [s for f in logs.event_files(run_dir) for s in logs.read_scalars(f)]
    updates = logs.last_scalar(scalars, "RL/gradient_updates")
    return (None if updates is None else int(updates)), None


def _pair(summaries: list[logs.Summary], curves: dict[str, list[logs.Race]], track: str, repeat: int) -> tuple:
    """(Linesight's summary, its races, rulka's summary, its races) of one track and repeat."""
    found = {s.side: s for s in summaries if s.track == track and s.repeat == repeat}
    return (found["linesight"], curves[f"linesight {track} r{repeat}"], found["rulka"],
            curves[f"rulka {track} r{repeat}"])


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a checkout of Linesight-RL/linesight (never modified)")
    parser.add_argument("--minutes", type=float, default=60.0, help="minutes per side and row (default 60)")
    parser.add_argument("--tracks", default="short,hockolicious", help="comma-separated: short, hockolicious")
    parser.add_argument("--games", type=int, default=4, help="stand-in games per side (default 4, the uni preset's)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--sides", default="linesight,rulka", help="which sides to run (default both)")
    parser.add_argument("--seed", type=int, default=0, help="rulka's seed (Linesight seeds itself with 444)")
    parser.add_argument("--cp", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="an override for rulka's side (repeatable), e.g. performance.precision=float32 "
                             "(Linesight's side learns in float32 on the CPU)")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default: vs_linesight_<time>)")
    parser.add_argument("--venv", type=Path, default=Path.home() / ".cache" / "rulka" / "linesight_venv",
                        help="Linesight's virtual environment (created on first use)")
    parser.add_argument("--linesight-value", action="append", default=[], metavar="NAME=LITERAL",
                        help="set one more of Linesight's config values (repeatable; smoke tests only, e.g. "
                             "'memory_size_schedule=[(0, (50000, 2000))]' to learn sooner); shown in the table's command")
    parser.add_argument("--keep", action="store_true", help="keep the temporary work folders (copies, runs, logs)")
    args = parser.parse_args(argv)

    tracks = [t.strip() for t in args.tracks.split(",") if t.strip()]
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = [t for t in tracks if t not in TRACKS] + [s for s in sides if s not in ("linesight", "rulka")]
    if unknown or not tracks or not sides:
        parser.error(f"unknown or missing track/side {unknown}: tracks are {', '.join(TRACKS)}; sides linesight, rulka")
    checkout = args.checkout.resolve()
    if not (checkout / "scripts" / "train.py").is_file() or not (checkout / "config_files" / "config.py").is_file():
        parser.error(f"{checkout} is not a Linesight checkout (no scripts/train.py, config_files/config.py); "
                     "clone https://github.com/Linesight-RL/linesight")
    if args.minutes <= 0 or args.games < 1 or args.repeats < 1:
        parser.error("--minutes must be > 0, --games and --repeats >= 1")
    try:
        from environments.trackmania.tmi.standin.build import host_binary

        host_binary()
        if "hockolicious" in tracks and not TRACKS["hockolicious"][2].is_file():
            raise BenchError(f"the hockolicious row needs {TRACKS['hockolicious'][2]} (../shared/tracks)")
        extra_values = parse_values(args.linesight_value)
        python = ensure_venv(args.venv) if "linesight" in sides else None
    except (BenchError, RuntimeError, subprocess.CalledProcessError) as error:
        print(f"vs_linesight: {error}", file=sys.stderr)
        return 2

    out = (args.out or Path(f"vs_linesight_{time.strftime('%Y%m%d_%H%M%S')}")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    shown = " ".join(["python bench/vs_linesight_training.py", *(argv if argv is not None else sys.argv[1:])])
    print(f"command: {shown}\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
    summaries: list[logs.Summary] = []
    curves: dict[str, list[logs.Race]] = {}
    for track in tracks:
        for repeat in range(args.repeats):
            order = sides if repeat % 2 == 0 else sides[::-1]
            for side in order:
                work = Path(tempfile.mkdtemp(prefix=f"rulka_vs_linesight_{side}_{track}_"))
                print(f"[{time.strftime('%H:%M:%S')}] {track} r{repeat}: {side} for {args.minutes:g} min in {work}",
                      flush=True)
                if side == "linesight":
                    from environments.trackmania.tmi.standin.ports import free_port_block

                    run_name = f"vs_rulka_{track}_r{repeat}"
                    copy = prepare_linesight(checkout, work, track, args.games, free_port_block(args.games + 4),
                                             run_name, extra_values)
                    result = run_linesight(copy, python, work, args.minutes, TRACKS[track][1], run_name)
                    logs_to_keep = [work / "linesight.log", *work.glob("game_*.log")]
                else:
                    result = run_rulka(work, track, args.games, args.minutes, args.seed, args.cp)
                    logs_to_keep = [work / "rulka.log", work / "runs" / "rulka" / "races.csv"]
                for log in logs_to_keep:
                    if log.is_file():
                        shutil.copyfile(log, out / f"{side}_{track}_r{repeat}_{log.name}")
                summary = logs.summarize(side, track, repeat, result.minutes, result.races, result.actions,
                                         result.updates, result.alive_after, result.left_by_it,
                                         f"exit status {result.exit_status}; {result.note}")
                summaries.append(summary)
                curves[f"{side} {track} r{repeat}"] = result.races
                with (out / f"races_{side}_{track}_r{repeat}.csv").open("w", newline="") as f:
                    writer = csv.writer(f)
                    writer.writerow(["minute", "actions", "exploration", "finished", "race_time_s"])
                    for r in result.races:
                        writer.writerow([f"{r.minute:.3f}", r.actions, int(r.exploration), int(r.finished),
                                         f"{r.race_time_s:.3f}"])
                print(f"  {side}: {summary.races} races ({summary.finished} finished), {summary.actions} actions, "
                      f"{summary.updates} updates in {summary.minutes:.1f} min; {summary.note}; own processes "
                      f"left by it {summary.left_by_it}, alive after clean-up {summary.alive_after}", flush=True)
                if not args.keep:
                    shutil.rmtree(work, ignore_errors=True)
    text = logs.table(summaries)
    goals = [line for track in tracks for repeat in range(args.repeats)
             if (f"linesight {track} r{repeat}" in curves and f"rulka {track} r{repeat}" in curves)
             for line in logs.goal_lines(track, repeat, *_pair(summaries, curves, track, repeat))]
    text += ("\n\n" + "\n".join(goals)) if goals else ""
    print("\n" + text, flush=True)
    (out / "table.md").write_text(f"command: `{shown}`\n\n{text}\n")
    (out / "summary.json").write_text(json.dumps([s.to_json() for s in summaries], indent=1))
    try:
        logs.plot(curves, out / "best_race.png", f"best race so far, {args.games} stand-in game{'s' if args.games != 1 else ''} a side, "
                                                  f"{args.minutes:g} min, {os.cpu_count()} CPU cores")
        print(f"plot: {out / 'best_race.png'}")
    except RuntimeError as error:  # PlottingUnavailable
        print(f"vs_linesight: no plot: {error}", file=sys.stderr)
    print(f"results in {out}")
    return 0 if all(s.alive_after == 0 for s in summaries) else 1


if __name__ == "__main__":
    sys.exit(main())
