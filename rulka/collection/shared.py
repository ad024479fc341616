"""State the learner shares with its collector processes: the policy's weights and the run's counters.

Both live in shared memory and are written by the learner only. Collectors copy the weights into
their own inference network (no lock: see :class:`SharedPolicy`), and read the counters that drive
every schedule (the actions of all collectors together), so their epsilon is the learner's.
"""
from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

import torch
from torch import nn

from rulka.core_types import Counters

_COUNTER_NAMES = ("env_steps", "episodes", "gradient_updates", "transitions_sampled")
#: Per collector, at most this many owned processes (games, launch scripts) and ports are reported.
MAX_OWNED = 16


class SharedPolicy:
    """A shared-memory copy of a network's parameters and buffers, versioned, with no lock to hold.

    ``publish`` (the learner, the only writer) makes ``sequence`` odd, copies the network in, and
    makes it even again; ``load_into`` (a collector) copies the weights out when they are newer than
    what it holds, and copies again if ``sequence`` moved while it copied (a sequence lock). A
    collector killed in the middle of a copy (SIGKILL, its machine's OOM killer) leaves nothing
    held: with a lock, the learner's next publish, and every other collector, would wait forever.
    """

    def __init__(self, network: nn.Module, ctx: Any) -> None:
        tensors = network.state_dict()
        self.layout = [(name, tuple(t.shape), t.dtype) for name, t in tensors.items()]
        total = sum(t.numel() for t in tensors.values())
        self.flat = torch.zeros(total, dtype=torch.float32).share_memory_()
        self.sequence = ctx.Value("q", 0, lock=False)  # odd while the learner writes; 2 x publications
        self.published_at_updates = ctx.Value("q", 0, lock=False)

    @property
    def version(self) -> int:
        """Publications so far (what ``load_into`` returns and is given back as ``held_version``)."""
        return int(self.sequence.value) // 2

    def _views(self) -> list[torch.Tensor]:
        views, offset = [], 0
        for _name, shape, _dtype in self.layout:
            n = 1
            for s in shape:
                n *= s
            views.append(self.flat[offset:offset + n].view(shape))
            offset += n
        return views

    def publish(self, network: nn.Module, gradient_updates: int) -> None:
        tensors = network.state_dict()
        self.sequence.value += 1
        with torch.no_grad():
            for (name, _shape, _dtype), view in zip(self.layout, self._views()):
                view.copy_(tensors[name].detach().to("cpu", torch.float32))
        self.published_at_updates.value = gradient_updates
        self.sequence.value += 1

    def load_into(self, network: nn.Module, held_version: int) -> tuple[int, int] | None:
        """Copy the weights into ``network`` if newer than ``held_version``: (version, updates) or None."""
        tensors = network.state_dict()
        while True:
            before = int(self.sequence.value)
            if before // 2 == held_version:  # odd: the next publication is not complete yet
                return None
            if before % 2:  # the learner is writing: its copy takes milliseconds
                time.sleep(0.0005)
                continue
            updates = int(self.published_at_updates.value)
            with torch.no_grad():
                for (name, _shape, _dtype), view in zip(self.layout, self._views()):
                    tensors[name].copy_(view)
            if int(self.sequence.value) == before:
                return before // 2, updates


class SharedStatus:
    """Counters and flags the learner publishes, and one heartbeat / tally slot per collector.

    Per collector ``i``: ``heartbeat[i]`` (``time.monotonic()`` of its last sign of life),
    ``actions[i]`` (actions it has played) and ``sent[i]`` (rollouts it has sent), and the
    processes its environments own (:mod:`rulka.collection.owned`): up to ``MAX_OWNED`` (pid, start
    time) pairs and ports, written by the collector without a lock (a collector killed while writing
    must not leave a lock held); a torn pair fails the start-time check and is not killed.
    """

    def __init__(self, num_collectors: int, ctx: Any) -> None:
        self.counters = ctx.Array("q", len(_COUNTER_NAMES), lock=False)
        self.heatup = ctx.Value("b", 1, lock=False)
        self.stop = ctx.Value("b", 0, lock=False)
        n = max(num_collectors, 1)
        self.heartbeat = ctx.Array("d", n, lock=False)
        self.actions = ctx.Array("q", n, lock=False)
        self.sent = ctx.Array("q", n, lock=False)
        self.owned = ctx.Array("q", n * MAX_OWNED * 2, lock=False)
        self.owned_ports = ctx.Array("q", n * MAX_OWNED, lock=False)

    def publish_counters(self, counters: Counters, heatup: bool) -> None:
        for i, name in enumerate(_COUNTER_NAMES):
            self.counters[i] = counters.get(name)
        self.heatup.value = int(heatup)

    def read_counters(self, into: Counters) -> None:
        for i, name in enumerate(_COUNTER_NAMES):
            setattr(into, name, int(self.counters[i]))

    def beat(self, collector_id: int) -> None:
        self.heartbeat[collector_id] = time.monotonic()

    def report_owned(self, collector_id: int, processes: list[tuple[int, int]], ports: tuple[int, ...]) -> None:
        """Collector side: the (pid, start time) pairs and ports its environments own now."""
        base = collector_id * MAX_OWNED
        padded = list(processes[:MAX_OWNED]) + [(0, 0)] * (MAX_OWNED - min(len(processes), MAX_OWNED))
        for j, (pid, start) in enumerate(padded):
            self.owned[2 * (base + j)] = pid
            self.owned[2 * (base + j) + 1] = start
        ports = tuple(ports[:MAX_OWNED]) + (0,) * (MAX_OWNED - min(len(ports), MAX_OWNED))
        for j, port in enumerate(ports):
            self.owned_ports[base + j] = port

    def read_owned(self, collector_id: int) -> tuple[list[tuple[int, int]], list[int]]:
        """Learner side: what collector ``collector_id`` last reported (pids with start times, ports)."""
        base = collector_id * MAX_OWNED
        processes = [(int(self.owned[2 * (base + j)]), int(self.owned[2 * (base + j) + 1])) for j in range(MAX_OWNED)]
        ports = [int(self.owned_ports[base + j]) for j in range(MAX_OWNED)]
        return [p for p in processes if p[0] > 0], [p for p in ports if p > 0]

    def clear_owned(self, collector_id: int) -> None:
        self.report_owned(collector_id, [], ())
