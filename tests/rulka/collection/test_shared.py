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
