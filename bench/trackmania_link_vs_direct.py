"""The real-game link (stand-in games) against the simulator backend, on `short`, in one run:

1. cost of one 10 ms tick of the stand-in's physics: the car stepped in this process, one request to
   the embedded answerer (what a host with its physics embedded calls: the stand-in's default where
   the Python can be embedded) and one request over a pipe to a physics child process;
2. the link's latency per action: ``env.step`` through TMIBackend -> TCP -> rulka_link.as in the
   AngelScript host -> simulator car and frame, p50 / p99, against the simulator backend's step; and
   the CPU time per action of each process (collector, game host, its physics child if any, from /proc), less
   the stand-in world's own work (5 ticks and a frame, timed in process: what a real game computes
   anyway, not rulka): the link's own cost per action, against the simulator backend's whole step;
3. actions/s at 4 instances, same collectors and network (trackmania_iqn_sim's: 1 collector process
   x 4 environments, learning off), simulator backend vs stand-in games, then end to end (learning on);
4. a learning row for each (``--minutes``, default 30) in the format of bench/trackmania_vs_baseline.py:
   trackmania_iqn_sim's configuration on `short`, once with ``environment.backend: sim`` and once with
   ``environment.backend: tmi`` through 4 stand-in games launched by launch.sh (the
   TMI_LINUX_LAUNCH_SCRIPT contract). With ``--parallel`` both rows train at the same time (same load).

    python bench/trackmania_link_vs_direct.py [--minutes 30] [--seconds 40] [--parallel] [--out DIR]
    python bench/trackmania_link_vs_direct.py --skip-speed --parallel --out DIR    # only the learning rows
    python bench/trackmania_link_vs_direct.py --skip-rows                          # only 1-3
    python bench/trackmania_link_vs_direct.py --summarize DIR [--minutes 30]       # the table from DIR

Goals (issue 19): the link costs at most 20 % of the simulator backend's actions/s at 4 instances; the
link row's best greedy race within 10 % of the direct row's (one seed each).
Differences that stay: a stand-in race starts on the line without the simulator's seeded start jitter,
and its actions apply one 10 ms tick later (as in TMNF: the game finishes its tick before it freezes).
"""
from __future__ import annotations

import argparse
import csv
import math
import multiprocessing
import os
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from environments.trackmania.tmi.standin.ports import free_port_block  # noqa: E402

TRACK = "short"
LEARNING_OFF = ["training.train_every_n_env_steps=1000000000", "memory.memory_size_schedule=[[0, [50000, 1000]]]"]


def use_standin_games() -> None:
    """Point the real-game backend at stand-in games (the .env keys a user sets for a Wine script)."""
    from environments.trackmania.tmi.standin.build import LAUNCH_SCRIPT, host_binary

    host_binary()  # build once, before collectors launch four games at the same time
    os.environ.update({"TMI_LINUX_LAUNCH_SCRIPT": str(LAUNCH_SCRIPT), "TMI_ACCOUNT_NAME": "standin",
                       "TMI_BASE_PORT": str(free_port_block(8)), "RULKA_STANDIN_PYTHON": sys.executable,
                       "TMI_START_TIMEOUT_S": "120"})


def physics_transport() -> str:
    """How the stand-in games of this machine run their physics (see standin/build.py)."""
    from environments.trackmania.tmi.standin.build import embed_variables

    return "embedded" if embed_variables(sys.executable) else "pipe (this Python cannot be embedded)"


def graph_manager_for(backend: str, overrides: list[str]):
    """trackmania_iqn_sim on `short`; ``backend`` tmi races stand-in games with the same settings."""
    from environments.trackmania.tmi.standin.tracks import LINES_DIR
    from rulka.config import apply_overrides
    from rulka.presets import load_graph_manager

    graph_manager = load_graph_manager("trackmania_iqn_sim")
    graph_manager.config = apply_overrides(graph_manager.config, [], overrides)
    graph_manager.config.environment.backend = backend
    for entry in graph_manager.config.map_cycle.entries:
        entry.map_path = entry.short_name = TRACK
        if backend == "tmi":
            entry.reference_line_path = str(LINES_DIR / f"{TRACK}.npy")
    if backend == "tmi":
        use_standin_games()
        graph_manager.preflight()
    return graph_manager


# ---------------------------------------------------------------------- 1. per tick
def tick_costs(ticks: int = 20000) -> tuple[float, float, float]:
    """(µs per tick in process, through the embedded answerer, through the physics pipe), full throttle
    on `short`. The embedded answerer is what a host with ``--physics-transport embedded`` calls per
    request (the C++ side adds one call into the interpreter); the pipe is a child process."""
    from environments.trackmania.tmi.standin.physics import StandinPhysics, embedded_answerer

    physics = StandinPhysics()
    physics.load(TRACK)
    t0 = time.perf_counter()
    for k in range(ticks):
        if k % 2000 == 0:
            physics.race_start()
        physics.tick(1)
    direct = (time.perf_counter() - t0) / ticks * 1e6
    name = TRACK.encode()
    answer = embedded_answerer()
    answer(b"M" + struct.pack("<H", len(name)) + name)
    t0 = time.perf_counter()
    for k in range(ticks):
        if k % 2000 == 0:
            answer(b"G")
        answer(b"T\x01")
    embedded = (time.perf_counter() - t0) / ticks * 1e6
    child = subprocess.Popen([sys.executable, "-m", "environments.trackmania.tmi.standin.physics"], cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    child.stdin.write(b"M" + struct.pack("<H", len(name)) + name)
    child.stdout.read(6)
    t0 = time.perf_counter()
    for k in range(ticks):
        if k % 2000 == 0:
            child.stdin.write(b"G")
            child.stdout.read(9)
        child.stdin.write(b"T\x01")
        child.stdout.read(9)
    piped = (time.perf_counter() - t0) / ticks * 1e6
    child.stdin.close()
    child.wait(timeout=10)
    return direct, embedded, piped


def world_cost_per_action(actions: int = 2000, height: int = 48, width: int = 64) -> float:
    """µs of the stand-in world's own work per action, in process: 5 ticks of random accelerating
    inputs and one first-person frame (what a real game computes whether rulka drives it or not)."""
    import numpy as np

    from environments.trackmania.tmi.standin.physics import StandinPhysics

    physics = StandinPhysics()
    physics.load(TRACK)
    physics.frame(width, height)  # the renderer is built once per track
    rng = np.random.default_rng(0)
    keys = [1, 1 | 4, 1 | 8, 0]  # the accelerating actions of step_latencies
    t0 = time.process_time()
    for k in range(actions):
        if k % 400 == 0:
            physics.race_start()
        held = keys[int(rng.integers(0, 4))]
        for _ in range(5):
            physics.tick(held)
        physics.frame(width, height)
    return (time.process_time() - t0) / actions * 1e6


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (Linux /proc), seconds; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _descendants(pid: int) -> list[int]:
    """Pids of every process below ``pid`` (Linux /proc)."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                children = [int(c) for c in f.read().split()]
        except OSError:
            continue
        for child in children:
            out += [child, *_descendants(child)]
    return out


# ---------------------------------------------------------------------- 2. latency per action
#: CPU µs per action of the last step_latencies run: {"collector": ..., process name: ...}.
LAST_CPU_SPLIT: dict[str, float] = {}


def step_latencies(backend: str, actions: int) -> list[float]:
    """Seconds per ``env.step`` of random actions (races restart as they end), one environment.

    Also leaves the CPU time per action of this process and of every process below it (the game
    and its physics process) in :data:`LAST_CPU_SPLIT`."""
    import numpy as np

    from environments.trackmania.env import TrackManiaEnv
    from environments.trackmania.parameters import TrackManiaEnvironmentParameters
    from environments.trackmania.track import track_from_map
    from environments.trackmania.tmi.games.settings import load_settings
    from environments.trackmania.tmi.standin.tracks import LINES_DIR
    from environments.trackmania.tracks import get_track

    params = TrackManiaEnvironmentParameters(H_downsized=48, W_downsized=64)
    if backend == "tmi":
        use_standin_games()
        track = track_from_map(TRACK, LINES_DIR / f"{TRACK}.npy", road_width=24.0, name=TRACK)
        env = TrackManiaEnv(params, track=track, backend="tmi",
                            backend_options={"settings": load_settings(None), "running_speed": 160})
    else:
        env = TrackManiaEnv(params, track=get_track(TRACK), backend="sim")
    rng = np.random.default_rng(0)
    out = []
    env.reset(seed=0)
    try:
        children = _descendants(os.getpid())
        names = {}
        for pid in children:
            with open(f"/proc/{pid}/comm") as f:
                names[pid] = f.read().strip()
        before = {pid: _cpu_seconds(pid) for pid in children}
        own = time.process_time()
        while len(out) < actions:
            t0 = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(int(rng.integers(0, 4)))  # accelerating actions
            out.append(time.perf_counter() - t0)
            if terminated or truncated:
                env.reset()
        LAST_CPU_SPLIT.clear()
        LAST_CPU_SPLIT["collector"] = (time.process_time() - own) / actions * 1e6
        for pid in children:
            name = "physics process" if names[pid].startswith("python") else f"game ({names[pid]})"
            LAST_CPU_SPLIT[name] = LAST_CPU_SPLIT.get(name, 0.0) + (_cpu_seconds(pid) - before[pid]) / actions * 1e6
    finally:
        env.close()
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


# ---------------------------------------------------------------------- 3. actions/s
def actions_per_second(backend: str, overrides: list[str], warmup: int, seconds: float) -> tuple[float, float]:
    """(actions/s, updates/s) after ``warmup`` stored actions, over ``seconds`` (bench/collection.py's window)."""
    graph_manager = graph_manager_for(backend, ["training.checkpoint_every_n_env_steps=0", *overrides])
    from collection import train_and_measure

    graph_manager.create(None, "cpu", 0)
    actions_per_s, updates_per_s, _, _ = train_and_measure(graph_manager, warmup, seconds)
    return actions_per_s, updates_per_s


# ---------------------------------------------------------------------- 4. learning rows
def train_row(backend: str, minutes: float, run_dir: Path, seed: int = 0) -> None:
    """One learning row: ``minutes`` of wall time (run in a child process by :func:`main`)."""
    graph_manager = graph_manager_for(backend, [])
    from trackmania_vs_baseline import improve_for

    graph_manager.create(run_dir, "cpu", seed)
    improve_for(graph_manager, minutes)


def learning_table(out: Path, minutes: float) -> None:
    from trackmania_vs_baseline import COLUMNS, references, table_row

    refs = references(TRACK)
    print(f"{TRACK}: shipped driver {refs.shipped_s:.2f} s, tuned driver {refs.tuned_s:.2f} s ({refs.tuned_setting})")
    rows = []
    for backend, label in (("sim", "direct (sim backend)"), ("tmi", "link (4 stand-in games)")):
        run_dir = out / f"{TRACK}_{backend}_seed0"
        if not (run_dir / "races.csv").is_file():
            print(f"{run_dir}: no races.csv (row not trained)")
            continue
        rows.append({"backend": label, **table_row(TRACK, "0", minutes, refs, run_dir)})
    columns = ("backend", *COLUMNS)
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" for _ in columns) + "|")
    for row in rows:
        print("| " + " | ".join(row.get(c, "") for c in columns) + " |")
    for row in rows:
        print(f"races of {row['backend']} ended: {row['ended']}")
    for backend, label in (("sim", "direct"), ("tmi", "link")):
        path = out / f"{TRACK}_{backend}_seed0" / "races.csv"
        if path.is_file():
            races = [r for r in csv.DictReader(path.open()) if float(r["wall_time_s"]) <= minutes * 60]
            greedy = [float(r["progress_fraction"]) for r in races if r["exploration"] == "0"]
            print(f"{label}: furthest progress {max(float(r['progress_fraction']) for r in races):.3f} of the track, "
                  f"best greedy progress {max(greedy, default=0.0):.3f}")
    best = {row["backend"].split()[0]: row["best greedy (s)"] for row in rows}
    if best.get("direct", "-") != "-" and best.get("link", "-") != "-":
        ratio = float(best["link"]) / float(best["direct"])
        print(f"best greedy race, link / direct: {ratio:.3f} (goal: within 10 %, i.e. <= 1.10; one seed each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0, help="wall time of each learning row (default 30)")
    parser.add_argument("--seconds", type=float, default=40.0, help="measuring window of each actions/s row")
    parser.add_argument("--warmup", type=int, default=3000, help="stored actions before an actions/s window")
    parser.add_argument("--latency-actions", type=int, default=3000, help="actions timed per backend")
    parser.add_argument("--parallel", action="store_true", help="train the two learning rows at the same time")
    parser.add_argument("--skip-speed", action="store_true", help="only the learning rows")
    parser.add_argument("--skip-rows", action="store_true", help="only the speed measurements")
    parser.add_argument("--out", default=None, help="folder of the learning rows' run folders")
    parser.add_argument("--summarize", metavar="DIR", default=None, help="only print the learning table from DIR")
    parser.add_argument("--train-row", nargs=2, metavar=("BACKEND", "RUN_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.train_row:
        train_row(args.train_row[0], args.minutes, Path(args.train_row[1]))
        return
    if args.summarize:
        learning_table(Path(args.summarize), args.minutes)
        return
    print(f"{os.cpu_count()} CPUs (shared with other work: see the README's note), {TRACK}, one seed", flush=True)
    if not args.skip_speed:
        direct, embedded, piped = tick_costs()
        print(f"1. one 10 ms tick: {direct:.1f} µs in process, {embedded:.1f} µs through the embedded answerer "
              f"({embedded / direct:.1f}x), {piped:.1f} µs through the physics pipe ({piped / direct:.1f}x); "
              f"an action is 5 ticks; the stand-in's transport here: {physics_transport()}", flush=True)
        lat, cpu = {}, {}
        for b in ("sim", "tmi"):
            lat[b] = step_latencies(b, args.latency_actions)
            cpu[b] = dict(LAST_CPU_SPLIT)
        for b, name in (("sim", "simulator backend"), ("tmi", "link (stand-in game, speed 160)")):
            split = ", ".join(f"{k} {v:.0f}" for k, v in cpu[b].items())
            print(f"2. env.step, {name}: p50 {percentile(lat[b], 50) * 1e3:.2f} ms, "
                  f"p99 {percentile(lat[b], 99) * 1e3:.2f} ms ({len(lat[b])} actions); "
                  f"CPU µs per action: {split}", flush=True)
        world = world_cost_per_action()
        link_total = sum(cpu["tmi"].values())
        own = link_total - world
        print(f"   the stand-in world's own work (5 ticks + 1 frame, in process): {world:.0f} µs per action; "
              f"the link's own cost: {link_total:.0f} - {world:.0f} = {own:.0f} µs per action "
              f"({own / cpu['sim']['collector']:.2f}x the simulator backend's whole step, "
              f"{cpu['sim']['collector']:.0f} µs)", flush=True)
        layouts = [("learning off, 1 collector x 4 envs", [*LEARNING_OFF, "performance.gpu_collectors_count=1",
                                                          "performance.envs_per_collector=4"]),
                   ("learning off, 4 collectors x 1 env", [*LEARNING_OFF, "performance.gpu_collectors_count=4",
                                                          "performance.envs_per_collector=1"]),
                   ("end to end, 1 collector x 4 envs", ["performance.gpu_collectors_count=1",
                                                        "performance.envs_per_collector=4"])]
        print(f"3. {'4 instances':<38} {'sim act/s':>10} {'link act/s':>10} {'link/sim':>8}", flush=True)
        for name, overrides in layouts:
            sim, _ = actions_per_second("sim", overrides, args.warmup, args.seconds)
            link, _ = actions_per_second("tmi", overrides, args.warmup, args.seconds)
            print(f"   {name:<38} {sim:>10.0f} {link:>10.0f} {link / sim:>8.2f}", flush=True)
    if args.skip_rows:
        return
    out = Path(args.out or "bench_link_vs_direct")
    out.mkdir(parents=True, exist_ok=True)
    commands = [[sys.executable, __file__, "--minutes", str(args.minutes), "--train-row", backend,
                 str(out / f"{TRACK}_{backend}_seed0")] for backend in ("sim", "tmi")]
    if args.parallel:
        children = [subprocess.Popen(c, cwd=ROOT) for c in commands]
        for child in children:
            child.wait()
    else:
        for c in commands:
            subprocess.run(c, cwd=ROOT, check=False)
    print(f"4. learning rows ({args.minutes:g} min each{', trained at the same time' if args.parallel else ''}):")
    learning_table(out, args.minutes)


if __name__ == "__main__":
    main()
