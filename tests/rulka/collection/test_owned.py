"""The owned-process hook: found through wrapper chains, published in the shared status, and killed
only while the pid still belongs to the process that was reported (same start time)."""
from __future__ import annotations

import importlib.util
import multiprocessing as mp
import subprocess
import sys

import pytest

from rulka.collection.owned import identify, kill_reported, owned_pids, owned_ports, process_start_time
from rulka.collection.shared import SharedStatus


class _Game:
    def __init__(self, pids, ports):
        self._pids, self._ports = pids, ports

    def owned_pids(self):
        return self._pids

    def owned_ports(self):
        return self._ports


class _Wrapper:
    def __init__(self, env):
        self.env = env


def test_the_hook_is_found_through_wrappers_and_absent_means_nothing():
    """A wrapper chain (``.env``) is followed to the layer that owns processes; an env without the hook owns none."""
    env = _Wrapper(_Wrapper(_Game((11, 12), (5000,))))
    assert owned_pids(env) == (11, 12) and owned_ports(env) == (5000,)
    assert owned_pids(_Wrapper(object())) == () and owned_ports(object()) == ()


@pytest.mark.skipif(not sys.platform.startswith("linux") and importlib.util.find_spec("psutil") is None,
                    reason="start times need psutil (or /proc, Linux)")
def test_a_reported_process_is_killed_only_under_its_start_time():
    """A pid reported with another start time (reused by another program) is left alone; the right one is killed."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        [(pid, start)] = identify([child.pid, child.pid])
        assert pid == child.pid and start == process_start_time(child.pid)
        assert kill_reported([(pid, start + 1)]) == [] and child.poll() is None
        assert kill_reported([(pid, start)]) == [pid]
        assert child.wait(5) == -9
        assert kill_reported([(pid, start)]) == []  # gone: nothing to kill
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_the_shared_status_keeps_each_collectors_report():
    """Reports of two collectors do not mix; clearing one forgets it."""
    status = SharedStatus(2, mp.get_context("spawn"))
    status.report_owned(0, [(101, 7), (102, 8)], (5000,))
    status.report_owned(1, [(201, 9)], (5001, 5002))
    assert status.read_owned(0) == ([(101, 7), (102, 8)], [5000])
    assert status.read_owned(1) == ([(201, 9)], [5001, 5002])
    status.clear_owned(0)
    assert status.read_owned(0) == ([], []) and status.read_owned(1)[0] == [(201, 9)]


def test_the_killer_on_another_node_imports_no_torch():
    """The learner kills a replaced Ray actor's games on another node through that node's ProcessKiller, an
    actor whose new worker process there imports the class's module: it must be owned.py, which imports no
    torch (ray_collection.py does: on a busy 2-core machine the soak saw games die 14 s after their actor
    when a kill's worker imported it; a killer started late would be as slow)."""
    from rulka.collection import owned, ray_collection

    code = "import sys, rulka.collection.owned; print('torch' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"], out
    assert ray_collection.ProcessKiller is owned.ProcessKiller
    assert owned.ProcessKiller.__module__ == "rulka.collection.owned"
