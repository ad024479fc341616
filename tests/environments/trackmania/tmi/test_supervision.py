"""Supervision of game processes under faults, with stand-in games (our real plugin in the AngelScript host),
the real launcher and collector processes. One training run with two games goes through the faults in turn
(an orphan game of ours on a port at start, a learner stall, games killed and stopped during a learner
stall, a game killed, a game stopped, a collector killed), each checked on what the run logged since it was
injected; a run that cannot start (a stranger's program on the port) is a short run of its own. Each checks
that the run goes on, that the race in flight is handled as documented, that a game is relaunched where
needed, and that no process of ours is left at the end (by pid, not by name).

The faults share a run because each one's outcome is local: a fault touches one port or one collector, the
run is expected to recover fully before the next is injected (the check waits for new races on the ports
involved), and each fault's log lines are counted only from the moment it was injected. Starting one run
per fault cost ~60-90 s each on a quiet 2-core machine (the learner, two collectors and their games start,
then the first races); one shared run pays that once."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest

from environments.trackmania.tmi.games.launcher import LAUNCH_MARKER, PORT_MARKER
from environments.trackmania.tmi.games.processes import port_listeners, process_info
from environments.trackmania.tmi.standin.build import LAUNCH_SCRIPT, REPO_ROOT

from .standin_helpers import StandinRun, reaped, standin_available, standin_environ

pytestmark = pytest.mark.reliability

#: Generous deadlines (s): on a quiet 2-core machine a run's games race within ~20 s and a relaunched game
#: within ~5 s, but the suite shares the machine (load averages of 20 were seen); a passing test never
#: waits for them.
START_S = 240
RECOVER_S = 120
#: The games' in-race timeout of the shared run: ``environment.timeout_during_run_ms`` at its documented
#: minimum (10 s) instead of the default 30 s, so that a hung game is detected sooner and a learner stall
#: longer than the timeout is short (see LEARNER_STALL_S).
IN_RACE_TIMEOUT_S = 10.0
#: How long the learner is stopped: the games' in-race timeout plus a 5 s margin. The property under test
#: is "a collector never keeps its game waiting mid-race while the learner reads nothing": a collector that
#: blocked on its full queue share (2 chunks of 20 actions, full within a second of racing) would keep its
#: game waiting for the rest of the stall, longer than the in-race timeout, and the game would drop the race
#: ("race discarded"). The issue's 60 s against the default 30 s timeout proves the same thing with 2x the
#: timeout; 15 s against 10 s keeps the stall longer than the timeout, which is all that matters.
LEARNER_STALL_S = IN_RACE_TIMEOUT_S + 5.0
#: A fault injected "mid-race" (by the game's trace) can land just after the collector ended that race; such
#: a fault is repeated, this many times at most (see _game_killed_mid_race_is_relaunched).
MID_RACE_ATTEMPTS = 3


def _alive(pid: int) -> bool:
    return process_info(pid) is not None


def _no_race_counted_twice(run: StandinRun) -> None:
    """races.csv has at most one row per race the games played (each port's races from the traces of all
    the games that served it; the discarded race and the one in flight at the end have none)."""
    instances = {r["instance"] for r in run.races()}
    for instance in instances:
        port = run.base_port + int(instance)
        rows, started = len(run.races_of(port)), run.races_started(port)
        assert 0 < rows <= started, f"port {port}: {rows} races in races.csv, {started} races started"
        steps = [int(r["env_steps"]) for r in run.races_of(port)]
        assert steps == sorted(set(steps)), f"port {port}: a race was counted twice: {steps}"


def _start_orphan_game(run: StandinRun, port: int) -> int:
    """A stand-in game of "an earlier run" on ``port``: it carries rulka's launch marker and its parent
    is gone (``sh -c '... &'`` exits at once), as the game of a collector killed before the learner
    could kill it. Returns its pid once it listens."""
    env = dict(os.environ, **standin_environ(run.tmp_path), **{LAUNCH_MARKER: "an-earlier-run", PORT_MARKER: str(port)})
    subprocess.run(["sh", "-c", f'"{LAUNCH_SCRIPT}" {port} >"{run.tmp_path}/orphan_{port}.log" 2>&1 &'], env=env,
                   cwd=REPO_ROOT, check=True, start_new_session=True)
    run.wait(lambda: run.game_on(port) is not None and port_listeners(port).listening, RECOVER_S, f"the orphan on {port} listens")
    return run.game_on(port)


class _Since:
    """What the run logged since a fault was injected (each fault's lines are counted from its own start)."""

    def __init__(self, run: StandinRun) -> None:
        self.run, self.start = run, len(run.text())

    def text(self) -> str:
        return self.run.text()[self.start:]


def _orphan_of_ours_is_killed_before_launch(run: StandinRun, port: int, orphan: int) -> None:
    """The first launch on ``port`` kills the orphan (gone by pid, logged with its pid) and a new game races."""
    run.wait(lambda: not _alive(orphan), START_S, f"the orphan game {orphan} is killed")  # at the first launch
    run.wait(lambda: len(run.races_of(port)) >= 2, START_S, f"a new game races on port {port}")
    assert run.game_on(port) not in (None, orphan)
    assert f"port {port} is held by a game of ours left from an earlier run (pids [{orphan}])" in run.text()


def _learner_stalled_mid_race_loses_no_race(run: StandinRun, ports: list[int]) -> None:
    """SIGSTOP the learner (it reads no rollout, publishes no weights) for LEARNER_STALL_S while the games
    race, then SIGCONT: the collectors play the race in flight to its end into their local buffers and wait
    between races, so no game is kept waiting mid-race past its in-race timeout: no race is discarded, and
    each game races again after the stall.

    Why a stall of the in-race timeout (10 s) + 5 s proves what the issue's 60 s stall against the default
    30 s timeout does: a collector that waited on its full queue share mid-race would keep its game waiting
    for the rest of the stall, longer than the timeout either way, and that game would drop the race. Seen:
    with ``performance.collector_buffer_actions=20`` (the local buffer full after one chunk, so the
    collector waits mid-race) this check fails, both games' races in flight discarded."""
    run.wait_mid_race(ports[-1], RECOVER_S)
    since = _Since(run)
    os.kill(run.process.pid, signal.SIGSTOP)  # the learner stalls: reads nothing, publishes nothing
    try:
        time.sleep(LEARNER_STALL_S)
    finally:
        os.kill(run.process.pid, signal.SIGCONT)
    raced = {port: len(run.races_of(port)) for port in ports}
    run.wait(lambda: all(len(run.races_of(port)) > raced[port] for port in ports), RECOVER_S,
             "both games race after the learner stall")
    assert "discarded" not in since.text() and "died (exit code" not in since.text(), since.text()[-3000:]


def _trace_quiet(run: StandinRun, port: int, quiet_s: float, sizes: dict[int, tuple[int, float]]) -> bool:
    """The game on ``port`` has written nothing to its trace for ``quiet_s`` (it waits between races)."""
    path = run.tmp_path / f"trace_{port}.jsonl"
    size, now = path.stat().st_size if path.is_file() else 0, time.monotonic()
    if sizes.get(port, (None, 0.0))[0] != size:
        sizes[port] = (size, now)
    return now - sizes[port][1] >= quiet_s


def _games_failing_while_the_learner_stalls_are_relaunched_then(run: StandinRun, port_kill: int, port_stop: int,
                                                               stopped: list[int]) -> None:
    """SIGSTOP the learner; once both games wait between races (their collectors' chunks wait for the
    learner), SIGKILL one game and SIGSTOP the other. With the learner still stopped, each collector finds
    its game's fault while it waits (``check_between_episodes``, about once a second: the dead one at once,
    the stopped one after the in-race timeout), kills it and launches a new game on the port; nothing is
    discarded (no race was in flight), the collectors are not replaced, and after SIGCONT both ports race."""
    victims = {port_kill: run.game_on(port_kill), port_stop: run.game_on(port_stop)}
    collectors = {port: process_info(pid).ppid for port, pid in victims.items()}
    run.note_all()
    since = _Since(run)
    os.kill(run.process.pid, signal.SIGSTOP)
    try:
        sizes: dict[int, tuple[int, float]] = {}
        run.wait(lambda: all([_trace_quiet(run, port, 2.0, sizes) for port in victims]), RECOVER_S,
                 "both games wait between races")
        os.kill(victims[port_kill], signal.SIGKILL)
        os.kill(victims[port_stop], signal.SIGSTOP)
        stopped.append(victims[port_stop])
        stopped_at = time.monotonic()
        for port, victim in victims.items():
            run.wait(lambda: reaped(victim) and run.game_on(port) not in (None, victim), RECOVER_S,
                     f"the game on port {port} is replaced while the learner is stopped")
        assert time.monotonic() - stopped_at >= IN_RACE_TIMEOUT_S - 1, "the stopped game was killed before its timeout"
        started = {port: run.races_started(port) for port in victims}
    finally:
        os.kill(run.process.pid, signal.SIGCONT)
    for port, collector in collectors.items():
        assert process_info(run.game_on(port)).ppid == collector, "the same collector relaunched its game"
    # a new race in each new game's trace, then a mid-race frame of it: the rows races.csv gains first are
    # the races played before the stall (their chunks waited in the collectors), and a later fault's
    # "mid-race" must not be read from the killed game's last frame
    run.wait(lambda: all(run.races_started(port) > started[port] and run.mid_race(port) for port in victims),
             RECOVER_S, "both new games race after the stall")
    text = since.text()
    assert "discarded" not in text and "died (exit code" not in text, text[-3000:]
    head = "game instance {} (port {}) between races: "
    gone = [line for line in text.splitlines() if head.format(port_kill - run.base_port, port_kill) in line]
    hung = [line for line in text.splitlines() if head.format(port_stop - run.base_port, port_stop) in line]
    assert len(gone) == 1 and "the game is gone" in gone[0] and str(victims[port_kill]) in gone[0], text[-3000:]
    assert len(hung) == 1 and "the game hung" in hung[0] and str(victims[port_stop]) in hung[0], text[-3000:]


def _discard_line(run: StandinRun, port: int) -> str:
    return f"race discarded: game instance {port - run.base_port} (port {port})"


def _failures_between_races(run: StandinRun, port: int, text: str) -> int:
    """Lines of ``text`` where a collector logs a failure of its game while it starts the next race
    (nothing in flight, so nothing discarded)."""
    head = f"game instance {port - run.base_port} (port {port}): "
    return sum(line.startswith(head) for line in text.splitlines())


def _game_killed_mid_race_is_relaunched(run: StandinRun, port: int, other_port: int) -> None:
    """SIGKILL the game on ``port`` while it races: its collector sees the connection drop, discards that
    race (once: not in races.csv), reaps the dead game (no zombie), launches a new game on the same port
    that races; the collector itself is not replaced and the other game keeps racing.

    "While it races" is read from the game's trace (its last frame is of an unfinished race), but the
    collector may have ended that race at that very frame (a cut-off) and be starting the next one when the
    kill lands: then it logs a failure at the start (no race in flight, nothing discarded) and recovers the
    same way. Seen once in CI. Such a kill is checked for recovery and the kill is repeated on the new game,
    up to MID_RACE_ATTEMPTS times; one of them must land mid-race."""
    for _ in range(MID_RACE_ATTEMPTS):
        victim = run.game_on(port)
        collector = process_info(victim).ppid  # the launch script execs the game: its parent is the collector
        run.note_all()
        run.wait_mid_race(port, RECOVER_S)
        since = _Since(run)
        os.kill(victim, signal.SIGKILL)

        run.wait(lambda: reaped(victim), RECOVER_S, f"the killed game {victim} is reaped by its collector")
        run.wait(lambda: run.game_on(port) not in (None, victim), RECOVER_S, f"a new game serves port {port}")
        assert process_info(run.game_on(port)).ppid == collector, "the same collector relaunched its game"
        raced, other_raced = len(run.races_of(port)), len(run.races_of(other_port))
        run.wait(lambda: len(run.races_of(port)) > raced and len(run.races_of(other_port)) > other_raced,
                 RECOVER_S, f"the new game on port {port} and the other game race")
        text = since.text()
        assert _alive(collector) and "died (exit code" not in text, "the collector was not replaced"
        discarded = text.count(_discard_line(run, port))
        if discarded == 1:
            return
        assert discarded == 0 and _failures_between_races(run, port, text) == 1, text[-3000:]
    raise AssertionError(f"{MID_RACE_ATTEMPTS} kills of the game on port {port} all landed between races")


def _game_stopped_mid_race_is_killed_and_relaunched(run: StandinRun, port: int, stopped: list[int]) -> None:
    """SIGSTOP the game on ``port`` while it races (a hung game): its collector's read times out after the
    in-race timeout (IN_RACE_TIMEOUT_S), the race in flight is discarded (once), the stopped game is killed
    and reaped (no zombie) well before 60 s, so a SIGCONT at 60 s would find nothing; the same collector
    launches a new game on the port and it races.

    As for the kill, the stop may land just after the collector ended the race at the trace's last frame.
    The next race on the loaded map starts by a rewind, so the collector finds that game hung within the
    in-race timeout as well (not the start timeout, minutes): the same checks hold but nothing is
    discarded, and the stop is repeated on the new game (up to MID_RACE_ATTEMPTS)."""
    for _ in range(MID_RACE_ATTEMPTS):
        victim = run.game_on(port)
        collector = process_info(victim).ppid
        run.note_all()
        run.wait_mid_race(port, RECOVER_S)
        since = _Since(run)
        os.kill(victim, signal.SIGSTOP)
        stopped.append(victim)  # SIGCONT on a failure, before the run is killed
        stopped_at = time.monotonic()

        run.wait(lambda: reaped(victim), RECOVER_S, f"the stopped game {victim} is killed and reaped")
        killed_after = time.monotonic() - stopped_at
        assert IN_RACE_TIMEOUT_S - 1 <= killed_after < 60.0, \
            f"killed {killed_after:.1f} s after SIGSTOP; the read timeout is {IN_RACE_TIMEOUT_S:g} s"
        run.wait(lambda: run.game_on(port) not in (None, victim), RECOVER_S, f"a new game serves port {port}")
        assert process_info(run.game_on(port)).ppid == collector, "the same collector relaunched its game"
        raced = len(run.races_of(port))
        run.wait(lambda: len(run.races_of(port)) > raced, RECOVER_S, f"the new game on port {port} races")
        text = since.text()
        assert "died (exit code" not in text, text[-3000:]
        lines = [line for line in text.splitlines()
                 if line.startswith(_discard_line(run, port)) or _failures_between_races(run, port, line)]
        # only the game's one failure is logged (the other game's collector answers within the timeout
        # unless the machine starves it: not asserted, to keep the check about this game)
        assert len(lines) == 1 and "the game hung: killed" in lines[0] and str(victim) in lines[0], text[-3000:]
        if lines[0].startswith(_discard_line(run, port)):
            return
    raise AssertionError(f"{MID_RACE_ATTEMPTS} stops of the game on port {port} all landed between races")


def _collector_killed_mid_race_takes_its_game_along(run: StandinRun, port: int) -> None:
    """SIGKILL the collector of the game on ``port`` while it races: the learner kills that game (gone by
    pid, logged with its pid and port), its port is not held by it, a new collector and game take over
    and race."""
    victim_game = run.game_on(port)
    collector = process_info(victim_game).ppid
    assert process_info(collector).ppid == run.process.pid
    run.note_all()
    run.wait_mid_race(port, RECOVER_S)
    since = _Since(run)
    os.kill(collector, signal.SIGKILL)

    run.wait(lambda: not _alive(victim_game), RECOVER_S, f"the killed collector's game {victim_game} is gone")
    assert victim_game not in port_listeners(port).pids
    run.wait(lambda: run.game_on(port) not in (None, victim_game), START_S,  # a new collector process starts first
             f"a new game serves port {port}")
    raced = len(run.races_of(port))
    run.wait(lambda: len(run.races_of(port)) > raced, RECOVER_S, f"the new game on port {port} races")
    text = since.text()
    assert "died (exit code -9)" in text and f"pids {victim_game};" in text and f"ports {port}" in text, text[-3000:]


def test_supervision_faults_in_turn_in_one_run(tmp_path):
    """One run with two stand-in games goes through, in turn: an orphan game of ours (an earlier run's:
    rulka's launch marker, parent gone) holding port 0 at start is killed at the first launch and a new game
    races there; the learner SIGSTOPped for longer than the in-race timeout mid-race loses no race; with the
    learner stopped again, a game SIGKILLed and another SIGSTOPped while their collectors wait for it between
    races are found and relaunched during the stall; a game SIGKILLed mid-race is reaped and relaunched by its
    own collector (that race discarded, once); a game SIGSTOPped mid-race is killed after the in-race timeout
    and relaunched (that race discarded, once); a collector SIGKILLed mid-race takes its game along and a new
    collector and game race on its port. The run goes on after each; no race is counted twice; Ctrl-C
    (SIGINT) then stops it and no rulka, collector or game process is left (by pid)."""
    standin_available()
    run = StandinRun(tmp_path, collectors=2, overrides=(
        f"environment.timeout_during_run_ms={int(IN_RACE_TIMEOUT_S * 1000)}",
        # chunks of 20 actions and a queue share of 2 chunks per collector: a stalled learner fills the
        # share within a race, so a collector that blocked on it mid-race would keep its game waiting
        "performance.rollout_chunk_actions=20", "performance.max_rollout_queue_size=4"))
    port_a, port_b = run.base_port, run.base_port + 1
    stopped: list[int] = []
    stopped_cleanly = False
    try:
        orphan = _start_orphan_game(run, port_a)
        run.seen.add(orphan)
        run.start()
        _orphan_of_ours_is_killed_before_launch(run, port_a, orphan)
        run.wait(lambda: len(run.games()) == 2 and len(run.races_of(port_b)) >= 1, START_S, "two games race")
        run.note_all()
        _learner_stalled_mid_race_loses_no_race(run, [port_a, port_b])
        _games_failing_while_the_learner_stalls_are_relaunched_then(run, port_b, port_a, stopped)
        _game_killed_mid_race_is_relaunched(run, port_b, port_a)
        _game_stopped_mid_race_is_killed_and_relaunched(run, port_b, stopped)
        _collector_killed_mid_race_takes_its_game_along(run, port_a)
        _no_race_counted_twice(run)
        run.stop()
        stopped_cleanly = True
    finally:  # on a failure, leave nothing behind either: stopped games, the orphan, the run's collectors and games
        for pid in [] if stopped_cleanly else stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        for pid in [] if stopped_cleanly else run.ours():  # the orphan too, if the run never started
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        run.kill_everything()
    run.assert_nothing_left()


def test_supervision_strangers_process_holding_the_port_is_reported_not_killed(tmp_path):
    """A program that is not a game of ours (this test's own listening socket) holds the collector's port:
    rulka does not kill it; each launch fails with PortHeldError naming its pid and command line and the
    fix (stop it, ``kill PID``, or choose other ports, TMI_BASE_PORT), and after the collector's bounded
    retries the run stops with that message (exit status 1, no traceback of the learner), leaving the
    stranger's port as it was and no process of the run behind (by pid)."""
    standin_available()
    run = StandinRun(tmp_path, collectors=1)
    port = run.base_port
    stranger = socket.socket()
    stranger.bind(("127.0.0.1", port))
    stranger.listen()
    try:
        run.start()
        deadline = time.monotonic() + 240
        while run.process.poll() is None and time.monotonic() < deadline:
            run.note_all()  # every collector incarnation, to check them by pid at the end
            time.sleep(0.2)
        text = run.text()
        assert run.process.returncode == 1, text[-3000:]
        assert f"port {port} is held by a process that rulka did not launch (pid {os.getpid()}:" in text, text[-3000:]
        assert f"kill {os.getpid()}" in text and "TMI_BASE_PORT" in text, text[-3000:]
        assert port_listeners(port).pids == {os.getpid()}, "the stranger's socket is left alone"
        assert not run.races() and not run.games()
    finally:
        stranger.close()
        run.kill_everything()
    run.wait_gone(lambda: not [pid for pid in run.seen if _alive(pid)] and not run.ours(), 15, "nothing is left")
