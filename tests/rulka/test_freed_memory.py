"""rulka.freed_memory: the learner keeps its freed memory for reuse (performance.keep_freed_memory)."""
import subprocess
import sys
import textwrap

import pytest

from rulka.freed_memory import keep_freed_memory

# Allocates (malloc, as torch's CPU allocator does), touches and frees 64 MiB twice; prints the page
# faults of the second time.
SCRIPT = textwrap.dedent("""
    import ctypes, resource, sys
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    if sys.argv[1] == "keep":
        from rulka.freed_memory import keep_freed_memory
        assert keep_freed_memory()
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    size = 64 << 20  # above glibc's largest default mmap threshold (32 MiB)
    for _ in range(2):
        before = faults()
        block = libc.malloc(size)
        ctypes.memset(block, 1, size)
        libc.free(block)
    print(faults() - before)
""")


def second_allocation_faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True, timeout=60)
    return int(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux") or keep_freed_memory() is None,
                    reason="glibc's mallopt is Linux/glibc only; elsewhere keep_freed_memory changes nothing")
def test_a_freed_block_is_reused_without_page_faults():
    """With glibc's defaults a 64 MiB block is mapped afresh each time (16,384 pages faulted in
    again); kept, the second allocation reuses the first one's pages."""
    assert second_allocation_faults("default") > 10_000
    assert second_allocation_faults("keep") < 1_000


def test_the_learner_keeps_freed_memory_unless_told_not_to(monkeypatch, tmp_path):
    """GraphManager.create applies performance.keep_freed_memory in the learner's process."""
    import rulka.graph_manager as graph_manager
    from rulka.presets import load_graph_manager

    calls = []
    monkeypatch.setattr(graph_manager, "keep_freed_memory", lambda: calls.append(1) or "kept")
    for keep in (True, False):
        manager = load_graph_manager("cartpole_iqn")
        manager.config.performance.keep_freed_memory = keep
        manager.create(None)
        manager.close()
    assert calls == [1]
