"""Collector processes: ``gpu_collectors_count`` children (start method ``spawn``) that play and send.

Each child builds its own agent (acting only), ``envs_per_collector`` environments and a
:class:`~rulka.collection.collector.Collector`. It refreshes its inference network from the
:class:`~rulka.collection.shared.SharedPolicy` at the start of every episode and every
``update_inference_network_every_n_actions`` actions, reads the learner's counters for its
schedules, and sends :class:`~rulka.collection.rollout.Rollout` chunks through its own pipe,
at most ``max_rollout_queue_size / gpu_collectors_count`` unread at a time (a semaphore).

It never waits for the learner in the middle of a race (a game kept waiting mid-race drops the race
after its in-race timeout, 30 s for TrackMania): its chunks go to a local buffer, which a thread of
its own sends as the learner reads (its share of the queue, and the pipe: a send blocks until the
learner reads what does not fit in the pipe's 64 KB), and back-pressure applies between races: no environment starts a new episode while chunks
wait; once every environment is between races, the collector waits for the learner. A buffer that
reaches ``collector_buffer_actions`` actions mid-race (the learner stalled that long) makes it wait
anyway, with a warning. Its heartbeat goes on while it waits, sends, and resets an environment
(launching a game, loading a map, the countdown), so ``collector_timeout_s`` need only cover one step.

The learner (:class:`ProcessCollection`) watches each child: one that raised, died or stayed
silent past ``collector_timeout_s`` is replaced by a new incarnation; the unfinished episodes of
the old one are dropped, what it had sent is kept. One pipe per incarnation means a child killed
in the middle of a message can only break its own pipe, which is thrown away with it. A thread of the
learner's waits on the children's exits, so a collector that dies has its games killed within a
fraction of a second whatever the learner is doing (a gradient update slowed by the dead collector's
game, left racing on its own and spinning a core, took 5 s in a soak on 2 cores); the learner's next
check (:meth:`~ProcessCollection.poll`, or between updates) replaces it.

A collector also publishes the processes its environments own (a game it launched, see
:mod:`rulka.collection.owned`) every half second. A collector replaced or killed by the learner never
closes its environments, so the learner kills those processes itself before a replacement starts:
no game is orphaned and no port stays held.
"""
from __future__ import annotations

import collections
import logging
import multiprocessing.connection
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.multiprocessing as tmp

from agents.agent import Agent
from rulka.collection.collector import Collector
from rulka.collection.owned import identify, kill_and_wait, mark_collector_process, owned_pids, owned_ports
from rulka.collection.remote import STARTUP_GRACE_S, RemoteCollection, killed_clause
from rulka.collection.rollout import Rollout
from rulka.collection.collector_setup import CollectorSetup
from rulka.collection.shared import SharedPolicy, SharedStatus
from rulka.user_modules import UserModules
from rulka.core_types import Counters

log = logging.getLogger(__name__)

#: A collector that did not act for this long (a full queue, a Ray actor between calls) reloads the
#: weights before acting again, instead of playing up to N more actions with weights that aged meanwhile.
REFRESH_AFTER_PAUSE_S = 0.1
#: Seconds the exit watcher waits on the children's sentinels before it looks for new children.
EXIT_WATCH_S = 0.25


def build_collector(setup: CollectorSetup, collector_id: int, incarnation: int, device: str,
                    read_counters: Callable[[Counters], None],
                    load_policy: Callable[[torch.nn.Module, int], tuple[int, int] | None],
                    episodes_started: dict[int, int] | None = None,
                    on_reset: Callable[[bool], None] | None = None) -> Collector:
    """The acting agent and Collector of one collector incarnation (processes and Ray actors alike).

    ``episodes_started`` (environment instance -> episodes): where the previous incarnation, or the
    run before a resume, left each environment's plan and reset seeds. ``on_reset`` brackets every
    environment reset (True before, False after).

    Before each batch of actions the collector reads the learner's counters (``read_counters``) and,
    at an episode start, every ``update_inference_network_every_n_actions`` actions and after a pause
    of more than ``REFRESH_AFTER_PAUSE_S`` (it waited for the learner or for a call), asks
    ``load_policy(network, held_version)`` for newer weights: it copies them into ``network`` and
    returns (version, gradient updates), or returns None when nothing newer is published.
    """
    seed = setup.seed + 7_919 * (collector_id + 1) + 104_729 * incarnation
    agent = setup.make_agent(device, seed)
    agent.online_network.requires_grad_(False)
    every = max(1, setup.config.performance.update_inference_network_every_n_actions)
    held = {"version": 0, "updates": 0, "since": every, "acted_at": 0.0}

    def before_acting(starting: bool) -> int:
        read_counters(agent.counters)
        now = time.monotonic()
        paused = now - held["acted_at"] > REFRESH_AFTER_PAUSE_S  # waited for the learner: the weights aged
        held["acted_at"] = now
        if starting or paused or held["since"] >= every:
            loaded = load_policy(agent.online_network, held["version"])
            if loaded is not None:
                held["version"], held["updates"] = loaded
            held["since"] = 0
        held["since"] += 1
        return held["updates"]

    instances = setup.instances(collector_id)
    started = [int((episodes_started or {}).get(i, 0)) for i in instances]
    return setup.make_collector(agent, collector_id, incarnation, instances, continues=False,
                                before_acting=before_acting, episodes_started=started, on_reset=on_reset)


def _collector_main(_modules: UserModules, setup: CollectorSetup, collector_id: int, incarnation: int, device: str,
                    torch_threads: int, policy: SharedPolicy, status: SharedStatus, conn: Any, slots: Any,
                    episodes_started: dict[int, int]) -> None:
    """Body of a collector process (``_modules``, unpickled first, imported the user's preset files).

    It never waits for the learner in the middle of a race: its chunks go to a local :class:`_Outbox`,
    whose own thread sends them as the learner makes room (``slots``, its share of
    ``max_rollout_queue_size``, and the pipe, which holds only 64 KB). The collector waits only when
    every environment is between races (no new race starts while chunks wait), or when the outbox
    holds ``collector_buffer_actions`` actions (the learner stalled that long; see :class:`_Outbox`).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the learner stops us
    mark_collector_process()  # the learner, our parent, kills our games if we die: their guards leave it time
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # close our games first: the learner may be frozen
    torch.set_num_threads(max(1, torch_threads))
    parent = tmp.parent_process()
    collector = None
    built: dict[str, Collector] = {}
    heart = _beat_while_waiting(status, collector_id, built)
    send_lock = threading.Lock()  # one message at a time on the pipe (the outbox's thread, an error report)

    def stopping() -> bool:
        return bool(status.stop.value) or (parent is not None and not parent.is_alive())

    try:
        heart.resetting(True)  # building the environments may take long too (beats, bounded like a reset)
        try:
            collector = build_collector(setup, collector_id, incarnation, device, status.read_counters,
                                        policy.load_into, episodes_started, on_reset=heart.resetting)
        finally:
            heart.resetting(False)
        built["collector"] = collector
        outbox = _Outbox(conn, send_lock, slots, status, collector_id, stopping,
                         setup.config.performance.collector_buffer_actions)
        while not status.stop.value:
            status.beat(collector_id)
            outbox.check()
            racing = collector.racing
            if outbox.waiting and (not racing or outbox.full):
                # every game waits between races (back-pressure), or the local buffer is full: wait here
                if not outbox.wait_for_room(mid_race=racing, meanwhile=collector.check_waiting):
                    return
                continue
            rollouts = collector.step(bool(status.heatup.value), start_episodes=not outbox.waiting)
            status.actions[collector_id] += collector.last_step_actions
            outbox.extend(rollouts)
            if parent is not None and not parent.is_alive():
                return
    except SystemExit:  # SIGTERM: the exit status tells the learner
        raise
    except BaseException:  # noqa: BLE001 - report whatever killed us, then die
        try:
            if send_lock.acquire(timeout=5.0):  # the outbox's thread may be stuck in a send nobody reads
                conn.send(("error", traceback.format_exc()))
        except Exception:  # noqa: BLE001
            pass
        raise SystemExit(1) from None
    finally:
        if collector is not None:
            close_and_kill_leftovers(collector)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM (``kill PID``, a service manager, a session's end): leave through ``finally``, which closes
    the environments and kills what they leave running, instead of dying at once with games orphaned
    (the learner, which kills a dead collector's games, may be frozen or gone too)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    raise SystemExit(128 + signum)


#: Seconds a closing collector waits for the processes it killed to be gone (their ports freed).
LEFTOVER_WAIT_S = 5.0


def close_and_kill_leftovers(collector: Collector) -> list[int]:
    """Close ``collector``'s environments, then kill the processes they owned before closing that still
    run (a close that raised, or timed out on a hung game), each only under its start time; the pids
    killed."""
    owned: list[int] = []
    for slot in collector.slots:
        try:
            owned.extend(owned_pids(slot.level.env))
        except Exception:  # noqa: BLE001 - an environment half built or half closed
            pass
    processes = identify(owned)
    try:
        collector.close()
    except BaseException:  # noqa: BLE001 - a close that fails (or is interrupted) must not spare the games
        pass
    return kill_and_wait(processes, LEFTOVER_WAIT_S)


class _Outbox:
    """A collector's local buffer of rollouts not yet handed to the learner, and the thread that sends them.

    The thread sends the oldest rollout once the learner has a free slot, blocking in the pipe as long
    as the learner takes to read it; the collector's main thread never blocks on the learner while
    racing. ``waiting``: some rollout is not yet sent (the learner has enough unread: start no new
    race). ``full``: the buffer holds ``max_actions`` actions or more; the collector then waits even
    in the middle of a race (``wait_for_room``, logged once per stall): a game kept waiting past its
    in-race timeout then loses the race in flight. So the buffer holds at most ``max_actions`` plus
    one step's chunks.
    """

    def __init__(self, conn: Any, send_lock: threading.Lock, slots: Any, status: SharedStatus, collector_id: int,
                 stopping: Callable[[], bool], max_actions: int) -> None:
        self.conn, self.send_lock, self.slots, self.status = conn, send_lock, slots, status
        self.collector_id, self.stopping = collector_id, stopping
        self.max_actions = max(1, int(max_actions))
        self.pending: collections.deque[Rollout] = collections.deque()  # the oldest is being sent
        self.actions = 0
        self.error: BaseException | None = None
        self._changed = threading.Condition()
        self._warned = False
        threading.Thread(target=self._run, name="rulka-outbox", daemon=True).start()

    @property
    def waiting(self) -> bool:
        return bool(self.pending)

    @property
    def full(self) -> bool:
        return self.actions >= self.max_actions

    def extend(self, rollouts: list[Rollout]) -> None:
        if not rollouts:
            return
        with self._changed:
            for rollout in rollouts:
                self.pending.append(rollout)
                self.actions += rollout.length
            self._changed.notify_all()

    def check(self) -> None:
        """Raise what broke the sending thread (the pipe), in the main thread."""
        if self.error is not None:
            raise RuntimeError(f"sending a rollout failed: {self.error!r}") from self.error

    def wait_for_room(self, mid_race: bool, meanwhile: Callable[[], None] | None = None) -> bool:
        """Wait, heartbeat going, until the buffer is empty (between races) or no longer full (mid-race),
        calling ``meanwhile`` (outside the lock) every half second; False when the collector must stop."""
        if mid_race and not self._warned:
            self._warned = True
            log.warning("collector %d: %d actions wait for the learner (performance.collector_buffer_actions = %d) "
                        "in the middle of a race: waiting; a game kept waiting past its in-race timeout loses the "
                        "race", self.collector_id, self.actions, self.max_actions)
        while True:
            with self._changed:
                if not (self.pending and (not mid_race or self.full)):
                    break
                self.status.beat(self.collector_id)
                self.check()
                if self.stopping():
                    return False
                self._changed.wait(0.5)
            if meanwhile is not None:
                meanwhile()
        if not self.pending:
            self._warned = False
        return True

    def _run(self) -> None:
        try:
            while True:
                with self._changed:
                    while not self.pending:
                        self._changed.wait()
                    rollout = self.pending[0]
                while not self.slots.acquire(timeout=0.5):  # the learner has enough unread
                    if self.stopping():
                        return
                with self.send_lock:
                    self.conn.send(("rollout", rollout))
                self.status.sent[self.collector_id] += 1
                with self._changed:
                    self.pending.popleft()
                    self.actions -= rollout.length
                    self._changed.notify_all()
        except BaseException as error:  # noqa: BLE001 - the pipe broke: the main thread raises it
            self.error = error


#: A reset (a game's launch, map load and countdown) keeps the collector's heartbeat going for at most
#: this long; an environment that resets for longer looks hung to the learner's watchdog.
RESET_HEARTBEAT_LIMIT_S = 3_600.0


class _Heart:
    """The heartbeat thread's switch: ``resetting`` (the Collector's ``on_reset``)."""

    def __init__(self) -> None:
        self.reset_since: float | None = None

    def resetting(self, flag: bool) -> None:
        self.reset_since = time.monotonic() if flag else None

    def beating(self) -> bool:
        since = self.reset_since
        return since is not None and time.monotonic() - since < RESET_HEARTBEAT_LIMIT_S


def _beat_while_waiting(status: SharedStatus, collector_id: int, built: dict[str, Collector]) -> _Heart:
    """A thread that keeps the heartbeat going while the main thread resets an environment (launches a game, loads a map, waits for the countdown: up to
    ``RESET_HEARTBEAT_LIMIT_S`` per reset), so that ``collector_timeout_s`` need only cover one step of
    a race; and every 0.5 s publishes the processes owned by the environments of
    ``built["collector"]`` (once built), also while the main thread is blocked launching a game."""
    heart = _Heart()
    reported: list[Any] = [None]

    def beat() -> None:
        while True:
            time.sleep(0.5)
            if heart.beating():
                status.beat(collector_id)
            collector = built.get("collector")
            if collector is not None:
                try:
                    _report_owned(status, collector_id, collector, reported)
                except Exception:  # noqa: BLE001 - an environment closing under us; next round
                    pass

    threading.Thread(target=beat, name="rulka-heartbeat", daemon=True).start()
    return heart


def _report_owned(status: SharedStatus, collector_id: int, collector: Collector, reported: list[Any]) -> None:
    pids: list[int] = []
    ports: list[int] = []
    for slot in collector.slots:
        pids.extend(owned_pids(slot.level.env))
        ports.extend(owned_ports(slot.level.env))
    key = (tuple(pids), tuple(ports))
    if key != reported[0]:
        status.report_owned(collector_id, identify(pids), tuple(ports))
        reported[0] = key


@dataclass
class _Child:
    collector_id: int
    incarnation: int
    process: Any
    conn: Any
    slots: Any
    started: float
    sent_anything: bool = False
    error: str = ""
    #: What :meth:`ProcessCollection._kill_owned` said when it killed this child's processes after its death
    #: (None until then): the exit watcher or the learner's check, whichever came first.
    killed: str | None = None


class ProcessCollection(RemoteCollection[_Child]):
    """Starts, feeds, watches and stops the collector processes (``workers``: the living children).

    Args:
        setup: how a collector builds its agent, environments and plans.
        agent: the learner's agent (its ``online_network`` is published).
        on_event: called with a one-line message when a collector fails or is replaced.
    """

    def __init__(self, setup: CollectorSetup, agent: Agent, on_event: Callable[[str], None] | None = None) -> None:
        super().__init__(setup, agent, on_event)
        self.slots_per_collector = max(1, setup.config.performance.max_rollout_queue_size // self.num_collectors)
        self.ctx = tmp.get_context("spawn")
        self.policy = SharedPolicy(agent.online_network, self.ctx)
        self.status = SharedStatus(self.num_collectors, self.ctx)
        #: Chunks read from collectors found dead (``check_health``, from :meth:`poll` or :meth:`supervise`),
        #: handed over by the poll under way or the next one.
        self._pending: list[Rollout] = []
        #: Held while a dead child's processes are killed (the exit watcher) and while the learner's check ends one.
        self._death_lock = threading.RLock()

    @property
    def children(self) -> list[_Child | None]:
        """Each collector's current process (None once stopped)."""
        return self.workers

    # ------------------------------------------------------------------ lifecycle
    def _watch(self) -> None:
        """The exit watcher: wait on the children's sentinels; a child that exited has the processes it
        reported killed at once. Replacing it stays with the learner's thread (its pipe, its episodes)."""
        left_to_the_learner: set[int] = set()  # children whose kill failed here: the learner's check tries again
        while not self._stop_watching.is_set():
            children = {c.process.sentinel: c for c in list(self.workers)
                        if c is not None and c.killed is None and id(c) not in left_to_the_learner}
            if not children:
                self._stop_watching.wait(EXIT_WATCH_S)
                continue
            try:
                exited = multiprocessing.connection.wait(list(children), EXIT_WATCH_S)
            except (OSError, ValueError):
                continue  # a sentinel closed under it (the collection stopping): look again
            for sentinel in exited:
                if not self._stop_watching.is_set():
                    try:
                        self._kill_for_dead(children[sentinel], announce=True)
                    except Exception as error:  # noqa: BLE001 - the learner's check kills and replaces it instead
                        left_to_the_learner.add(id(children[sentinel]))
                        log.warning("the exit watcher: collector %d: %s", children[sentinel].collector_id, error)

    def _kill_for_dead(self, child: _Child, announce: bool = False) -> str:
        """Kill the processes dead ``child`` reported, once (the exit watcher or the learner's check, whichever
        comes first); the message's clause. ``announce``: log the death now (the watcher's find)."""
        with self._death_lock:
            if child.killed is None:
                if announce:
                    child.process.join(1.0)  # its sentinel closes a moment before it can be reaped (its exit code)
                    code = child.process.exitcode
                    died = f" (exit code {code})" if code is not None else ""
                    log.warning("collector %d died%s: its processes are killed now, the learner replaces it at "
                                "its next check", child.collector_id, died)
                child.killed = self._kill_owned(child.collector_id)
            return child.killed

    def _spawn(self, collector_id: int) -> None:
        self.incarnations[collector_id] += 1
        incarnation = self.incarnations[collector_id]
        receiver, sender = self.ctx.Pipe(duplex=False)
        slots = self.ctx.Semaphore(self.slots_per_collector)
        process = self.ctx.Process(
            target=_collector_main, name=f"rulka-collector-{collector_id}", daemon=True,
            args=(UserModules(), self.setup, collector_id, incarnation, str(self.device), self.torch_threads, self.policy,
                  self.status, sender, slots, dict(self.episodes.started)),
        )
        self.status.heartbeat[collector_id] = time.monotonic() + STARTUP_GRACE_S
        process.start()
        sender.close()  # only the child writes: its death closes the pipe (EOF) instead of hanging a read
        self.workers[collector_id] = _Child(collector_id, incarnation, process, receiver, slots, time.monotonic())

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask every collector to stop, then make sure none is left."""
        self.status.stop.value = 1
        self._stop_watcher()  # stopping collectors exit: closing their games is theirs, or this method's
        if not any(self.children):
            return
        deadline = time.monotonic() + timeout_s
        for child in self.children:
            if child is None:
                continue
            # A child blocked sending a rollout nobody reads would never see the stop flag and be
            # killed below before it closes its environments (a killed collector's games outlive the
            # run): read and drop what it sends until it has exited.
            while child.process.is_alive() and time.monotonic() < deadline:
                try:
                    if child.conn.poll(0.05):
                        child.conn.recv()
                except (EOFError, OSError):
                    child.process.join(max(0.0, deadline - time.monotonic()))
                    break
            if child.process.is_alive():
                log.warning("collector %d did not stop within %g s: killed", child.collector_id, timeout_s)
                child.process.kill()
                child.process.join(5.0)
            child.conn.close()
            self._kill_owned(child.collector_id)  # a killed collector's games; a clean one closed them
        self.workers = [None] * self.num_collectors

    # ------------------------------------------------------------------ data
    def publish(self, agent: Agent) -> None:
        self.policy.publish(agent.online_network, agent.counters.gradient_updates)

    def publish_counters(self, agent: Agent, heatup: bool) -> None:
        self.status.publish_counters(agent.counters, heatup)

    def poll(self, heatup: bool, timeout: float = 0.05) -> list[Rollout]:
        """Rollouts that arrived within ``timeout`` seconds (all that are waiting, at least one if any), and
        what the collectors found dead since the last poll had sent."""
        rollouts, self._pending = self._pending, []
        live = {child.conn: child for child in self.children if child is not None}
        ready = multiprocessing.connection.wait(list(live), 0.0 if rollouts else timeout) if live else []
        for conn in ready:
            rollouts += self._drain(live[conn])
        self.check_health()
        rollouts, self._pending = rollouts + self._pending, []
        return rollouts

    def _drain(self, child: _Child) -> list[Rollout]:
        """What ``child`` sent that waits in its pipe (all it sent, once it has exited); an error report
        is kept as ``child.error``."""
        rollouts: list[Rollout] = []
        while True:
            try:
                if not child.conn.poll():
                    break
                kind, payload = child.conn.recv()
            except (EOFError, OSError):
                break  # the child is gone; check_health replaces it
            if kind == "rollout":
                child.slots.release()
                self._received(child, [payload])
                rollouts.append(payload)
            else:
                child.error = str(payload)
        return rollouts

    def supervise(self) -> None:
        """A dead collector (its exit code) or a silent one (its heartbeat), found without reading the pipes
        of the living ones; what a dead one sent is read first (its error report names why it died) and
        handed over by the next :meth:`poll`."""
        self.check_health()

    def check_health(self) -> None:
        with self._death_lock:  # the exit watcher waits: a child hung and killed here is not reported as died
            self._check_health()

    def _check_health(self) -> None:
        now = time.monotonic()
        for i, child in enumerate(self.children):
            if child is None:
                continue
            exitcode = child.process.exitcode
            silent = now - self.status.heartbeat[i]
            if exitcode is None and silent <= self.timeout_s and not child.error:
                continue
            if exitcode is None:  # hung, or on its way out after an error: make sure it is gone
                child.process.kill()
                child.process.join(5.0)
            self._pending += self._drain(child)  # its last chunks and its error report, sent before it died
            if child.error:
                reason = f"raised an error:\n{child.error.rstrip()}"
            elif exitcode is None:
                reason = f"sent nothing for {silent:.0f} s (collector_timeout_s = {self.timeout_s:g})"
            else:
                reason = f"died (exit code {exitcode})"
            self._replace(child, reason)

    def _kill_owned(self, collector_id: int, wait_s: float = 5.0) -> str:
        """Kill the processes that collector ``collector_id`` (dead by now) last reported, if they still
        run under the reported start time; wait up to ``wait_s`` for them to be gone (ports freed).
        Returns a clause for the message ("" when nothing was killed)."""
        processes, ports = self.status.read_owned(collector_id)
        killed = kill_and_wait(processes, wait_s)
        self.status.clear_owned(collector_id)
        return killed_clause(collector_id, killed, ports)

    def _end_worker(self, child: _Child) -> str:
        i = child.collector_id
        child.conn.close()
        killed = self._kill_for_dead(child)
        self.status.sent[i] = self.received[i]  # what the dead child sent and nobody read is gone
        return killed

    # ------------------------------------------------------------------ metrics
    def alive_pids(self) -> list[int]:
        return [c.process.pid for c in self.children if c is not None and c.process.is_alive()]

    def queue_depth(self) -> int:
        return max(0, sum(self.status.sent[:]) - self.stats.received)

    def actions_per_collector(self) -> list[int]:
        return [int(a) for a in self.status.actions[:]]


def child_pids() -> list[int]:
    """PIDs of this process's living multiprocessing children (for tests and shutdown checks)."""
    return [p.pid for p in tmp.active_children() if p.pid != os.getpid()]
