"""Keep a process's freed memory for reuse (glibc malloc) instead of handing it back to the system.

A CPU update allocates its activations afresh each time. With glibc's defaults a block above the mmap
threshold (adjusted at run time, at most 32 MiB) is mapped from the system when it is allocated and
unmapped when it is freed, and the top of the heap is trimmed when more than twice that is free: so
every update page-faults its large activations in again (and the kernel zeroes each page). At
Linesight's shape (160 x 120 frames, batch 512, activations up to 96 MB) that was about 450,000 page
faults and 1 s of system time per 5 s update; at the sim preset's shape about 1,700 per update. With a
high mmap threshold and a high trim threshold, freed blocks stay in the heap and the next update
reuses them: the process keeps its peak working set, as a GPU's caching allocator does.

Linux with glibc only (``mallopt``); elsewhere nothing changes.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

#: ``mallopt`` parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Blocks below this come from the heap (glibc's own default cap is 32 MiB; newer glibc accepts more).
MMAP_THRESHOLD_BYTES = 1 << 30
FALLBACK_MMAP_THRESHOLD_BYTES = 32 << 20
#: Free memory at the heap's top above this is returned to the system (int's maximum).
TRIM_THRESHOLD_BYTES = (1 << 31) - 1


def keep_freed_memory() -> str | None:
    """Raise glibc's mmap and trim thresholds for this process; what was set, or None where glibc's
    ``mallopt`` is not available (not Linux, or another C library). Safe to call more than once."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    for threshold in (MMAP_THRESHOLD_BYTES, FALLBACK_MMAP_THRESHOLD_BYTES):
        if mallopt(M_MMAP_THRESHOLD, threshold):
            break
    else:
        return None
    mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    return f"freed memory kept for reuse (glibc mmap threshold {threshold >> 20} MiB, trim threshold 2 GiB)"
