"""The interface every collection implements: what the training loop asks of it.

:class:`~rulka.collection.in_process.InProcessCollection` (the learner steps the environments
itself), :class:`~rulka.collection.processes.ProcessCollection` (collector processes) and
:class:`~rulka.collection.ray_collection.RayCollection` (Ray actors) implement it; the two remote
kinds share their watching and replacement accounting in
:class:`~rulka.collection.remote.RemoteCollection`. A collection of your own implements these
methods (subclass :class:`Collection`, or match it: it is a ``Protocol``).
"""
from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from agents.agent import Agent
    from rulka.collection.rollout import Rollout


@runtime_checkable
class Collection(Protocol):
    """Plays environments with the learner's policy and hands over what was played, as Rollout chunks."""

    @abstractmethod
    def start(self, agent: Agent, heatup: bool) -> None:
        """Begin collecting with ``agent``'s current weights and counters (``heatup``: act at random)."""

    @abstractmethod
    def poll(self, heatup: bool, timeout: float = 0.05) -> list[Rollout]:
        """The chunks completed since the last call, waiting at most ``timeout`` seconds for one."""

    def supervise(self) -> None:
        """Between two gradient updates of a long training burst (at most once a second): notice a failed
        collector now, reading no rollouts, so that its replacement and the kill of its games need not
        wait for the burst to end. Optional: the default waits for the next :meth:`poll`."""

    @abstractmethod
    def publish(self, agent: Agent) -> None:
        """Make ``agent``'s online network the one the collectors act with."""

    @abstractmethod
    def publish_counters(self, agent: Agent, heatup: bool) -> None:
        """Hand the collectors ``agent``'s counters (their schedules) and the heatup flag."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """What a resumed run's collection continues from (episodes started per environment)."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Continue from a :meth:`state_dict` (any kind's; None: from the start)."""

    @abstractmethod
    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop collecting; wait at most ``timeout_s`` seconds for the collectors to end cleanly."""
