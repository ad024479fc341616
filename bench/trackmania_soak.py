"""Soak: the uni preset's stand-in configuration trains for N minutes while faults are injected on a
schedule; prints races done, faults injected, restarts, races lost, leaked processes and actions/s
before and after each fault (issue 20).

    python bench/trackmania_soak.py [--minutes 20] [--every 120] [--seed 0] [--stop-s 60] [--out FILE]
                                    [--cp KEY=VALUE ...]

It runs ``rulka -p trackmania_iqn_uni --config presets/trackmania_iqn_uni_standin.yaml`` (4 collector
processes, 4 stand-in games launched by ``launch.sh`` as a user's Wine script is, running_speed 160,
the CPU-sized network) and, every ``--every`` seconds, one fault picked at random (seeded):

* ``game_kill``: SIGKILL a game (the collector sees the link drop, discards the race, relaunches);
* ``game_stop``: SIGSTOP a game for ``--stop-s`` seconds, then SIGCONT if it still exists (a hung game:
  the collector's read times out after ``environment.timeout_during_run_ms``, kills it, relaunches);
* ``collector_kill``: SIGKILL a collector (the learner kills its game and starts a new collector).

At the end the run is stopped with SIGINT (Ctrl-C) and every process the soak saw below the run (by pid
and start time) must be gone. What is counted:

* races done: rows of ``races.csv`` (finished or cut-off races the learner kept);
* restarts: games launched beyond the first 4 (distinct launch markers seen) and collectors replaced;
* races lost: ``race discarded`` lines (a game's race in flight lost by its collector) plus the race in
  flight of each killed collector (never reported: it dies with its collector);
* actions/s: the learner's env steps (read from ``races.csv`` at each race end) over the ``--window``
  seconds before and after each fault, and over the whole run.

``--cp`` passes overrides to rulka (e.g. ``--cp performance.gpu_collectors_count=2``).
"""
from __future__ import annotations

import argparse
import csv
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from environments.trackmania.tmi.launcher import LAUNCH_MARKER  # noqa: E402
from environments.trackmania.tmi.processes import descendants, list_processes, process_environ, process_info  # noqa: E402
from environments.trackmania.tmi.standin.build import LAUNCH_SCRIPT, StandinBuildError, host_binary  # noqa: E402
from environments.trackmania.tmi.standin.ports import free_port_block  # noqa: E402

STANDIN_YAML = ROOT / "presets" / "trackmania_iqn_uni_standin.yaml"
FAULTS = ("game_kill", "game_stop", "collector_kill")


@dataclass
class Fault:
    at_s: float
    kind: str
    pid: int
    port: int
    before_aps: float = float("nan")
    after_aps: float = float("nan")
    note: str = ""


@dataclass
class Watch:
    """Everything the soak saw below the run: pid -> (start ticks, name), launch markers, game pids."""

    processes: dict[int, tuple[int, str]] = field(default_factory=dict)
    launches: set[str] = field(default_factory=set)
    collectors: set[int] = field(default_factory=set)
    steps: list[tuple[float, int]] = field(default_factory=list)  # (soak time s, learner env steps)


def games_of(root_pid: int) -> dict[int, tuple[int, int]]:
    """Game pid -> (port, collector pid) of the games below the run (named TmForever, with a port marker)."""
    processes = list_processes()
    below = descendants(root_pid, processes)
    out = {}
    for p in processes:
        if p.pid in below and p.name.startswith("TmForever"):
            env = process_environ(p.pid) or {}
            if "RULKA_TMI_PORT" in env:
                out[p.pid] = (int(env["RULKA_TMI_PORT"]), p.ppid)
    return out


def observe(root_pid: int, watch: Watch) -> None:
    processes = list_processes()
    for pid in descendants(root_pid, processes):
        info = process_info(pid)
        if info is None:
            continue
        watch.processes.setdefault(pid, (info.start_ticks, info.name))
        if info.ppid == root_pid and "resource_tracker" not in _cmdline(pid):
            watch.collectors.add(pid)
        marker = (process_environ(pid) or {}).get(LAUNCH_MARKER)
        if marker and info.name.startswith("TmForever"):
            watch.launches.add(marker)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def read_env_steps(races_csv: Path) -> tuple[int, int]:
    """(rows, env steps of the last row) of races.csv."""
    if not races_csv.is_file():
        return 0, 0
    with races_csv.open() as f:
        rows = list(csv.DictReader(f))
    return len(rows), int(rows[-1]["env_steps"]) if rows else 0


def rate(steps: list[tuple[float, int]], t0: float, t1: float) -> float:
    """Env steps per second between soak times t0 and t1 (the last samples at or before each)."""
    def at(t: float) -> int | None:
        seen = [s for ts, s in steps if ts <= t]
        return seen[-1] if seen else None

    a, b = at(t0), at(t1)
    if a is None or b is None or t1 <= t0:
        return float("nan")
    return (b - a) / (t1 - t0)


def inject(kind: str, root_pid: int, rng: random.Random, stop_s: float, stopped: dict[int, float]) -> Fault | None:
    games = {pid: v for pid, v in games_of(root_pid).items() if pid not in stopped}
    if not games:
        return None
    pid = rng.choice(sorted(games))
    port, collector = games[pid]
    if kind == "collector_kill":
        os.kill(collector, signal.SIGKILL)
        return Fault(0.0, kind, collector, port, note=f"its game pid {pid}")
    if kind == "game_kill":
        os.kill(pid, signal.SIGKILL)
    else:
        os.kill(pid, signal.SIGSTOP)
        stopped[pid] = time.monotonic() + stop_s
    return Fault(0.0, kind, pid, port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--every", type=float, default=120.0, help="seconds between faults")
    parser.add_argument("--first", type=float, default=None, help="first fault after this many s (default: --every)")
    parser.add_argument("--stop-s", type=float, default=60.0, help="how long a SIGSTOPped game stays stopped")
    parser.add_argument("--window", type=float, default=60.0, help="actions/s window before and after a fault, s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cp", action="append", default=[], help="rulka override KEY=VALUE (repeatable)")
    parser.add_argument("--out", default=None, help="also write the printout to this file")
    parser.add_argument("--keep", default=None, help="run folder parent (default: a temporary folder, removed)")
    args = parser.parse_args(argv)
    try:
        host_binary()
    except StandinBuildError as error:
        print(f"trackmania_soak: {error}", file=sys.stderr)
        return 2

    work = Path(args.keep or tempfile.mkdtemp(prefix="rulka_soak_"))
    work.mkdir(parents=True, exist_ok=True)
    run_dir = work / "runs" / "soak"
    log_path = work / "run.log"
    env = dict(os.environ, TMI_LINUX_LAUNCH_SCRIPT=str(LAUNCH_SCRIPT), TMI_ACCOUNT_NAME="standin",
               TMI_BASE_PORT=str(free_port_block(16)), RULKA_STANDIN_PYTHON=sys.executable)
    command = [str(Path(sys.executable).with_name("rulka")), "-p", "trackmania_iqn_uni", "--config", str(STANDIN_YAML),
               *[a for o in args.cp for a in ("-cp", o)], "--experiments-dir", str(work / "runs"), "-e", "soak",
               "--max-steps", "100000000", "--no-progress", "--seed", str(args.seed)]
    rng = random.Random(args.seed)
    watch = Watch()
    faults: list[Fault] = []
    stopped: dict[int, float] = {}
    duration = args.minutes * 60.0
    next_fault = args.first if args.first is not None else args.every
    with log_path.open("w") as log:
        rulka = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    start = time.monotonic()
    load_start = os.getloadavg()[0]
    exit_code = None
    try:
        while (now := time.monotonic() - start) < duration:
            if rulka.poll() is not None:
                break
            observe(rulka.pid, watch)
            watch.steps.append((now, read_env_steps(run_dir / "races.csv")[1]))
            for pid, until in list(stopped.items()):
                if time.monotonic() >= until:
                    try:
                        os.kill(pid, signal.SIGCONT)
                    except OSError:
                        pass  # already killed by its collector, as it should be
                    del stopped[pid]
            if now >= next_fault:
                kind = rng.choice(FAULTS)
                fault = inject(kind, rulka.pid, rng, args.stop_s, stopped)
                if fault is not None:
                    fault.at_s = now
                    faults.append(fault)
                    print(f"[{now:7.1f} s] {kind} pid {fault.pid} (port {fault.port}) {fault.note}", flush=True)
                next_fault += args.every
            time.sleep(1.0)
        for pid in list(stopped):
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        observe(rulka.pid, watch)
        if rulka.poll() is None:
            rulka.send_signal(signal.SIGINT)
            try:
                exit_code = rulka.wait(180)
            except subprocess.TimeoutExpired:
                exit_code = None
        else:
            exit_code = rulka.returncode
    finally:
        if rulka.poll() is None:
            rulka.kill()
            rulka.wait(30)
    elapsed = time.monotonic() - start
    time.sleep(5.0)
    leaked = {pid: name for pid, (ticks, name) in watch.processes.items()
              if (info := process_info(pid)) is not None and info.start_ticks == ticks}
    for pid in leaked:  # leave nothing behind on the machine either
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass

    text = log_path.read_text(errors="replace")
    races, steps = read_env_steps(run_dir / "races.csv")
    discarded = len(re.findall(r"^race discarded: ", text, flags=re.M))
    collector_kills = sum(f.kind == "collector_kill" for f in faults)
    replaced = len(re.findall(r"collector \d+ .*(died|raised|silent)", text))
    collectors_started = len(watch.collectors)
    game_starts = len(watch.launches)
    for f in faults:
        f.before_aps = rate(watch.steps, f.at_s - args.window, f.at_s)
        f.after_aps = rate(watch.steps, f.at_s, f.at_s + args.window)
    shown = " ".join(["python bench/trackmania_soak.py", *(argv if argv is not None else sys.argv[1:])])
    lines = [
        f"command: `{shown}`",
        f"machine: {os.cpu_count()} cores; load average at start {load_start:.1f}, at the end {os.getloadavg()[0]:.1f} "
        "(1 min; above the core count the machine was shared with other work)",
        f"trackmania_soak: {elapsed / 60:.1f} min, uni preset, stand-in configuration "
        f"({' '.join('--cp ' + o for o in args.cp) or 'no overrides'}), seed {args.seed}, a fault every {args.every:g} s",
        f"exit status of the run after SIGINT: {exit_code} (130 = stopped by Ctrl-C, final checkpoint written: "
        f"{'final checkpoint written' in text})",
        f"races done (races.csv): {races}; env steps: {steps}; actions/s over the run: {steps / max(elapsed, 1e-9):.1f}",
        f"faults injected: {len(faults)} ({', '.join(f'{k} {sum(f.kind == k for f in faults)}' for k in FAULTS)})",
        f"restarts: games launched {game_starts} (4 at start, {max(0, game_starts - 4)} relaunches); "
        f"collector processes {collectors_started} ({max(0, collectors_started - 4)} replacements; learner log: "
        f"{replaced} collector failures)",
        f"races lost: {discarded + collector_kills} ({discarded} 'race discarded' lines; {collector_kills} in flight "
        f"with killed collectors)",
        f"leaked processes (seen below the run, alive {5:.0f} s after it exited, same pid and start time): "
        f"{len(leaked)}{' ' + str(leaked) if leaked else ''}",
        f"tracebacks in the log: {text.count('Traceback')}",
        "",
        f"| t (s) | fault | pid | port | actions/s {args.window:g} s before | {args.window:g} s after |",
        "|---:|---|---:|---:|---:|---:|",
        *[f"| {f.at_s:.0f} | {f.kind} | {f.pid} | {f.port} | {f.before_aps:.1f} | {f.after_aps:.1f} |" for f in faults],
    ]
    printout = "\n".join(lines)
    print(printout, flush=True)
    if args.out:
        Path(args.out).write_text(printout + "\n", encoding="utf-8")
    if args.keep is None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"run folder and log kept in {work}")
    return 0 if exit_code == 130 and not leaked else 1


if __name__ == "__main__":
    sys.exit(main())
