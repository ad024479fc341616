"""Weights as fresh as configured: the learner publishes every send_shared_network_every_n_batches
updates from inside its update loop, and Ray actors take new weights, counters and the heatup flag
while a call runs (every update_inference_network_every_n_actions actions), not per call."""
import numpy as np
import pytest

from rulka.collection.lag import LagMeter
from tests.rulka.collection.envs import make_graph_manager, slow_corridor_factory


class _RecordingCollection:
    """Stands in for collector processes: records the learner's gradient updates at each publish."""

    def __init__(self):
        self.published_at, self.heatup_flags = [], []

    def publish(self, agent):
        self.published_at.append(agent.counters.gradient_updates)

    def publish_counters(self, agent, heatup):
        self.heatup_flags.append(heatup)


def test_publish_every_n_updates_inside_one_training_burst():
    """One burst of ~60 updates (a large chunk stored at once) publishes after every 4th update, not once
    at the end of the burst."""
    graph_manager = make_graph_manager(collectors=0, send_shared_network_every_n_batches=4)
    agent = graph_manager.agent
    space = agent.observation_space
    obs = {k: np.zeros(s.shape, s.dtype) for k, s in space.spaces.items()}
    for t in range(360):  # learning starts at 100 stored; then 4 samples per transition, batches of 16
        agent.observe(obs, t % 2, True, 0.0, obs, False, t % 30 == 29)
        if t == 120:
            assert agent.updates_allowed() == 0  # learning starts counting here
    graph_manager.collection = recording = _RecordingCollection()
    graph_manager._clock = type("Clock", (), {"publish": 0.0})()
    graph_manager.train_and_log()
    updates = agent.counters.gradient_updates
    assert updates >= 40, f"the burst made only {updates} updates"
    assert recording.published_at == list(range(4, updates + 1, 4))
    assert recording.heatup_flags and not any(recording.heatup_flags)


def test_publish_reaches_a_ray_actor_while_its_call_runs(ray):
    """One actor plays a race that never ends, in 300-action chunks (one call each): the weights change
    inside a chunk (refreshed every 8 actions), and the third chunk, queued while the learner was still
    in heatup, already has greedy actions (the heatup flag reached the running call)."""
    graph_manager = make_graph_manager(env_factory=slow_corridor_factory, collectors=1, collector_backend="ray",
                                       rollout_chunk_actions=300, send_shared_network_every_n_batches=4,
                                       update_inference_network_every_n_actions=8)
    chunks = []
    ingest = graph_manager.ingest
    graph_manager.ingest = lambda rollout: (chunks.append(rollout), ingest(rollout))
    meter = LagMeter()
    graph_manager.lag_meters.append(meter)
    graph_manager.improve(2_400, show_progress=False)
    assert len(chunks) >= 6
    versions_per_chunk = [len(set(c.step_policy_updates.tolist())) for c in chunks]
    assert max(versions_per_chunk[1:]) >= 3, versions_per_chunk  # per-call weights would give 1 per chunk
    assert chunks[2].was_greedy.any(), "the third chunk was played entirely at random: heatup came per call"
    assert not chunks[0].was_greedy.any()  # heatup: random
    assert len(meter) > 0
