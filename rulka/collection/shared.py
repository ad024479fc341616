"""State the learner shares with its collector processes: the policy's weights and the run's counters.

Both live in shared memory and are written by the learner only. Collectors copy the weights into
their own inference network under the lock, and read the counters that drive every schedule
(the actions of all collectors together), so their epsilon is the learner's.
"""
from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

import torch
from torch import nn

from rulka.core_types import Counters

_COUNTER_NAMES = ("env_steps", "episodes", "gradient_updates", "transitions_sampled")


class SharedPolicy:
    """A shared-memory copy of a network's parameters and buffers, versioned.

    ``publish`` (learner) copies a network in under the lock and increments ``version``;
    ``load_into`` (collector) copies it out when the version is newer than what it holds.
    """

    def __init__(self, network: nn.Module, ctx: Any) -> None:
        tensors = network.state_dict()
        self.layout = [(name, tuple(t.shape), t.dtype) for name, t in tensors.items()]
        total = sum(t.numel() for t in tensors.values())
        self.flat = torch.zeros(total, dtype=torch.float32).share_memory_()
        self.version = ctx.Value("q", 0, lock=False)
        self.published_at_updates = ctx.Value("q", 0, lock=False)
        self.lock = ctx.Lock()

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
        with self.lock, torch.no_grad():
            for (name, _shape, _dtype), view in zip(self.layout, self._views()):
                view.copy_(tensors[name].detach().to("cpu", torch.float32))
            self.published_at_updates.value = gradient_updates
            self.version.value += 1

    def load_into(self, network: nn.Module, held_version: int) -> tuple[int, int] | None:
        """Copy the weights into ``network`` if newer than ``held_version``: (version, updates) or None."""
        if self.version.value == held_version:
            return None
        tensors = network.state_dict()
        with self.lock, torch.no_grad():
            for (name, _shape, _dtype), view in zip(self.layout, self._views()):
                tensors[name].copy_(view)
            return int(self.version.value), int(self.published_at_updates.value)


class SharedStatus:
    """Counters and flags the learner publishes, and one heartbeat / tally slot per collector.

    Per collector ``i``: ``heartbeat[i]`` (``time.monotonic()`` of its last sign of life),
    ``actions[i]`` (actions it has played) and ``sent[i]`` (rollouts it has sent).
    """

    def __init__(self, num_collectors: int, ctx: Any) -> None:
        self.counters = ctx.Array("q", len(_COUNTER_NAMES), lock=False)
        self.heatup = ctx.Value("b", 1, lock=False)
        self.stop = ctx.Value("b", 0, lock=False)
        n = max(num_collectors, 1)
        self.heartbeat = ctx.Array("d", n, lock=False)
        self.actions = ctx.Array("q", n, lock=False)
        self.sent = ctx.Array("q", n, lock=False)

    def publish_counters(self, counters: Counters, heatup: bool) -> None:
        for i, name in enumerate(_COUNTER_NAMES):
            self.counters[i] = counters.get(name)
        self.heatup.value = int(heatup)

    def read_counters(self, into: Counters) -> None:
        for i, name in enumerate(_COUNTER_NAMES):
            setattr(into, name, int(self.counters[i]))

    def beat(self, collector_id: int) -> None:
        self.heartbeat[collector_id] = time.monotonic()
