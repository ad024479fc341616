"""A real multi-node Ray cluster on this machine: a head (the learner's node, no CPUs for collectors) and two
worker nodes (ray.cluster_utils.Cluster: separate raylets and object stores), every node on 127.0.0.1.
Collectors spread over the workers (SCHEDULING_STRATEGY "SPREAD"), cartpole_iqn learns there, and a
worker node removed mid-run has its collector replaced on the surviving node without losing the run."""
import threading
import time

import pytest

#: Per node: one CPU resource (two collector actors of 0.5 CPU fit, so a survivor can take a replacement).
WORKER_ARGS = dict(num_cpus=1, node_ip_address="127.0.0.1", object_store_memory=100 * 2 ** 20)


@pytest.fixture
def cluster(monkeypatch):
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'rulka[ray]' runs these tests")
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    # ray.init(address="127.0.0.1:PORT") swaps 127.0.0.1 for the machine's outward address (where nothing
    # listens: every node is bound to 127.0.0.1) unless Ray treats this machine as a single-host cluster;
    # the variable reaches the nodes' processes, the constant this one (read when ray was imported).
    monkeypatch.setenv(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR, "0")
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)

    if ray.is_initialized():  # another module's local instance
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=0, node_ip_address="127.0.0.1", object_store_memory=150 * 2 ** 20, include_dashboard=False))
    workers = [cluster.add_node(**WORKER_ARGS) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, _node_ip_address="127.0.0.1", logging_level="WARNING")
    yield ray, cluster, workers
    ray.shutdown()
    cluster.shutdown()


def test_multinode_cluster_learns_cartpole_and_survives_a_lost_node(cluster):
    """2 collectors on 2 worker nodes (one each); cartpole_iqn learns (an evaluation of 5 greedy episodes
    reaches 150 within 12,500 steps; random play scores about 20); the node of
    collector 1 is removed mid-run: collector 1 is replaced on the surviving node, the run completes,
    and the episodes stored equal the finished episodes the collectors returned (none lost, none twice)."""
    ray, ray_cluster, workers = cluster
    from rulka.collection.ray_collection import RayCollection
    from rulka.presets import load_graph_manager

    graph_manager = load_graph_manager("cartpole_iqn")
    perf = graph_manager.config.performance
    perf.collector_backend, perf.gpu_collectors_count, perf.ray_collector_cpus = "ray", 2, 0.5
    perf.torch_num_threads = 1
    graph_manager.config.training.checkpoint_every_n_env_steps = 0
    graph_manager.config.training.evaluation_episodes = 5
    graph_manager.create(None, "cpu", seed=0)
    returned_ends, placements = [], set()
    receive = RayCollection._receive

    def spy(self, actor, call):
        chunks = receive(self, actor, call)
        returned_ends.extend((r.source, r.episode) for r in chunks if r.episode_ended and not r.discarded)
        if actor.node_id:
            placements.add((actor.collector_id, actor.incarnation, actor.node_id))
        return chunks

    RayCollection._receive = spy
    nodes_before, removed = {}, []

    def remove_a_node():
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not removed:
            collection = graph_manager.collection
            nodes = collection.collector_nodes() if isinstance(collection, RayCollection) else {}
            if len(nodes) == 2 and graph_manager.agent.counters.gradient_updates >= 200:
                nodes_before.update(nodes)
                victim = next(w for w in workers if w.node_id == nodes[1])
                ray_cluster.remove_node(victim)
                removed.append(victim.node_id)
            time.sleep(0.2)

    killer = threading.Thread(target=remove_a_node)
    killer.start()
    try:
        summary = graph_manager.improve(12_500, show_progress=False)
    finally:
        RayCollection._receive = receive
        killer.join()
        graph_manager.close()
    collection = graph_manager.collection
    assert len(set(nodes_before.values())) == 2, f"collectors not spread over the workers: {nodes_before}"
    assert removed, "the run ended before a node could be removed"
    survivor = next(w.node_id for w in workers if w.node_id != removed[0])
    assert collection.stats.restarts >= 1 and collection.incarnations[1] >= 2
    assert any(e.startswith("collector 1 died") for e in graph_manager.collector_events), graph_manager.collector_events
    assert summary.best_evaluation >= 150, f"did not learn: evaluations {graph_manager.evaluation_history}"
    replacements = {node for cid, incarnation, node in placements if cid == 1 and incarnation >= 2}
    assert replacements == {survivor}, (placements, survivor)
    assert len(returned_ends) == len(set(returned_ends)) == summary.episodes
