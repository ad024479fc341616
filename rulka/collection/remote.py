"""What collector processes and Ray actors share: the learner's side of collectors it does not run itself.

:class:`RemoteCollection` holds the accounting both kinds keep per collector (incarnations, failed
starts in a row, chunks received, episodes started per environment, restarts and their messages)
and replaces a failed collector in one place (:meth:`RemoteCollection._replace`): it ends the
collector and kills the games it reported (the kind's :meth:`~RemoteCollection._end_worker`), drops
its unfinished episodes, and starts a new incarnation (:meth:`~RemoteCollection._spawn`), or stops
the run with :class:`CollectorFailure` after ``MAX_FAILED_STARTS`` failures in a row before any chunk.
It also runs each kind's watcher (:meth:`~RemoteCollection._watch`), a thread of the learner's that finds a
dead collector whatever the learner's own thread is doing and kills its games at once.
"""
from __future__ import annotations

import logging
import threading
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generic, Protocol, TypeVar

import torch

from rulka.collection.interface import Collection

if TYPE_CHECKING:
    from agents.agent import Agent
    from rulka.collection.collector_setup import CollectorSetup
    from rulka.collection.rollout import Rollout

log = logging.getLogger(__name__)

#: A collector that dies this many times in a row without sending anything stops the run.
MAX_FAILED_STARTS = 3
#: Seconds a new collector may take to import, build its environments and send a first heartbeat.
STARTUP_GRACE_S = 120.0


class CollectorFailure(RuntimeError):
    """Collectors keep failing before sending anything: the run cannot collect data."""


@dataclass
class CollectionStats:
    """Tallies the learner logs in the Performance group."""

    received: int = 0
    restarts: int = 0
    dropped_episodes: int = 0
    events: list[str] = field(default_factory=list)


class EpisodeCounts:
    """Per environment instance, the episodes its collectors have started, as far as the learner
    has seen (the episode number of the newest chunk received). A replaced collector, and the
    collectors of a resumed run, continue from there: new reset seeds, the plan's next entry."""

    def __init__(self) -> None:
        self.started: dict[int, int] = {}

    def saw(self, rollout: Rollout) -> None:
        instance = rollout.source[2]
        if rollout.episode > self.started.get(instance, 0):
            self.started[instance] = rollout.episode

    def state_dict(self) -> dict[str, Any]:
        return {"episodes_started_per_instance": {str(k): v for k, v in self.started.items()}}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        counts = (state or {}).get("episodes_started_per_instance", {})
        self.started = {int(k): int(v) for k, v in counts.items()}


class Worker(Protocol):
    """One incarnation of a collector, as the learner tracks it (a process, a Ray actor)."""

    collector_id: int
    incarnation: int
    sent_anything: bool  # a chunk arrived from it: its failure is not a failed start


W = TypeVar("W", bound=Worker)


class RemoteCollection(Collection, Generic[W]):
    """``gpu_collectors_count`` collectors the learner starts, watches and replaces (``workers[i]``:
    collector ``i``'s current incarnation, None once stopped).

    Args:
        setup: how a collector builds its agent, environments and plans.
        agent: the learner's agent (its ``online_network`` is published; its device picks ``auto``'s).
        on_event: called with a one-line message when a collector fails or is replaced.
    """

    def __init__(self, setup: CollectorSetup, agent: Agent, on_event: Callable[[str], None] | None = None) -> None:
        perf = setup.config.performance
        self.setup = setup
        self.num_collectors = perf.gpu_collectors_count
        self.device = collector_device(perf.collector_device, agent.device)
        self.torch_threads = perf.collector_torch_threads
        self.timeout_s = perf.collector_timeout_s
        self.workers: list[W | None] = [None] * self.num_collectors
        self.incarnations = [0] * self.num_collectors
        self._stop_watching = threading.Event()
        self._watcher: threading.Thread | None = None
        self.failed_starts = [0] * self.num_collectors
        self.received = [0] * self.num_collectors
        self.stats = CollectionStats()
        self.episodes = EpisodeCounts()
        self.on_event = on_event or (lambda message: log.warning(message))
        self.on_dropped_source: Callable[[int, int], None] = lambda collector_id, incarnation: None

    # ------------------------------------------------------------------ lifecycle
    def start(self, agent: Agent, heatup: bool) -> None:
        self.publish(agent)
        self.publish_counters(agent, heatup)
        for i in range(self.num_collectors):
            self._spawn(i)
        self._stop_watching.clear()
        self._watcher = threading.Thread(target=self._watch, name="rulka-collector-watcher", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        """The watcher (a thread of the learner's) until ``_stop_watching`` is set: find a dead collector
        whatever the learner's thread is doing (one gradient update can take seconds on a busy CPU) and kill
        its games at once; replacing it stays with the learner's next check. The default watches nothing."""

    def _stop_watcher(self) -> None:
        """End the watcher (before the collection stops its collectors, which then exit on purpose)."""
        self._stop_watching.set()
        if self._watcher is not None:
            self._watcher.join()
            self._watcher = None

    @abstractmethod
    def _spawn(self, collector_id: int) -> None:
        """Start collector ``collector_id``'s next incarnation (``incarnations[collector_id] + 1``) in ``workers``."""

    @abstractmethod
    def _end_worker(self, worker: W) -> str:
        """End ``worker`` (failed) and kill the processes it reported; a clause for the message naming
        what was killed ("" when nothing was)."""

    def _replace(self, worker: W, reason: str) -> None:
        """Replace failed ``worker`` by a new incarnation; its unfinished episodes are dropped."""
        i = worker.collector_id
        killed = self._end_worker(worker)  # before the replacement launches its own games on the same ports
        if killed:
            reason = f"{reason}; {killed}"
        self.stats.restarts += 1
        if not worker.sent_anything:
            self.failed_starts[i] += 1
        message = f"collector {i} {reason}; its unfinished episodes are dropped, a new collector {i} starts"
        self.stats.events.append(message)
        self.on_event(message)
        self.on_dropped_source(i, worker.incarnation)
        if self.failed_starts[i] >= MAX_FAILED_STARTS:
            self.workers[i] = None
            raise CollectorFailure(f"collector {i} failed {self.failed_starts[i]} times in a row before sending "
                                   f"anything; last failure: {reason}")
        self._spawn(i)

    def _received(self, worker: W, rollouts: list[Rollout]) -> None:
        """Count chunks that arrived from ``worker``: it is no failed start, and its episodes advance."""
        i = worker.collector_id
        worker.sent_anything = True
        self.failed_starts[i] = 0
        self.received[i] += len(rollouts)
        self.stats.received += len(rollouts)
        for rollout in rollouts:
            self.episodes.saw(rollout)

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run's collectors continue from (episodes started per environment)."""
        return self.episodes.state_dict()

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        self.episodes.load_state_dict(state)

    # ------------------------------------------------------------------ metrics
    @abstractmethod
    def alive_pids(self) -> list[int]:
        """PIDs of the collectors that run now."""

    @abstractmethod
    def queue_depth(self) -> int:
        """Chunks sent by the collectors and not yet read by the learner."""

    @abstractmethod
    def actions_per_collector(self) -> list[int]:
        """Actions played by each collector, over all its incarnations."""


def collector_device(name: str, learner_device: torch.device) -> torch.device:
    """``auto``: the learner's device type; otherwise ``cpu`` / ``cuda`` / ``cuda:N``."""
    if name == "auto":
        return torch.device(learner_device.type)
    return torch.device(name)


def killed_clause(collector_id: int, killed: list[int], ports: list[int] | tuple[int, ...]) -> str:
    """The message's clause for the processes of collector ``collector_id`` that were killed (logged too);
    "" when none was."""
    if not killed:
        return ""
    clause = f"its processes (pids {', '.join(map(str, killed))}" + (
        f"; ports {', '.join(map(str, ports))}" if ports else "") + ") were killed"
    log.warning("collector %d: %s", collector_id, clause)
    return clause
