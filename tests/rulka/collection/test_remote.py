"""The collection interface and the replacement accounting the remote kinds share (no process started)."""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch

from rulka.collection import Collection
from rulka.collection.in_process import InProcessCollection
from rulka.collection.processes import ProcessCollection
from rulka.collection.remote import MAX_FAILED_STARTS, CollectorFailure, RemoteCollection


@dataclass
class _FakeWorker:
    collector_id: int
    incarnation: int
    sent_anything: bool = False


class _FakeCollection(RemoteCollection[_FakeWorker]):
    """A remote collection whose workers are records: what ``_replace`` does around the two hooks."""

    def __init__(self, killed: str = "") -> None:
        self.events: list[str] = []
        performance = SimpleNamespace(gpu_collectors_count=2, collector_device="auto", collector_torch_threads=1,
                                      collector_timeout_s=5.0)
        super().__init__(SimpleNamespace(config=SimpleNamespace(performance=performance)),
                         SimpleNamespace(device=torch.device("cpu")), on_event=self.events.append)
        self.killed, self.ended = killed, []

    def _spawn(self, collector_id: int) -> None:
        self.incarnations[collector_id] += 1
        self.workers[collector_id] = _FakeWorker(collector_id, self.incarnations[collector_id])

    def _end_worker(self, worker: _FakeWorker) -> str:
        self.ended.append(worker)
        return self.killed

    def publish(self, agent) -> None:
        pass

    def publish_counters(self, agent, heatup) -> None:
        pass

    def poll(self, heatup, timeout=0.05):
        return []

    def stop(self, timeout_s=10.0) -> None:
        pass

    def alive_pids(self):
        return []

    def queue_depth(self):
        return 0

    def actions_per_collector(self):
        return [0, 0]


def test_every_kind_of_collection_implements_the_interface():
    """The training loop can hold any of the three kinds as a Collection (Ray's is checked where Ray is installed)."""
    assert issubclass(InProcessCollection, Collection) and issubclass(ProcessCollection, Collection)
    ray_collection = pytest.importorskip("rulka.collection.ray_collection")
    assert issubclass(ray_collection.RayCollection, RemoteCollection)


def test_a_replaced_worker_is_ended_counted_announced_and_respawned():
    """``_replace`` ends the worker, names what was killed, drops its episodes and starts the next incarnation."""
    collection = _FakeCollection(killed="its processes (pids 7) were killed")
    dropped = []
    collection.on_dropped_source = lambda i, incarnation: dropped.append((i, incarnation))
    collection.start(SimpleNamespace(), heatup=True)
    old = collection.workers[1]
    collection._replace(old, "died (exit code -9)")
    assert collection.ended == [old] and dropped == [(1, 1)]
    assert collection.events == ["collector 1 died (exit code -9); its processes (pids 7) were killed; its unfinished "
                                 "episodes are dropped, a new collector 1 starts"]
    assert collection.stats.restarts == 1 and collection.stats.events == collection.events
    assert collection.incarnations == [1, 2] and collection.workers[1].incarnation == 2
    assert collection.failed_starts == [0, 1]


def test_failed_starts_in_a_row_stop_the_run_and_a_chunk_resets_them():
    """A worker that sent something is no failed start; MAX_FAILED_STARTS in a row raise CollectorFailure."""
    collection = _FakeCollection()
    collection.start(SimpleNamespace(), heatup=True)
    collection._replace(collection.workers[0], "hung")
    rollout = SimpleNamespace(source=(0, 2, 0), episode=3)
    collection._received(collection.workers[0], [rollout])
    assert collection.failed_starts[0] == 0 and collection.received[0] == 1 and collection.episodes.started == {0: 3}
    collection._replace(collection.workers[0], "hung")  # it had sent: not a failed start
    assert collection.failed_starts[0] == 0
    for _ in range(MAX_FAILED_STARTS - 1):
        collection._replace(collection.workers[0], "hung")
    with pytest.raises(CollectorFailure, match=f"collector 0 failed {MAX_FAILED_STARTS} times in a row"):
        collection._replace(collection.workers[0], "hung")
    assert collection.workers[0] is None
