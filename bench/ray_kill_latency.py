"""How long the learner takes to kill a process on another Ray node: a new task pinned there (rulka before
e9b0be9) against a method call of that node's ProcessKiller, started ahead (rulka since).

    python bench/ray_kill_latency.py [BUSY_PROCESSES]

A 2-node cluster on 127.0.0.1 (a head with no CPU, one worker node); each way kills a fresh `sleep`, 3 times,
5 s apart; BUSY_PROCESSES (default 0) spin a core each meanwhile, as games and a learner load a small machine."""
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ray  # noqa: E402
from ray._private import ray_constants
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from rulka.collection.owned import ProcessKiller, identify, kill_and_wait

LOAD = int(sys.argv[1]) if len(sys.argv) > 1 else 0
def burn(stop):
    while not stop.is_set():
        pass

os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
ray_constants.ENABLE_RAY_CLUSTER = False
cluster = Cluster(initialize_head=True, head_node_args=dict(num_cpus=0, node_ip_address="127.0.0.1", include_dashboard=False,
                                                            object_store_memory=100 * 2 ** 20))
worker = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1", object_store_memory=100 * 2 ** 20)
cluster.wait_for_nodes()
ray.init(address=cluster.address, _node_ip_address="127.0.0.1", logging_level="WARNING")
on_worker = NodeAffinitySchedulingStrategy(worker.node_id, soft=False)
task = ray.remote(num_cpus=0, max_retries=0)(kill_and_wait)
killer = ray.remote(num_cpus=0, max_restarts=0)(ProcessKiller).options(scheduling_strategy=on_worker).remote()
ray.get(killer.pid.remote())
stop = mp.Event()
burners = [mp.Process(target=burn, args=(stop,)) for _ in range(LOAD)]
for b in burners: b.start()
for trial in range(3):
    for way in ("task", "killer"):
        time.sleep(5)  # Ray ends an idle worker beyond its pool after about a second
        sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
        processes = identify([sleeper.pid])
        t0 = time.monotonic()
        ref = task.options(scheduling_strategy=on_worker).remote(processes, 2.0) if way == "task" else killer.kill.remote(processes, 2.0)
        killed = ray.get(ref, timeout=30)
        print(f"load {LOAD} trial {trial} {way}: killed {killed == [sleeper.pid]} in {time.monotonic() - t0:.2f} s", flush=True)
        sleeper.wait()
stop.set()
for b in burners: b.join()
ray.shutdown(); cluster.shutdown()
