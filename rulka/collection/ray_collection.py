"""Collectors as Ray actors (``performance.collector_backend: ray``): the same Collector, on any node.

Each actor builds its agent and environments with :func:`~rulka.collection.processes.build_collector`,
the code the collector processes run, and plays in a thread of its own, as a collector process does:
its :class:`~rulka.collection.rollout.Rollout` chunks go to a local buffer, and a ``collect`` call
returns what the buffer holds (waiting for at least one chunk). The learner (:class:`RayCollection`)
keeps ``CALLS_IN_FLIGHT`` calls queued per actor and picks up finished calls with ``ray.wait``
(timeout ``poll``'s, never blocking longer), in the order each actor was asked.

An actor never waits for the learner in the middle of a race (a real game kept waiting drops the race
after its in-race timeout): while chunks wait in its buffer (the learner paused: a checkpoint, an
evaluation) it plays the races in flight to their ends and starts no new one; it waits in the middle
of a race only when the buffer holds ``collector_buffer_actions`` actions (with a warning).

Weights, counters and the heatup flag reach an actor while a call runs: every ``publish`` is one
``ray.put`` of the network's tensors as numpy arrays, and the learner sends each actor a ``refresh``
(the newest reference, wrapped in a list so Ray does not fetch it with the call, the learner's
counters and its heatup flag) in a concurrency group of its own, so it runs beside the ``collect``
under way. The actor reads the newest refresh before every batch of actions (counters, heatup)
and fetches the weights with ``ray.get`` at the points the process collectors refresh theirs (an
episode start, every ``update_inference_network_every_n_actions`` actions), only when their
version is newer than what it holds. Counters alone are sent at most every
``COUNTERS_REFRESH_EVERY_S``; weights and a change of the heatup flag at once.

Placement: actors are created with the ``SPREAD`` scheduling strategy, so a cluster's collectors
spread over the nodes that have their resources instead of filling the first one.

Faults: an actor whose call raised, that died (killed, its node lost) or that stayed silent past
``collector_timeout_s`` is killed and replaced by a new incarnation, which Ray places wherever its
resources (CPUs, GPUs, custom resources such as ``{"tmnf": 1}``) are free; its unfinished episodes
are dropped, what it returned is kept. ``MAX_FAILED_STARTS`` failures in a row before any rollout
stop the run with :class:`~rulka.collection.remote.CollectorFailure`.

Games: each actor reports the processes its environments own (:mod:`rulka.collection.owned`: pids
with their start times, ports) with every call's result, and on request (``owned``, in the refresh
group, so it answers while a ``collect`` is stuck launching a game): a thread of the learner's, the actor
watcher, asks every half second, so an actor that died has its games killed as soon as Ray reports the death,
whatever the learner's own thread is doing (one gradient update can take seconds on a busy CPU), and the
learner's next check (:meth:`~RayCollection.poll`, or between updates) replaces it. Before an actor is replaced, and
when the collection stops, the learner asks a live actor for a fresh report, ends the actor and kills
the processes last reported, each only under its reported start time: on the learner's own node
directly, on another node through that node's :class:`~rulka.collection.owned.ProcessKiller`, a small
actor (no CPU) the learner starts there as soon as an actor there reports a process, so a kill is a
method call, not a task whose new worker process would start first (seconds on a busy machine). ``stop``
first lets each actor close its environments (``close``), which ends their games politely. A lost
node runs no such task: there the environments' own guards must end the games (TrackMania's launcher
gives each game a guard process that kills it when the process that launched it, the actor, is gone).
"""
from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import numpy as np
import torch

from agents.agent import Agent
from rulka.collection.collector import WAITING_CHECK_INTERVAL_S
from rulka.collection.owned import (ProcessKiller, identify, kill_and_wait, mark_collector_process, owned_pids,
                                    owned_ports)
from rulka.collection.processes import build_collector
from rulka.collection.remote import STARTUP_GRACE_S, RemoteCollection, killed_clause
from rulka.collection.rollout import Rollout
from rulka.collection.collector_setup import CollectorSetup
from rulka.config import ConfigError
from rulka.core_types import Counters
from rulka.user_modules import UserModules

log = logging.getLogger(__name__)

#: ``collect`` calls queued per actor: one runs while the next waits, so the actor never idles on the learner.
CALLS_IN_FLIGHT = 2
#: Seconds between two refreshes that carry only counters (weights and heatup changes go at once).
COUNTERS_REFRESH_EVERY_S = 0.1
#: The concurrency group of ``refresh``, beside the default group where ``collect`` runs (one at a time).
REFRESH_GROUP = "refresh"
#: How Ray places collector actors: spread over the nodes that have their resources.
SCHEDULING_STRATEGY = "SPREAD"
#: Seconds the learner waits for an actor's fresh report of its games, and for them to be gone once killed.
OWNED_WAIT_S = 2.0
#: Seconds between two questions the actor watcher (a thread of the learner's) asks each actor.
ACTOR_WATCH_S = 0.5
_COUNTER_NAMES = ("env_steps", "episodes", "gradient_updates", "transitions_sampled")


class GamesReport(NamedTuple):
    """An actor's report of itself and its games (:meth:`RayCollectorActor.owned`)."""

    node_id: str
    #: The actor's own process id (known to the learner from its first report, before any call returned).
    actor_pid: int
    #: (pid, start time) of each process its environments own.
    processes: list[tuple[int, int]]
    ports: list[int]
    #: What broke its playing thread (``"ErrorType: message"``), or None while it plays.
    broken: str | None


def import_ray() -> Any:
    """The ``ray`` module, or a ConfigError that says how to install it."""
    try:
        import ray
    except ImportError as error:
        raise ConfigError("performance.collector_backend: ray needs Ray, which is not installed "
                          f"({error}); install it with pip install 'rulka[ray]' (or set collector_backend: "
                          "processes)") from None
    return ray


def connect(address: str | None) -> Any:
    """Join the Ray cluster at ``address`` (``auto`` or ``HOST:PORT``), or start a local instance.

    A Ray already initialised in this process (a test's ``ray.init``) is used as it is. A local
    instance runs without the dashboard, has this machine's CPUs and GPUs, and runs its workers at
    normal priority (a cluster's nodes choose theirs: ``RAY_worker_niceness=0 ray start ...``).
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray
    if address in (None, "", "none", "local"):
        # Ray runs its workers at niceness 15 by default: on a busy machine collector actors would then
        # starve behind the learner; 0 gives them the priority collector processes have.
        # A local instance serves this machine alone: its sockets stay on 127.0.0.1.
        ray.init(address="local", include_dashboard=False, logging_level=logging.WARNING, log_to_driver=True,
                 _node_ip_address="127.0.0.1", _system_config={"worker_niceness": 0})
    else:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=True)
    return ray


class RayCollectorActor:
    """Body of one collector actor (made remote by :func:`_actor_class`)."""

    def __init__(self, _modules: UserModules, setup: CollectorSetup, collector_id: int, incarnation: int,
                 device: str, torch_threads: int, episodes_started: dict[int, int] | None = None) -> None:
        """``_modules``, deserialised first, imported the user's preset files on this node."""
        import ray

        mark_collector_process()  # the raylet: while the node lives the learner kills our games itself
        self.collector_id = collector_id
        self.max_buffer_actions = max(1, int(setup.config.performance.collector_buffer_actions))

        torch.set_num_threads(max(1, torch_threads))
        # the fetched arrays are read-only views of the object store; they are only copied from
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        self._ray = ray
        #: The newest refresh: (sequence number, counters, heatup). Replaced as a whole (one assignment)
        #: by ``refresh``, which runs in another thread.
        self.board: tuple[int, np.ndarray, bool] = (-1, np.zeros(len(_COUNTER_NAMES), dtype=np.int64), True)
        #: The newest weights, already fetched: (version, updates, {name: array}) or None.
        self.weights: tuple[int, int, dict[str, np.ndarray]] | None = None
        self._lock = threading.Lock()
        self.collector = build_collector(setup, collector_id, incarnation, device, self._read_counters,
                                         self._load_policy, episodes_started)
        self.node = ray.util.get_node_ip_address()
        self.node_id = ray.get_runtime_context().get_node_id()
        self.pid = os.getpid()
        #: Chunks played and not yet returned by a call, their actions, the actions played since the last
        #: call returned, what broke the playing thread; guarded by ``_changed``.
        self.buffer: list[Rollout] = []
        self.buffer_actions = 0
        self.played = 0
        self.error: BaseException | None = None
        self._changed = threading.Condition()
        self._stopping = False
        self._warned = False
        self._player = threading.Thread(target=self._play, name="rulka-ray-player", daemon=True)
        self._player.start()

    def _play(self) -> None:
        """The playing thread: step the environments, chunks into the buffer. While chunks wait (no call
        takes them: the learner paused) it starts no new race, and once every environment is between
        races it waits; in the middle of a race it waits only with a full buffer."""
        try:
            while True:
                with self._changed:
                    if self._stopping:
                        return
                    waiting = bool(self.buffer)
                    hold = waiting and (not self.collector.racing or self.buffer_actions >= self.max_buffer_actions)
                    if hold:
                        if self.collector.racing and not self._warned:
                            self._warned = True
                            log.warning("collector %d: %d actions wait for the learner (performance."
                                        "collector_buffer_actions = %d) in the middle of a race: waiting; a game "
                                        "kept waiting past its in-race timeout loses the race", self.collector_id,
                                        self.buffer_actions, self.max_buffer_actions)
                        self._changed.wait(WAITING_CHECK_INTERVAL_S)
                    elif not waiting:
                        self._warned = False
                if hold:  # the games waiting between races are checked meanwhile (outside the lock)
                    self.collector.check_waiting()
                    continue
                rollouts = self.collector.step(bool(self.board[2]), start_episodes=not waiting)
                with self._changed:
                    self.played += self.collector.last_step_actions
                    self.buffer.extend(rollouts)
                    self.buffer_actions += sum(r.length for r in rollouts)
                    if rollouts:
                        self._changed.notify_all()
        except BaseException as error:  # noqa: BLE001 - the next call raises it in the learner
            with self._changed:
                self.error = error
                self._changed.notify_all()

    def refresh(self, seq: int, counters: np.ndarray, heatup: bool,
                weights: tuple[int, int, list[Any]] | None) -> None:
        """The learner's newest weights reference, counters and heatup flag (older ones are ignored).

        Newer weights are fetched here, in the refresh thread, so the playing thread only copies them.
        """
        if seq <= self.board[0]:
            return
        if weights is not None and (self.weights is None or weights[0] > self.weights[0]):
            version, updates, (ref,) = weights
            arrays = self._ray.get(ref)
            with self._lock:  # the playing thread may refresh too (a call's own arguments): newest wins
                if self.weights is None or version > self.weights[0]:
                    self.weights = (version, updates, arrays)
        with self._lock:
            if seq > self.board[0]:
                self.board = (seq, counters, heatup)

    def _read_counters(self, into: Counters) -> None:
        for name, value in zip(_COUNTER_NAMES, self.board[1]):
            setattr(into, name, int(value))

    def _load_policy(self, network: torch.nn.Module, held_version: int) -> tuple[int, int] | None:
        weights = self.weights
        if weights is None or weights[0] == held_version:
            return None
        version, updates, arrays = weights
        tensors = network.state_dict()
        with torch.no_grad():
            for name, array in arrays.items():
                tensors[name].copy_(torch.from_numpy(array))
        return version, updates

    def collect(self, seq: int, counters: np.ndarray, heatup: bool,
                weights: tuple[int, int, list[Any]] | None) -> tuple[list[Rollout], int, str, GamesReport]:
        """The chunks played since the last call, waiting for at least one: (chunks, actions played, node
        IP, this actor and its games as :meth:`owned` reports them). Raises what broke the playing thread.

        The arguments are the learner's state when the call was queued; a newer ``refresh`` wins.
        """
        self.refresh(seq, counters, heatup, weights)
        with self._changed:
            while not self.buffer and self.error is None:
                self._changed.wait()
            if self.error is not None and not self.buffer:
                raise self.error
            rollouts, played = self.buffer, self.played
            self.buffer, self.buffer_actions, self.played = [], 0, 0
            self._changed.notify_all()  # the playing thread may start new races
        return rollouts, played, self.node, self.owned()

    def owned(self) -> GamesReport:
        """This actor, the processes its environments own and their ports, and what broke its playing thread."""
        pids: list[int] = []
        ports: list[int] = []
        for slot in self.collector.slots:
            pids.extend(owned_pids(slot.level.env))
            ports.extend(owned_ports(slot.level.env))
        error = self.error
        broken = None if error is None else f"{type(error).__name__}: {error}".strip()
        return GamesReport(self.node_id, self.pid, identify(pids), ports, broken)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the playing thread (after the step under way), then close the environments (their games)."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        self._player.join(timeout_s)
        self.collector.close()


def _actor_class(ray: Any) -> Any:
    return ray.remote(concurrency_groups={REFRESH_GROUP: 1})(RayCollectorActor)


@dataclass
class _Call:
    ref: Any
    seq: int
    submitted: float


@dataclass
class _Actor:
    collector_id: int
    incarnation: int
    handle: Any
    started: float
    calls: list[_Call] = field(default_factory=list)
    last_result: float = 0.0
    sent_anything: bool = False
    pid: int = 0
    node_id: str = ""
    #: The processes its environments own, as last reported: (pid, start time) pairs, ports, node id.
    owned: list[tuple[int, int]] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    owned_node: str = ""
    #: Set by the actor watcher when the actor died: why (the message's reason) and what was killed.
    failure: str | None = None
    killed: str | None = None


class RayCollection(RemoteCollection[_Actor]):
    """Starts, feeds, watches and stops collector actors (``workers``), as ProcessCollection does processes.

    Args:
        setup: how a collector builds its agent, environments and plans (pickled to each actor).
        agent: the learner's agent (its ``online_network`` is published).
        on_event: called with a one-line message when a collector fails or is replaced.
        address: Ray cluster to join (``auto``, ``HOST:PORT``) or None for a local instance.
    """

    def __init__(self, setup: CollectorSetup, agent: Agent, on_event: Callable[[str], None] | None = None,
                 address: str | None = None) -> None:
        super().__init__(setup, agent, on_event)
        perf = setup.config.performance
        if self.device.type == "cuda" and perf.ray_collector_gpus <= 0:
            raise ConfigError(f"performance.collector_device is {perf.collector_device} ({self.device}) but "
                              "performance.ray_collector_gpus is 0: Ray hides the GPUs from an actor that asks "
                              "for none; set ray_collector_gpus (e.g. 0.25) or collector_device: cpu")
        self.ray = connect(address)
        self.actor_class = _actor_class(self.ray).options(
            num_cpus=perf.ray_collector_cpus, num_gpus=perf.ray_collector_gpus,
            resources=dict(perf.ray_collector_resources) or None, max_restarts=0, max_task_retries=0,
            scheduling_strategy=SCHEDULING_STRATEGY)
        self.actions = [0] * self.num_collectors
        self.node_actions: dict[str, int] = {}
        self.counters = np.zeros(len(_COUNTER_NAMES), dtype=np.int64)
        self.heatup = True
        self.version = 0
        self.weights: tuple[int, int, list[Any]] | None = None
        self._seq = 0
        self._board_seq = 0  # numbers each state of (counters, heatup, weights) sent to the actors
        self._refreshed_at = 0.0
        self.node_id = self.ray.get_runtime_context().get_node_id()
        # owned.py imports no torch (this module does: seconds more on a busy machine for a killer to start)
        self._killer_class = self.ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(ProcessKiller)
        #: Per node other than the learner's where an actor reported processes: its ProcessKiller.
        self.killers: dict[str, Any] = {}
        #: Held by the actor watcher and by the learner's thread while either reads or changes what actors
        #: reported, kills their processes or replaces one.
        self._lock = threading.RLock()

    @property
    def actors(self) -> list[_Actor | None]:
        """Each collector's current actor (None once stopped)."""
        return self.workers

    # ------------------------------------------------------------------ lifecycle
    def _watch(self) -> None:
        """The actor watcher: every ``ACTOR_WATCH_S`` each actor is asked for its games (``owned``,
        in the refresh group, which answers beside a ``collect``); an answer keeps the report, a failed one
        means the actor died: its games are killed at once and it is marked for the learner's next check
        (:meth:`supervise`, :meth:`poll`), which replaces it. An answer that says the actor's playing thread
        broke (a game that could not be relaunched at a race's start: a stranger on its port) is logged at once
        and marks the actor too, as the exit watcher sees a collector process's exit. Ray's own report of the
        death takes a moment; the learner's thread, busy with an update, takes no part."""
        questions: dict[Any, _Actor] = {}
        while not self._stop_watching.is_set():
            asked_at = time.monotonic()
            try:
                asked = {id(a) for a in questions.values()}
                for actor in list(self.workers):
                    if actor is not None and actor.failure is None and id(actor) not in asked:
                        questions[actor.handle.owned.options(concurrency_group=REFRESH_GROUP).remote()] = actor
                if questions:
                    ready, _ = self.ray.wait(list(questions), num_returns=len(questions), timeout=ACTOR_WATCH_S)
                    for ref in ready:
                        self._answered(questions.pop(ref), ref)
            except Exception as error:  # noqa: BLE001 - Ray shutting down under it: the learner's thread goes on
                if not self._stop_watching.is_set():
                    log.warning("the actor watcher: %s", _first_line(error))
            self._stop_watching.wait(max(0.0, ACTOR_WATCH_S - (time.monotonic() - asked_at)))

    def _answered(self, actor: _Actor, ref: Any) -> None:
        """The actor watcher's question to ``actor`` came back: keep its report, or, when the actor died, kill
        its games now and mark it."""
        try:
            report = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as error:
            with self._lock:
                if actor.failure is None and self.workers[actor.collector_id] is actor:
                    actor.failure = f"died ({_first_line(error)})"
                    log.warning("collector %d %s: its processes are killed now, the learner replaces it at its "
                                "next check", actor.collector_id, actor.failure)
                    actor.killed = self._kill_owned(actor)
            return
        except self.ray.exceptions.RayError:
            return  # its next collect call says what is wrong
        with self._lock:
            if actor.failure is None and self.workers[actor.collector_id] is actor:
                self._keep_report(actor, report)
                if report.broken is not None:  # its playing thread broke: said now, not at the learner's next call
                    actor.failure = f"stopped playing: {report.broken}"
                    log.warning("collector %d %s; the learner replaces it at its next check", actor.collector_id,
                                actor.failure)

    def _spawn(self, collector_id: int) -> None:
        self.incarnations[collector_id] += 1
        handle = self.actor_class.remote(UserModules(), self.setup, collector_id, self.incarnations[collector_id],
                                         str(self.device), self.torch_threads, dict(self.episodes.started))
        now = time.monotonic()
        actor = _Actor(collector_id, self.incarnations[collector_id], handle, now, last_result=now + STARTUP_GRACE_S)
        self.workers[collector_id] = actor
        for _ in range(CALLS_IN_FLIGHT):
            self._submit(actor)

    def _submit(self, actor: _Actor) -> None:
        self._seq += 1
        ref = actor.handle.collect.remote(self._board_seq, self.counters.copy(), self.heatup, self.weights)
        actor.calls.append(_Call(ref, self._seq, time.monotonic()))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Let the calls under way finish (their chunks are dropped), let every actor close its
        environments, then end the actors and kill whatever processes they still reported."""
        self._stop_watcher()
        live = [a for a in self.actors if a is not None]
        if not live:
            return
        deadline = time.monotonic() + timeout_s
        refs = [call.ref for a in live for call in a.calls]
        if refs and timeout_s > 0:
            self.ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        for actor in live:
            self._fresh_owned(actor)
        closing = [actor.handle.close.remote() for actor in live]
        self.ray.wait(closing, num_returns=len(closing), timeout=max(0.0, deadline - time.monotonic()))
        for actor in live:
            self.ray.kill(actor.handle, no_restart=True)
            self._kill_owned(actor)
        self.workers = [None] * self.num_collectors
        for killer in self.killers.values():
            self.ray.kill(killer, no_restart=True)
        self.killers.clear()

    def _fresh_owned(self, actor: _Actor) -> None:
        """Ask a live actor for its games now (a game it launched since its last result); keep the last
        report when it does not answer within ``OWNED_WAIT_S`` (dead, or its node is gone)."""
        try:
            report = self.ray.get(actor.handle.owned.options(concurrency_group=REFRESH_GROUP).remote(),
                                  timeout=OWNED_WAIT_S)
        except Exception:  # noqa: BLE001 - dead actor, lost node, timeout: the last report stands
            return
        self._keep_report(actor, report)

    def _keep_report(self, actor: _Actor, report: GamesReport) -> None:
        """Keep an actor's report of its games; a report of processes on a node other than the learner's
        starts that node's :class:`ProcessKiller` if it has none, ready before a failure needs it."""
        _note_owned(actor, report)
        if actor.owned and actor.owned_node and actor.owned_node != self.node_id:
            self._killer(actor.owned_node)

    def _killer(self, node: str) -> Any:
        """``node``'s ProcessKiller, started now if it has none."""
        if node not in self.killers:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            self.killers[node] = self._killer_class.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
        return self.killers[node]

    def _kill_owned(self, actor: _Actor) -> str:
        """Kill the processes ``actor`` (ended by now) last reported: here when they run on the learner's
        node, else by their node's ProcessKiller. A clause for the message ("" when none)."""
        processes, ports = actor.owned, actor.ports
        actor.owned, actor.ports = [], []
        if not processes:
            return ""
        if not actor.owned_node or actor.owned_node == self.node_id:
            killed = kill_and_wait(processes, OWNED_WAIT_S)
        else:
            killer = self._killer(actor.owned_node)
            try:
                killed = self.ray.get(killer.kill.remote(processes, OWNED_WAIT_S), timeout=OWNED_WAIT_S + 10.0)
            except Exception as error:  # noqa: BLE001 - the node is gone or busy: the games' guards kill them
                del self.killers[actor.owned_node]  # the next report from that node starts a new one
                self.ray.kill(killer, no_restart=True)
                log.warning("collector %d: could not kill its processes on node %s (%s): the games' guards kill "
                            "them there once the actor is gone", actor.collector_id, actor.owned_node,
                            _first_line(error))
                return ""
        return killed_clause(actor.collector_id, killed, ports)

    # ------------------------------------------------------------------ data
    def publish(self, agent: Agent) -> None:
        """One ``ray.put`` of the online network's tensors (numpy, read without a copy by local actors),
        sent to every actor at once with the counters."""
        arrays = {name: t.detach().to("cpu", torch.float32).numpy()
                  for name, t in agent.online_network.state_dict().items()}
        self.version += 1
        self.weights = (self.version, agent.counters.gradient_updates, [self.ray.put(arrays)])
        self._read_counters(agent)
        self._refresh_actors()

    def publish_counters(self, agent: Agent, heatup: bool) -> None:
        """Send the counters and heatup flag to the actors: a heatup change at once, counters at most
        every ``COUNTERS_REFRESH_EVERY_S``."""
        self._read_counters(agent)
        changed = bool(heatup) != self.heatup
        self.heatup = bool(heatup)
        if changed or time.monotonic() - self._refreshed_at >= COUNTERS_REFRESH_EVERY_S:
            self._refresh_actors()

    def _read_counters(self, agent: Agent) -> None:
        for i, name in enumerate(_COUNTER_NAMES):
            self.counters[i] = agent.counters.get(name)

    def _refresh_actors(self) -> None:
        """One ``refresh`` per live actor (fire and forget: a dead actor's is dropped with it)."""
        self._board_seq += 1
        self._refreshed_at = time.monotonic()
        counters = self.counters.copy()
        for actor in self.actors:
            if actor is not None:
                actor.handle.refresh.options(concurrency_group=REFRESH_GROUP).remote(
                    self._board_seq, counters, self.heatup, self.weights)

    def supervise(self) -> None:
        """Between two updates of a training burst: an actor the actor watcher found dead (its games killed
        already) is replaced now, not after the burst. No ``collect`` result is read here, so the actors still
        stop between races while the learner trains."""
        self.check_health()

    def poll(self, heatup: bool, timeout: float = 0.05) -> list[Rollout]:
        """Rollouts of the calls that finished within ``timeout`` seconds (all that are done, at least one if any)."""
        owner = {call.ref: (actor, call) for actor in self.actors if actor is not None for call in actor.calls}
        rollouts: list[Rollout] = []
        if owner:
            refs = list(owner)
            ready, rest = self.ray.wait(refs, num_returns=1, timeout=timeout)
            if ready and rest:
                more, _ = self.ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
            for ref in sorted(ready, key=lambda r: owner[r][1].seq):  # an actor's chunks in the order it played them
                actor, call = owner[ref]
                if self.actors[actor.collector_id] is not actor:
                    continue  # replaced while handling an earlier call of this poll
                rollouts += self._receive(actor, call)
        self.check_health()
        return rollouts

    def _receive(self, actor: _Actor, call: _Call) -> list[Rollout]:
        actor.calls.remove(call)
        try:
            chunk, played, node, report = self.ray.get(call.ref)
        except self.ray.exceptions.RayActorError as error:
            self._replace(actor, f"died ({_first_line(error)})")
            return []
        except self.ray.exceptions.RayError as error:
            self._replace(actor, f"raised an error:\n{str(error).rstrip()}")
            return []
        i = actor.collector_id
        actor.last_result = time.monotonic()
        actor.node_id = report.node_id
        with self._lock:
            self._keep_report(actor, report)  # the actor's pid too
        self._received(actor, chunk)
        self.actions[i] += played
        self.node_actions[node] = self.node_actions.get(node, 0) + played
        self._submit(actor)
        return chunk

    def check_health(self) -> None:
        """Replace the actors the actor watcher found dead, and those silent past ``collector_timeout_s``."""
        now = time.monotonic()
        with self._lock:
            for actor in self.actors:
                if actor is not None and actor.failure is not None:
                    self._replace(actor, actor.failure)
                elif actor is not None and now - actor.last_result > self.timeout_s:
                    self._replace(actor, f"sent nothing for {now - actor.last_result:.0f} s "
                                         f"(collector_timeout_s = {self.timeout_s:g})")

    def _replace(self, actor: _Actor, reason: str) -> None:
        with self._lock:
            super()._replace(actor, reason)

    def _end_worker(self, actor: _Actor) -> str:
        if actor.killed is not None:  # the actor watcher found it dead and killed its games
            self.ray.kill(actor.handle, no_restart=True)
            return actor.killed
        self._fresh_owned(actor)
        self.ray.kill(actor.handle, no_restart=True)
        return self._kill_owned(actor)

    # ------------------------------------------------------------------ metrics
    def alive_pids(self) -> list[int]:
        """PIDs of the actors that have reported (a call's result, an answer to the actor watcher) and still run."""
        return [a.pid for a in self.actors if a is not None and a.pid]

    def queue_depth(self) -> int:
        """Calls finished and not yet read by the learner."""
        refs = [call.ref for a in self.actors if a is not None for call in a.calls]
        if not refs:
            return 0
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        return len(ready)

    def actions_per_collector(self) -> list[int]:
        return list(self.actions)

    def collector_nodes(self) -> dict[int, str]:
        """The Ray node id each live collector runs on (known once it has returned a call)."""
        return {a.collector_id: a.node_id for a in self.actors if a is not None and a.node_id}

    def actions_per_node(self) -> dict[str, int]:
        """Actions played on each node (by IP address), over every incarnation."""
        return dict(self.node_actions)


def _note_owned(actor: _Actor, report: GamesReport) -> None:
    """Keep an actor's report of its games and its pid (what broke its playing thread is not kept here)."""
    actor.owned_node, actor.pid = report.node_id, report.actor_pid
    actor.owned, actor.ports = [tuple(p) for p in report.processes], list(report.ports)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
