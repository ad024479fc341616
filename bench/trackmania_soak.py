"""Soak: the uni preset's stand-in configuration trains for N minutes while a fault is injected every
``--every`` seconds, cycling through every kind; per fault it prints when the run detected it, what it
did and the races it lost, then the goals (issue 43).

    python bench/trackmania_soak.py [--minutes 60] [--every 120] [--faults all|none|KIND,...] [--backend processes|ray]
                                    [--baseline FAULT_FREE_PRINTOUT] [--out FILE] [--keep DIR] [--cp KEY=VALUE ...]

It runs ``rulka -p trackmania_iqn_uni --config presets/trackmania_iqn_uni_standin.yaml`` unthrottled (4
collector processes, 4 stand-in games launched by ``launch.sh`` as a user's Wine script is, running_speed
160, batch 512, the CPU-sized network) and injects, in this order:

* ``game_kill``: SIGKILL a game. Detected when its collector's next read fails (a ``race discarded``
  line), or, while the collector waits between races, by its check of the game once a second: at once.
* ``game_stop``: SIGSTOP a game for ``--stop-s`` (60) seconds, then SIGCONT if it still exists. Detected
  when the collector's read (mid-race) or its check's question (between races) times out:
  ``environment.timeout_during_run_ms`` (30 s).
* ``game_pause``: SIGSTOP a game, SIGCONT after ``--pause-s`` (20) seconds, inside the in-race timeout:
  not a fault to the run (nothing may be discarded; its race goes on).
* ``collector_kill``: SIGKILL a collector. Detected by a thread of the learner's, whatever the learner is
  doing: it waits on the collector processes' exits, or asks each Ray actor for its games every half second;
  it kills the game at once, and the learner starts a new collector at its next check.
* ``learner_kill``: SIGKILL the learner (as the OOM killer would). Detected by its collectors (their
  parent gone) and its games' guards: every process of the run must be gone; then the soak resumes the
  run (``rulka --resume``), which loses the races in flight and what was learnt since the last checkpoint.
  Injected once the run has written a checkpoint (before it ``--resume`` has nothing to resume: rulka
  refuses, saying so), else at the next fault's time.
* ``stranger_port``: SIGKILL a game while a stranger's program waits to listen on its port. Detected
  when the relaunch refuses the port, naming the stranger's pid; the stranger is not killed by rulka.
  The soak then stops the stranger, as the message tells a user to, and a game races on the port again.

``--backend ray`` runs the collectors as Ray actors (``performance.collector_backend: ray``, half a CPU
each) on a 2-node Ray cluster on 127.0.0.1 that the soak starts (``ray.cluster_utils.Cluster``): the head,
where the learner runs and 2 actors fit, and a worker node with room for 2 more (the games' settings, TMI_*,
are the nodes' environment, as on a user's gaming PC; ``TMI_START_TIMEOUT_S=60`` so that the default
``collector_timeout_s`` passes the Ray rule). It adds one fault, in the cycle after the learner kill:

A learner kill's goal there is the games' guards' grace (60 s): Ray ends the dead learner's actors, and
a game outlives its actor while the actor's parent (the node's raylet) runs, leaving a learner time to kill
it and say so; after 60 s its guard kills it (a resumed run's launch also reclaims its port at once).

* ``node_loss``: SIGKILL every process of the worker node (raylet, its actors: a PC that lost power); 10 s
  later a new worker node joins. Detected when the learner hears that its actors died (Ray's node health
  check: a few seconds to ``NODE_LOSS_TIMEOUT_S``); its games are killed by their guards (no task can reach
  a lost node), its actors are replaced on the new node. Races lost: one per game on the node.

``--faults none`` is the fault-free baseline; ``--baseline FILE`` (its printout) gives the goal on
actions. At the end the run is stopped with SIGINT (Ctrl-C) and every process the soak saw (below each
incarnation of the run, and the games' guards) must be gone. Printed per fault: kind, seconds after
injection when it was detected, what the log says was done, races lost (``race discarded`` lines for
its port, plus the races in flight of a killed collector or learner). Goals: every fault detected within
its timeout + 5 s; at most one race lost per fault (a learner kill loses one per game); 0 leaked
processes; no stored action outside a kept race (``races.csv``: between two lines of one incarnation
``env_steps`` grows by exactly the later race's ``stored_actions``, so no action of a lost race reached
the replay); actions stored over the run at least 80 % of the fault-free run's.
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from environments.trackmania.tmi.games.game_guard import GRACE_S as GUARD_GRACE_S  # noqa: E402
from environments.trackmania.tmi.games.launcher import LAUNCH_MARKER  # noqa: E402
from environments.trackmania.tmi.games.processes import (descendants, list_processes, process_cmdline,  # noqa: E402
                                                   process_environ, process_info)
from environments.trackmania.tmi.standin.build import LAUNCH_SCRIPT, StandinBuildError, host_binary  # noqa: E402
from environments.trackmania.tmi.standin.ports import free_port_block  # noqa: E402
from rulka.checkpoints import LAST  # noqa: E402
from rulka.machine import describe_machine, machine_line  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from linesight_logs import event_files, read_scalars  # noqa: E402

STANDIN_YAML = ROOT / "presets" / "trackmania_iqn_uni_standin.yaml"
FAULTS = ("game_kill", "game_stop", "game_pause", "collector_kill", "learner_kill", "stranger_port")
#: The Ray mode's faults: the same, and the loss of the worker node after the learner kill.
RAY_FAULTS = ("game_kill", "game_stop", "game_pause", "collector_kill", "learner_kill", "node_loss", "stranger_port")
#: How long Ray may take to tell the learner that a lost node's actors died (its node health check), s.
NODE_LOSS_TIMEOUT_S = 30.0
#: Seconds after a node loss when a new worker node joins (the PC back).
NODE_BACK_S = 10.0
#: Each Ray node's room: one CPU, two collector actors of half a CPU.
RAY_NODE_ARGS = dict(num_cpus=1, node_ip_address="127.0.0.1", object_store_memory=300 * 2 ** 20)
#: The stand-in configuration's in-race timeout (environment.timeout_during_run_ms), s.
IN_RACE_TIMEOUT_S = 30.0
#: Each kind's documented detection time, s (the goal adds 5 s); None: not a fault to the run.
TIMEOUT_S = {"game_kill": 0.0, "game_stop": IN_RACE_TIMEOUT_S, "game_pause": None, "collector_kill": 1.0,
             "learner_kill": 1.0, "stranger_port": 0.0, "node_loss": NODE_LOSS_TIMEOUT_S}
GAMES = 4
#: A stranger's program: listens on the port given as its argument as soon as the port is free (for up to
#: 30 s), then sleeps; it prints LISTENING once it holds the port.
STRANGER = """
import socket, sys, time
port = int(sys.argv[1]); deadline = time.monotonic() + 30
while True:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port)); s.listen(); break
    except OSError:
        s.close()
        if time.monotonic() > deadline: sys.exit(3)
        time.sleep(0.001)
print("LISTENING", flush=True); time.sleep(3600)
"""


@dataclass
class Fault:
    at_s: float
    kind: str
    pid: int
    port: int | None
    detected_s: float | None = None
    done: str = ""
    lost: int = 0
    note: str = ""
    #: A node loss's games' ports: their races in flight are lost, and any discarded there after it.
    node_ports: list[int] = field(default_factory=list)


@dataclass
class Watch:
    """Everything the soak saw: pid -> (start ticks, name); the games' launch markers; learner steps."""

    processes: dict[int, tuple[int, str]] = field(default_factory=dict)
    launches: set[str] = field(default_factory=set)
    collectors: set[int] = field(default_factory=set)


class Log:
    """The run's output, incarnation after incarnation, each line stamped with the soak time it was read at."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []
        self._path: Path | None = None
        self._offset = 0
        self._partial = ""

    def follow(self, path: Path) -> None:
        self.read(0.0)
        self._path, self._offset, self._partial = path, 0, ""

    def read(self, now: float) -> None:
        if self._path is None or not self._path.exists():
            return
        with self._path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        text = self._partial + data.decode(errors="replace")
        *complete, self._partial = text.split("\n")
        self.lines += [(now, line) for line in complete]

    def first(self, pattern: str, after_s: float) -> tuple[float, str] | None:
        regex = re.compile(pattern)
        return next(((t, line) for t, line in self.lines if t >= after_s and regex.search(line)), None)

    def count(self, pattern: str, start_s: float, end_s: float) -> int:
        regex = re.compile(pattern)
        return sum(1 for t, line in self.lines if start_s <= t < end_s and regex.search(line))

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def games_of(ports: range, processes=None) -> dict[int, tuple[int, int]]:
    """Game pid -> (port, collector pid) of the soak's games: named TmForever, with a port marker in the soak's
    port block; a game's parent is the collector (a process, or a Ray actor) that launched it."""
    out = {}
    for p in processes if processes is not None else list_processes():
        if p.name.startswith("TmForever"):
            port = (process_environ(p.pid) or {}).get("RULKA_TMI_PORT")
            if port is not None and int(port) in ports:
                out[p.pid] = (int(port), p.ppid)
    return out


def observe(root_pid: int, watch: Watch, ports: range) -> None:
    """Note every process below the run, every game of the soak and its collector (a Ray actor is not below
    the run), and every game guard of ours (not below it either)."""
    processes = list_processes()
    below = descendants(root_pid, processes)
    by_pid = {p.pid: p for p in processes}
    games = games_of(ports, processes)
    for p in processes:
        if p.pid in below or p.pid in games:
            watch.processes.setdefault(p.pid, (p.start_ticks, p.name))
            if p.ppid == root_pid and "resource_tracker" not in (process_cmdline(p.pid) or ""):
                watch.collectors.add(p.pid)
            marker = (process_environ(p.pid) or {}).get(LAUNCH_MARKER)
            if marker and p.name.startswith("TmForever"):
                watch.launches.add(marker)
        elif p.pid not in watch.processes and "game_guard.py" in (process_cmdline(p.pid) or ""):
            env = process_environ(p.pid) or {}
            if env.get("TMI_BASE_PORT") == str(ports.start):
                watch.processes[p.pid] = (p.start_ticks, "game_guard")
    for _, collector in games.values():
        parent = by_pid.get(collector)
        if collector not in below and parent is not None and is_ray_actor(parent.pid, parent.name):
            watch.processes.setdefault(collector, (parent.start_ticks, parent.name))
            watch.collectors.add(collector)


def is_ray_actor(pid: int, name: str) -> bool:
    """A Ray worker process (its title starts with ``ray::``), not init that adopted an orphaned game."""
    return name.startswith("ray::") or (process_cmdline(pid) or "").startswith("ray::")


def alive(watch: Watch, pids: list[int] | None = None) -> dict[int, str]:
    """The watched processes (or ``pids`` of them) that still run under the start time they were seen with."""
    out = {}
    for pid, (ticks, name) in watch.processes.items():
        if pids is not None and pid not in pids:
            continue
        info = process_info(pid)
        if info is not None and info.start_ticks == ticks:
            out[pid] = name
    return out


def read_races(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def learner_updates(tensorboard: Path) -> tuple[int, float | None]:
    """(gradient updates over the run, median learner training fraction) from the run's TensorBoard files.

    Each incarnation writes its own file; a resumed run's counter starts from its checkpoint's, so each file
    adds its last ``RL/gradient_updates`` minus its first (a resumed run logs its first value before it trains:
    its replay memory starts empty), good to the counter's logging interval. The training fraction (``Performance/learner_training_fraction``, the
    share of the learner's time spent in updates) near 1 says the learner set the pace: the collectors waited
    for its replay ratio, and the actions stored follow its updates, not the games."""
    updates, fractions = 0, []
    for path in event_files(tensorboard):
        counts = [(step, value) for tag, step, _, value in read_scalars(path) if tag == "RL/gradient_updates"]
        fractions += [value for tag, step, _, value in read_scalars(path) if tag == "Performance/learner_training_fraction"]
        if counts:
            counts.sort()
            updates += int(counts[-1][1] - counts[0][1])
    return updates, (statistics.median(fractions) if fractions else None)


def learner_line(tensorboard: Path, stored: int) -> str:
    """The printout's line on the learner: its updates, actions stored per update, its training fraction."""
    updates, fraction = learner_updates(tensorboard)
    per_update = f"{stored / updates:.1f} actions stored per update" if updates else "no update logged"
    busy = "-" if fraction is None else f"{fraction:.2f}"
    return (f"learner: {updates} gradient updates ({per_update}); median training fraction {busy} "
            "(near 1: the learner set the pace and the collectors waited for its replay ratio)")


def stored_outside_races(rows: list[dict[str, str]], resumed_at_rows: list[int]) -> tuple[int, int]:
    """(lines checked, actions stored that no kept race accounts for): between two lines of one incarnation
    ``env_steps`` must grow by exactly the later line's ``stored_actions``."""
    checked = extra = 0
    for i in range(1, len(rows)):
        if i in resumed_at_rows:  # the first line after a resume continues from the checkpoint's count
            continue
        delta = int(rows[i]["env_steps"]) - int(rows[i - 1]["env_steps"])
        checked += 1
        extra += max(0, delta - int(rows[i]["stored_actions"]))
    return checked, extra


def game_settings(base_port: int, ray: bool) -> dict[str, str]:
    """The stand-in games' settings (TMI_*: a user's .env), for the learner's or the Ray nodes' environment."""
    settings = dict(TMI_LINUX_LAUNCH_SCRIPT=str(LAUNCH_SCRIPT), TMI_ACCOUNT_NAME="standin",
                    TMI_BASE_PORT=str(base_port), RULKA_STANDIN_PYTHON=sys.executable)
    if ray:
        settings["TMI_START_TIMEOUT_S"] = "60"
    return settings


class RayCluster:
    """A head node and one worker node of Ray on 127.0.0.1, started by (and below) this process; the worker
    node can be lost (every process SIGKILLed) and a new one added."""

    def __init__(self) -> None:
        from ray._private import ray_constants
        from ray.cluster_utils import Cluster

        # every node binds 127.0.0.1: Ray must not swap it for the machine's outward address (see
        # tests/rulka/collection/test_multinode.py); the variable reaches the nodes and the learner
        os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
        ray_constants.ENABLE_RAY_CLUSTER = False
        os.environ["RAY_worker_niceness"] = "0"  # as docs/ray.md starts a game PC: actors not starved by the learner
        self.cluster = Cluster(initialize_head=True, head_node_args=dict(RAY_NODE_ARGS, include_dashboard=False))
        self.worker = self.cluster.add_node(**RAY_NODE_ARGS)
        self.cluster.wait_for_nodes()
        self.address = self.cluster.address

    def worker_raylet(self) -> int:
        """The pid of the worker node's raylet (its actors, and their games, run below it)."""
        from ray._private import ray_constants

        return self.worker.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid

    def lose_worker(self) -> None:
        """SIGKILL the worker node's processes (no graceful shutdown)."""
        self.cluster.remove_node(self.worker, allow_graceful=False)
        self.worker = None

    def add_worker(self) -> None:
        self.worker = self.cluster.add_node(**RAY_NODE_ARGS)

    def shutdown(self) -> None:
        self.cluster.shutdown()


class Run:
    """The rulka run, incarnation after incarnation (a learner kill and ``--resume``)."""

    def __init__(self, work: Path, args: argparse.Namespace, base_port: int, ray_address: str | None = None) -> None:
        self.work, self.args = work, args
        self.run_dir = work / "runs" / "soak"
        self.env = dict(os.environ, **game_settings(base_port, ray_address is not None), RAY_DEDUP_LOGS="0")
        self.ray_address = ray_address
        self.rulka = str(Path(sys.executable).with_name("rulka"))
        self.process: subprocess.Popen | None = None
        self.incarnation = 0

    def start(self, log: Log, now: float) -> None:
        if self.incarnation == 0:
            command = [self.rulka, "-p", "trackmania_iqn_uni", "--config", str(STANDIN_YAML),
                       *[a for o in self.args.cp for a in ("-cp", o)], "--experiments-dir", str(self.work / "runs"),
                       "-e", "soak", "--seed", str(self.args.seed)]
        else:
            command = [self.rulka, "--resume", str(self.run_dir)]
        command += ["--max-steps", "100000000", "--no-progress"]
        if self.ray_address is not None:
            command += ["--ray-address", self.ray_address]
        path = self.work / f"run.{self.incarnation}.log"
        with path.open("w") as out:
            self.process = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        log.follow(path)
        self.incarnation += 1

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid


def inject(kind: str, run: Run, now: float, ports: range, strangers: dict[int, subprocess.Popen],
           cluster: RayCluster | None) -> Fault | None:
    """Inject ``kind``; None when there is nothing to hit yet (no game up)."""
    processes = list_processes()
    games = games_of(ports, processes)
    if kind == "learner_kill":
        if not (run.run_dir / "checkpoints" / LAST).is_file():
            return None  # nothing to --resume from yet (rulka would refuse, saying so): at the next fault's time
        os.kill(run.pid, signal.SIGKILL)
        return Fault(now, kind, run.pid, None, note=f"{len(games)} games up")
    if not games:
        return None
    if kind == "node_loss":
        assert cluster is not None
        if cluster.worker is None:
            return None  # the node lost last time has not come back yet
        raylet = cluster.worker_raylet()
        on_node = {pid: port for pid, (port, _) in games.items() if pid in descendants(raylet, processes)}
        if not on_node:
            return None  # no game on the worker node yet: try again at the next fault's time
        cluster.lose_worker()
        return Fault(now, kind, raylet, None, node_ports=sorted(on_node.values()),
                     note=f"raylet pid {raylet}; its games {sorted(on_node)} on ports {sorted(on_node.values())}")
    pid = sorted(games)[int(now) % len(games)]
    port, collector = games[pid]
    if kind == "collector_kill":
        os.kill(collector, signal.SIGKILL)
        return Fault(now, kind, collector, port, note=f"its game pid {pid}")
    if kind == "stranger_port":
        stranger = subprocess.Popen([sys.executable, "-c", STRANGER, str(port)], stdout=subprocess.PIPE, text=True)
        strangers[stranger.pid] = stranger
        os.kill(pid, signal.SIGKILL)
        return Fault(now, kind, pid, port, note=f"stranger pid {stranger.pid}")
    os.kill(pid, signal.SIGKILL if kind == "game_kill" else signal.SIGSTOP)
    return Fault(now, kind, pid, port)


def judge(fault: Fault, log: Log, end_s: float, watch: Watch, games: int) -> None:
    """Fill ``fault``'s detection time, what was done and races lost from the log (and the processes)."""
    port = fault.port
    discards = rf"race discarded: game instance \d+ \(port {port}\)"  # a Ray actor's lines have a prefix
    fault.lost = log.count(discards, fault.at_s, end_s) if port is not None else fault.lost
    found: tuple[float, str] | None = None
    if fault.kind in ("game_kill", "game_stop"):
        found = log.first(rf"game instance \d+ \(port {port}\).*(gone|hung|killed|closed|reset|relaunch)", fault.at_s)
    elif fault.kind == "collector_kill":
        found = log.first(r"collector \d+ died( \(exit code -9\))?", fault.at_s)  # a process's exit code, or Ray's
        fault.lost += 1  # its race in flight, never reported: it died with its collector
        replaced = log.first(r"collector \d+ died.*a new collector \d+ starts", fault.at_s)  # the learner's check
        if found is not None and replaced is not None and replaced[1] != found[1] and replaced[0] < end_s:
            fault.note += f"; replaced after {replaced[0] - fault.at_s:.1f} s: {replaced[1].strip()[:160]}"
        ray_saw = log.first(rf"Worker PID: {fault.pid}\b", fault.at_s)  # the raylet's line (a Ray actor only)
        if ray_saw is not None:  # how much of the detection time Ray took to report the death, as the soak read it
            fault.note += f"; Ray's worker-death line read after {ray_saw[0] - fault.at_s:.1f} s"
    elif fault.kind == "node_loss":
        found = log.first(r"collector \d+ died", fault.at_s)
        # the races in flight on the node's games (never reported: they died with it), and any discarded later
        fault.lost = len(fault.node_ports) + sum(
            log.count(rf"race discarded: game instance \d+ \(port {p}\)", fault.at_s, end_s) for p in fault.node_ports)
    elif fault.kind == "stranger_port":
        found = log.first(rf"port {port} is held by a process that rulka did not launch", fault.at_s)
        fault.lost = max(fault.lost, 1)  # the killed game's race, discarded or in flight
    elif fault.kind == "learner_kill":
        fault.lost = games
    if found is not None and found[0] < end_s:
        fault.detected_s = found[0] - fault.at_s
        fault.done = found[1].strip()[:160]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--every", type=float, default=120.0, help="seconds between faults")
    parser.add_argument("--first", type=float, default=None, help="first fault after this many s (default: --every)")
    parser.add_argument("--faults", default="all", help=f"all, none, or a comma list of {', '.join(RAY_FAULTS)} "
                        "(node_loss: --backend ray only)")
    parser.add_argument("--backend", choices=("processes", "ray"), default="processes",
                        help="collector processes, or Ray actors on a 2-node cluster on 127.0.0.1")
    parser.add_argument("--stop-s", type=float, default=60.0, help="how long a game_stop game stays stopped")
    parser.add_argument("--pause-s", type=float, default=20.0, help="how long a game_pause game stays stopped")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cp", action="append", default=[], help="rulka override KEY=VALUE (repeatable)")
    parser.add_argument("--baseline", default=None, help="the printout of a --faults none run of the same length")
    parser.add_argument("--out", default=None, help="also write the printout to this file")
    parser.add_argument("--keep", default=None, help="run folder parent (default: a temporary folder, removed)")
    args = parser.parse_args(argv)
    known = RAY_FAULTS if args.backend == "ray" else FAULTS
    kinds = [] if args.faults == "none" else list(known) if args.faults == "all" else args.faults.split(",")
    unknown = [k for k in kinds if k not in known]
    if unknown:
        parser.error(f"--faults: {', '.join(unknown)} not known with --backend {args.backend}; choose from "
                     f"{', '.join(known)}, all or none")
    baseline_actions = None
    if args.baseline:
        match = re.search(r"actions stored over the run: (\d+)", Path(args.baseline).read_text())
        if match is None:
            parser.error(f"--baseline {args.baseline}: no 'actions stored over the run' line (a soak printout?)")
        baseline_actions = int(match.group(1))
    try:
        host_binary()
    except StandinBuildError as error:
        print(f"trackmania_soak: {error}", file=sys.stderr)
        return 2

    work = Path(args.keep or tempfile.mkdtemp(prefix="rulka_soak_"))
    work.mkdir(parents=True, exist_ok=True)
    base_port = free_port_block(16)
    ports = range(base_port, base_port + GAMES)
    cluster: RayCluster | None = None
    timeouts = dict(TIMEOUT_S)
    if args.backend == "ray":
        # a killed learner's actors are ended by Ray, their games by their guards once GRACE_S have passed
        # (the node's raylet, the actor's parent, still runs: the guard leaves a learner time to kill them)
        timeouts["learner_kill"] = GUARD_GRACE_S
        os.environ.update(game_settings(base_port, ray=True))  # the nodes' environment: where the games start
        args.cp = ["performance.collector_backend=ray", "performance.ray_collector_cpus=0.5", *args.cp]
        cluster = RayCluster()
    run = Run(work, args, base_port, cluster.address if cluster is not None else None)
    log, watch = Log(), Watch()
    faults: list[Fault] = []
    stopped: dict[int, float] = {}  # SIGSTOPped game pid -> when to SIGCONT it
    strangers: dict[int, subprocess.Popen] = {}
    resumed_at_rows: list[int] = []
    node_back_at: float | None = None
    pending_resume: tuple[float, list[int]] | None = None  # (killed at, the old incarnation's pids)
    duration = args.minutes * 60.0
    next_fault = args.first if args.first is not None else args.every
    load_start = os.getloadavg()[0]
    wall_start = time.time()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    start = time.monotonic()
    run.start(log, 0.0)
    exit_code = None
    try:
        while (now := time.monotonic() - start) < duration:
            log.read(now)
            if pending_resume is not None:
                killed_at, old = pending_resume
                left = alive(watch, old)
                if not left or now - killed_at > timeouts["learner_kill"] + 10:
                    fault = faults[-1]
                    fault.detected_s = now - killed_at
                    fault.done = (f"every process of the killed run gone ({len(old)}); resumed with --resume"
                                  if not left else f"{len(left)} processes of the killed run still up after {now - killed_at:.0f} s: {left}")
                    resumed_at_rows.append(len(read_races(run.run_dir / "races.csv")))
                    run.start(log, now)
                    pending_resume = None
            elif run.process is not None and run.process.poll() is not None:
                break  # the run ended by itself: reported below
            else:
                observe(run.pid, watch, ports)
            if node_back_at is not None and now >= node_back_at:
                cluster.add_worker()
                node_back_at = None
            for pid, until in list(stopped.items()):
                if time.monotonic() >= until:
                    try:
                        os.kill(pid, signal.SIGCONT)
                    except OSError:
                        pass  # already killed by its collector, as it should be
                    del stopped[pid]
            for fault in faults:  # a stranger is stopped once the run has named it (the message's fix)
                if fault.kind == "stranger_port" and fault.pid and fault.note.startswith("stranger pid "):
                    spid = int(fault.note.split()[2])
                    stranger = strangers.get(spid)
                    if stranger is not None and stranger.poll() is None and log.first(rf"pid {spid}\b", fault.at_s):
                        stranger.kill()
                        stranger.wait(5)
                        fault.note += " (named by rulka, alive until the soak stopped it)"
                        del strangers[spid]
            if kinds and now >= next_fault and pending_resume is None:
                kind = kinds[len(faults) % len(kinds)]
                fault = inject(kind, run, now, ports, strangers, cluster)
                if fault is not None:
                    faults.append(fault)
                    if kind == "node_loss":
                        node_back_at = now + NODE_BACK_S
                    if kind in ("game_stop", "game_pause"):
                        stopped[fault.pid] = time.monotonic() + (args.stop_s if kind == "game_stop" else args.pause_s)
                    if kind == "learner_kill":
                        observe(run.pid, watch, ports)
                        old = [pid for pid in watch.processes if pid != run.pid] + [run.pid]
                        pending_resume = (now, old)
                    print(f"[{now:7.1f} s] {kind} pid {fault.pid} port {fault.port} {fault.note}", flush=True)
                next_fault += args.every
            time.sleep(0.5)
        for pid in list(stopped):
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        if run.process is not None and run.process.poll() is None:
            observe(run.pid, watch, ports)
            run.process.send_signal(signal.SIGINT)
            try:
                exit_code = run.process.wait(180)
            except subprocess.TimeoutExpired:
                exit_code = None
        elif run.process is not None:
            exit_code = run.process.returncode
    finally:
        if run.process is not None and run.process.poll() is None:
            run.process.kill()
            run.process.wait(30)
        for stranger in strangers.values():
            if stranger.poll() is None:
                stranger.kill()
    elapsed = time.monotonic() - start
    time.sleep(5.0)
    log.read(elapsed)
    leaked = alive(watch)  # before the cluster stops: a Ray actor left by the run would still be up
    for pid in leaked:  # leave nothing behind on the machine either
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if cluster is not None:
        cluster.shutdown()

    text = log.text()
    rows = read_races(run.run_dir / "races.csv")
    checked, outside = stored_outside_races(rows, resumed_at_rows) if rows and "stored_actions" in rows[0] else (0, -1)
    segments = [0, *resumed_at_rows, len(rows)]
    stored = sum(int(rows[b - 1]["env_steps"]) - int(rows[a]["env_steps"]) + int(rows[a]["stored_actions"])
                 for a, b in zip(segments, segments[1:]) if b > a) if rows and "stored_actions" in rows[0] else 0
    for i, fault in enumerate(faults):
        end = faults[i + 1].at_s if i + 1 < len(faults) else elapsed
        if fault.kind != "learner_kill":
            judge(fault, log, end, watch, GAMES)
        else:
            fault.lost = GAMES
    discarded = len(re.findall(r"race discarded: ", text))
    goals = []
    late = [f for f in faults if timeouts[f.kind] is not None and (f.detected_s is None or f.detected_s > timeouts[f.kind] + 5)]
    paused_lost = [f for f in faults if f.kind == "game_pause" and f.lost]
    goals.append(("every fault detected within its timeout + 5 s", not late,
                  f"{len(late)} late or undetected" + (f": {', '.join(f'{f.kind} at {f.at_s:.0f} s' for f in late)}" if late else "")))
    over = [f for f in faults if f.lost > (GAMES if f.kind == "learner_kill" else len(f.node_ports) or 1)]
    goals.append(("at most one race lost per fault (a learner kill: one per game; a node loss: one per game on it)",
                  not over and not paused_lost,
                  f"{len(over)} over" + (f"; a paused game lost {sum(f.lost for f in paused_lost)}" if paused_lost else "")))
    goals.append(("0 processes leaked", not leaked, f"{len(leaked)}{' ' + str(leaked) if leaked else ''}"))
    goals.append(("no stored action outside a kept race (races.csv)", outside == 0,
                  f"{outside} actions over {checked} lines checked" if outside >= 0 else "races.csv has no stored_actions"))
    if baseline_actions:
        goals.append(("actions stored at least 80 % of the fault-free run's", stored >= 0.8 * baseline_actions,
                      f"{stored} / {baseline_actions} = {stored / baseline_actions:.2f}"))
    shown = " ".join(["python bench/trackmania_soak.py", *(argv if argv is not None else sys.argv[1:])])
    lines = [
        f"command: `{shown}`",
        f"date: {time.strftime('%Y-%m-%d %H:%M', time.gmtime(wall_start))} UTC; commit: {commit or 'unknown'}",
        f"machine: {machine_line(describe_machine())}; load average at start {load_start:.1f}, at the end {os.getloadavg()[0]:.1f} "
        "(1 min; above the core count the machine was shared with other work)",
        f"trackmania_soak: {elapsed / 60:.1f} min, uni preset, stand-in configuration unthrottled, "
        + ("collector processes" if cluster is None else "Ray collector actors (half a CPU each) on a 2-node cluster "
           "on 127.0.0.1 (head: the learner, room for 2 actors; a worker node: room for 2)") + " "
        f"({' '.join('--cp ' + o for o in args.cp) or 'no overrides'}), seed {args.seed}, "
        + (f"a fault every {args.every:g} s ({', '.join(kinds)})" if kinds else "no faults (the baseline)"),
        f"exit status of the last incarnation after SIGINT: {exit_code} (130 = stopped by Ctrl-C; final checkpoint "
        f"written: {'final checkpoint written' in text}); incarnations {run.incarnation}",
        f"races done (races.csv): {len(rows)}; actions stored over the run: {stored} "
        f"({stored / max(elapsed, 1e-9):.1f} actions/s)",
        learner_line(run.run_dir / "tensorboard", stored),
        f"faults injected: {len(faults)} ({', '.join(f'{k} {sum(f.kind == k for f in faults)}' for k in kinds) or '-'})",
        f"games launched: {len(watch.launches)}; collector processes: {len(watch.collectors)}; "
        f"'race discarded' lines: {discarded}; tracebacks in the log: {text.count('Traceback')}",
        "",
        "| t (s) | fault | pid | port | detected after (s) | goal (s) | races lost | what the run did |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
        *[f"| {f.at_s:.0f} | {f.kind} | {f.pid} | {f.port or '-'} | "
          f"{'-' if f.detected_s is None else f'{f.detected_s:.1f}'} | "
          f"{'-' if timeouts[f.kind] is None else f'{timeouts[f.kind] + 5:g}'} | {f.lost} | "
          f"{(f.done or ('nothing: not a fault to the run' if f.kind == 'game_pause' else 'not seen')).replace('|', '/')}"
          f"{' (' + f.note + ')' if f.note else ''} |" for f in faults],
        "",
        *[f"goal: {name}: {'met' if ok else 'MISSED'} ({detail})" for name, ok, detail in goals],
    ]
    printout = "\n".join(lines)
    print(printout, flush=True)
    if args.out:
        Path(args.out).write_text(printout + "\n", encoding="utf-8")
    if args.keep is None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"run folder and logs kept in {work}")
    return 0 if exit_code == 130 and all(ok for _, ok, _ in goals) else 1


if __name__ == "__main__":
    sys.exit(main())
