"""Fixtures shared by the collection tests."""
import pytest


@pytest.fixture(scope="module")
def ray():
    """A local Ray instance for one test module, every socket on 127.0.0.1 (tests send traffic to loopback
    only; Ray binds the machine's interface address unless told otherwise). Skips where Ray is absent."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'rulka[ray]' runs these tests")
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", object_store_memory=150 * 2 ** 20,
                 _node_ip_address="127.0.0.1", _system_config={"worker_niceness": 0})
    yield ray
    if started:
        ray.shutdown()
