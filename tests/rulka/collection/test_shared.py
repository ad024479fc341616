import pytest
import torch
import torch.multiprocessing as tmp
from torch import nn

from rulka.collection.shared import SharedPolicy, SharedStatus
from rulka.core_types import Counters


def test_published_weights_reach_a_copy_only_when_newer():
    """The learner's publish is what a collector loads, once per version; collectors never write it."""
    ctx = tmp.get_context("spawn")
    learner, collector = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)), nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    policy = SharedPolicy(learner, ctx)
    assert policy.load_into(collector, 0) is None  # nothing published yet
    policy.publish(learner, gradient_updates=12)
    assert policy.load_into(collector, 0) == (1, 12)
    for a, b in zip(learner.state_dict().values(), collector.state_dict().values()):
        assert torch.equal(a.float(), b.float())
    assert policy.load_into(collector, 1) is None  # already held
    with torch.no_grad():
        learner[0].weight.add_(1.0)
    policy.publish(learner, gradient_updates=20)
    assert policy.load_into(collector, 1) == (2, 20)
    assert torch.equal(collector[0].weight, learner[0].weight)


def test_counters_go_through_shared_status():
    """Collectors read the learner's counters (every schedule counts the actions of all collectors)."""
    status = SharedStatus(2, tmp.get_context("spawn"))
    status.publish_counters(Counters(env_steps=1234, episodes=5, gradient_updates=77, transitions_sampled=999), False)
    into = Counters()
    status.read_counters(into)
    assert into == Counters(1234, 5, 77, 999) and status.heatup.value == 0


def _layers(n: int, width: int) -> nn.Sequential:
    return nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(n)])


def _fill(network: nn.Module, value: float) -> None:
    with torch.no_grad():
        for parameter in network.parameters():
            parameter.fill_(value)


@pytest.mark.reliability
def test_a_load_during_a_publish_is_never_a_mix_of_two_publications():
    """A collector that copies while the learner publishes gets one whole publication, never half of each
    (the copy is retried when a publication began under it): the learner publishes networks of all 1s, then
    all 2s, ..., without pause; each load must be one value throughout."""
    import threading
    import time

    ctx = tmp.get_context("spawn")
    learner, collector = _layers(40, 64), _layers(40, 64)
    policy = SharedPolicy(learner, ctx)
    stop, loads = threading.Event(), []

    def learn() -> None:
        value = 0.0
        while not stop.is_set():
            value += 1.0
            _fill(learner, value)
            policy.publish(learner, gradient_updates=int(value))
            time.sleep(0.001)  # a learner publishes between updates

    thread = threading.Thread(target=learn)
    thread.start()
    try:
        held, deadline = 0, time.monotonic() + 20
        while len(loads) < 100 and time.monotonic() < deadline:
            loaded = policy.load_into(collector, held)
            if loaded is None:
                continue
            held, updates = loaded
            values = torch.cat([p.detach().flatten() for p in collector.parameters()]).unique()
            loads.append((values.tolist(), updates))
    finally:
        stop.set()
        thread.join()
    assert len(loads) == 100
    assert all(values == [float(updates)] for values, updates in loads), [l for l in loads if len(l[0]) > 1][:3]


def _load_forever(policy: SharedPolicy) -> None:
    network, held = _layers(8, 512), 0
    while True:
        loaded = policy.load_into(network, held)
        held = loaded[0] if loaded else held


@pytest.mark.reliability
def test_a_collector_killed_while_copying_the_weights_blocks_no_publish():
    """SIGKILL a collector process that loads the weights all the time while the learner publishes all the
    time (a kill lands in the middle of a copy about half the time): the learner's next publish still
    completes. With a lock around the copy, a kill inside it left the lock held and the learner's next
    publish (and every other collector's load) waited forever (checked: the first kill hung it, 4 runs of 4)."""
    import os
    import random
    import signal
    import threading
    import time

    ctx = tmp.get_context("fork")
    learner = _layers(8, 512)
    policy = SharedPolicy(learner, ctx)
    for attempt in range(8):
        reader = ctx.Process(target=_load_forever, args=(policy,), daemon=True)
        reader.start()
        stop = threading.Event()
        published = [0]

        def learn() -> None:
            while not stop.is_set():
                policy.publish(learner, gradient_updates=published[0])
                published[0] += 1

        thread = threading.Thread(target=learn, daemon=True)
        thread.start()
        time.sleep(random.uniform(0.2, 0.4))
        os.kill(reader.pid, signal.SIGKILL)
        reader.join(5)
        at_kill = published[0]
        deadline = time.monotonic() + 5
        while published[0] < at_kill + 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        stop.set()
        thread.join(5)
        assert published[0] >= at_kill + 3, f"kill {attempt + 1}: the learner's publish blocked after the collector died"
