"""A game's guard (environments/trackmania/tmi/games/game_guard.py) on a Ray cluster of two nodes on 127.0.0.1: a
stand-in game launched by an actor on a worker node dies with that node, though no learner can reach the
node to kill it (the lost node's actor is replaced elsewhere; its games must not keep running). A guard
leaves a dead collector's game to its learner only while that learner runs, and a dead learner's own
game to nobody."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from environments.trackmania.tmi.games.launcher import GameGuard, default_launcher
from environments.trackmania.tmi.games.processes import process_info
from rulka.collection.owned import SUPERVISOR_ENV

from .standin_helpers import standin_available, standin_settings

pytestmark = pytest.mark.reliability


class GameOwner:
    """A collector's stand-in: launches one stand-in game through rulka's launcher and keeps it."""

    def launch(self, python: str) -> tuple[int, int]:
        os.environ["RULKA_STANDIN_PYTHON"] = python
        settings = standin_settings(1)
        self.game = default_launcher(settings)(settings.base_port)
        return self.game.game_pid, process_info(self.game.game_pid).start_ticks


@pytest.fixture
def two_nodes(monkeypatch):
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'rulka[ray]' runs these tests")
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    monkeypatch.setenv(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR, "0")  # see tests/rulka/collection/test_multinode.py
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=0, node_ip_address="127.0.0.1", object_store_memory=80 * 2 ** 20, include_dashboard=False))
    worker = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1", object_store_memory=80 * 2 ** 20)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, _node_ip_address="127.0.0.1", logging_level="WARNING")
    yield ray, cluster, worker
    ray.shutdown()
    cluster.shutdown()


def test_a_lost_nodes_game_dies_with_its_node(two_nodes):
    """An actor on a worker node launches a stand-in game (launch.sh through the launcher, as TMI_* settings
    do); the node is removed (its raylet and the actor die; a learner's kill task could not run there): the
    game is gone within 20 s, killed by its guard (the node's raylet gone: no learner can kill it there)."""
    standin_available()
    ray, cluster, worker = two_nodes
    owner = ray.remote(num_cpus=1)(GameOwner).remote()
    pid, start = ray.get(owner.launch.remote(sys.executable), timeout=90)
    assert process_info(pid) is not None and process_info(pid).start_ticks == start
    cluster.remove_node(worker)
    deadline = time.monotonic() + 20
    while (info := process_info(pid)) is not None and info.start_ticks == start and time.monotonic() < deadline:
        time.sleep(0.1)
    left = process_info(pid)
    if left is not None and left.start_ticks == start:
        os.kill(pid, 9)
        pytest.fail(f"the lost node's game (pid {pid}) still ran 20 s after its node was removed")


def _guard_pid(guard: GameGuard) -> int | None:
    """The guard process reading ``guard``'s pipe (its standard input)."""
    pipe = f"pipe:[{os.fstat(guard.pipe.fileno()).st_ino}]"
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and int(entry) != os.getpid() and os.readlink(f"/proc/{entry}/fd/0") == pipe:
                return int(entry)
        except OSError:
            continue
    return None


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while process_info(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    return process_info(pid) is None


def test_a_guard_ends_with_its_game_and_kills_it_when_released():
    """A guard whose game ends by other means exits within 3 s (no guard piles up over hours of
    relaunches); a guard released (its owner gone, no supervisor left) while its game runs kills it."""
    games = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
             for _ in range(2)]
    guards = [GameGuard(), GameGuard()]  # the test is no collector: no supervisor, no grace before the kill
    for guard, game in zip(guards, games):
        guard.watch("game", game.pid, process_info(game.pid).start_ticks)
    watchers = [_guard_pid(guard) for guard in guards]
    assert None not in watchers
    games[0].kill()
    games[0].wait()
    assert _wait_gone(watchers[0], 3), "the guard of a game that ended stayed"
    guards[1].close()
    assert _wait_gone(games[1].pid, 3) or games[1].poll() is not None, "a released guard left its game running"
    games[1].wait(5)
    assert _wait_gone(watchers[1], 3)


_OWNER = """
import os, sys
from environments.trackmania.tmi.games.launcher import GameGuard
from environments.trackmania.tmi.games.processes import process_info
from rulka.collection.owned import SUPERVISOR_ENV
guard = GameGuard()
game = int(sys.argv[1])
guard.watch("game", game, process_info(game).start_ticks)
print("watching", flush=True)
os._exit(0)  # killed: the pipe closes without close()
"""


@pytest.mark.parametrize("collector", [True, False], ids=["collector process", "learner process"])
def test_a_dead_owners_game_waits_for_the_learner_only_in_a_collector(collector):
    """The owner of a game dies. In a collector process (the collection layer named its learner as
    supervisor) the guard leaves the game to the learner while the learner runs, and kills it once the
    learner is gone too; in the learner's own process (in-process collection: nobody else will kill the
    game) the guard kills it at once instead of waiting up to a minute."""
    game = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    learner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    env = {k: v for k, v in os.environ.items() if k != SUPERVISOR_ENV}
    if collector:
        env[SUPERVISOR_ENV] = str(learner.pid)
    try:
        owner = subprocess.run([sys.executable, "-c", _OWNER, str(game.pid)], env=env, capture_output=True,
                               text=True, timeout=60, cwd=Path(__file__).resolve().parents[4])
        assert owner.stdout.strip() == "watching", owner.stderr
        if collector:
            time.sleep(4)
            assert game.poll() is None, "the guard killed a collector's game while its learner still ran"
            learner.kill()
            learner.wait()
        assert _wait_gone(game.pid, 5) or game.poll() is not None, "the dead owner's game was left running"
    finally:
        for process in (game, learner):
            process.kill()
            process.wait()
