"""A real multi-node Ray cluster on this machine: a head (the learner's node, no CPUs for collectors) and two
worker nodes (ray.cluster_utils.Cluster: separate raylets and object stores), every node on 127.0.0.1.
Collectors spread over the workers (SCHEDULING_STRATEGY "SPREAD"), cartpole_iqn learns there, and a
worker node removed mid-run has its collector replaced on the surviving node without losing the run.
A collector that dies on a worker node has its processes there killed by that node's ProcessKiller,
started before the failure."""
import functools
import threading
import time

import pytest

#: Per node: one CPU resource (two collector actors of 0.5 CPU fit, so a survivor can take a replacement).
WORKER_ARGS = dict(num_cpus=1, node_ip_address="127.0.0.1", object_store_memory=100 * 2 ** 20)


def _cluster(monkeypatch, workers: int):
    """A fixture's body: yields (ray, the cluster, its worker nodes) with Ray connected, then shuts both down."""
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
    nodes = [cluster.add_node(**WORKER_ARGS) for _ in range(workers)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, _node_ip_address="127.0.0.1", logging_level="WARNING")
    yield ray, cluster, nodes
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture
def cluster(monkeypatch):
    """A head (no CPU) and two worker nodes."""
    yield from _cluster(monkeypatch, 2)


@pytest.fixture
def one_worker(monkeypatch):
    """A head (no CPU) and one worker node."""
    yield from _cluster(monkeypatch, 1)


def test_multinode_cluster_learns_cartpole_and_survives_a_lost_node(cluster):
    """2 collectors on 2 worker nodes (one each); cartpole_iqn learns (an evaluation of 5 greedy episodes
    reaches 150 within 12,500 steps; random play scores about 20); the node of
    collector 1 is removed mid-run: collector 1 is replaced on the surviving node, the run goes on (it is
    stopped once the replacement races and an evaluation reached 150), and the episodes stored equal the
    finished episodes the collectors returned (none lost, none twice)."""
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
        # what the test checks has happened (collector 1 replaced and racing, an evaluation of 150): the
        # rest of the 12,500 steps adds nothing
        while time.monotonic() < deadline and not finished.is_set():
            replaced = any(cid == 1 and incarnation >= 2 for cid, incarnation, _ in placements)
            if replaced and (graph_manager.best_evaluation or 0) >= 150:
                graph_manager.stop_requested = True
                return
            time.sleep(0.2)

    finished = threading.Event()
    killer = threading.Thread(target=remove_a_node)
    killer.start()
    try:
        summary = graph_manager.improve(12_500, show_progress=False)
    finally:
        finished.set()
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


@pytest.mark.reliability
def test_a_dead_actors_games_on_a_worker_node_are_killed_by_the_nodes_killer_started_before(one_worker, tmp_path):
    """The actor runs on a worker node (the head has no CPU for it) and reports its "game": the learner starts
    a ProcessKiller on that node at once, before any failure. The actor is SIGKILLed: its game is killed
    through that killer (a method call; a task would first start a new worker process on the node, seconds
    on a busy machine), the replacement is announced within 3 s, and at the end no game is left."""
    from rulka.collection.owned import process_start_time
    from tests.rulka.collection.envs import game_owner_factory, games_started, kill_left, make_graph_manager, sigkill

    ray = one_worker[0]
    games = tmp_path / "games.txt"
    graph_manager = make_graph_manager(collector_backend="ray", collectors=1, collector_timeout_s=60.0,
                                       ray_collector_cpus=0.5,
                                       env_factory=functools.partial(game_owner_factory, str(games)))
    done = threading.Event()
    thread = threading.Thread(target=lambda: (graph_manager.improve(50_000, show_progress=False), done.set()))
    thread.start()
    try:
        deadline = time.monotonic() + 120
        collection = actor = None
        while time.monotonic() < deadline:
            collection = graph_manager.collection
            actor = collection.actors[0] if collection is not None else None
            if actor is not None and actor.pid and actor.owned and actor.owned_node in collection.killers:
                break
            time.sleep(0.1)
        assert actor is not None and actor.pid and actor.owned, "the actor did not report its game"
        assert actor.owned_node != collection.node_id, "the actor runs on the learner's node"
        killer = collection.killers[actor.owned_node]
        killer_pid = ray.get(killer.pid.remote(), timeout=60)
        game = actor.owned[0][0]
        sigkill(actor.pid)
        killed_at = time.monotonic()
        while time.monotonic() < deadline and not graph_manager.collector_events:  # logged after the kill
            time.sleep(0.02)
        noticed_s = time.monotonic() - killed_at
        assert process_start_time(game) is None, "the dead actor's game was not killed"
        event = graph_manager.collector_events[0]
        assert event.startswith("collector 0 died") and f"pids {game}; ports 45678) were killed" in event, event
        assert noticed_s <= 3.0, f"the replacement was announced {noticed_s:.1f} s after the actor died"
        assert collection.killers.get(actor.owned_node) is killer and process_start_time(killer_pid) is not None
    finally:
        graph_manager.stop_requested = True  # as Ctrl-C does: the run stops its collection and ends
        thread.join(180)
        alive = kill_left(games_started(games))
    assert done.is_set() and not alive
    assert graph_manager.collection.killers == {}, "the run stopped with its killers still up"
    deadline = time.monotonic() + 10  # ray.kill returns before the process is gone
    while process_start_time(killer_pid) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process_start_time(killer_pid) is None, "the node's killer outlived the run"
