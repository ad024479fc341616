"""Bench variants measured in a process of their own, for levers that hold for a whole process
(``performance.keep_freed_memory``: glibc's thresholds, set once at the start).

The parent asks one process at a time, so the processes never share the cores while measuring;
alternating the parent's asks between processes keeps the rounds comparable.
"""
from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from typing import Any

import torch

from rulka.freed_memory import keep_freed_memory

#: A picklable callable (a module-level function or a functools.partial of one) returning the variants
#: by name and a line describing what it built.
VariantBuilder = Callable[[], tuple[dict[str, Callable[[], None]], str]]


def timed(fn: Callable[[], None], seconds: float, minimum: int = 0) -> tuple[int, float]:
    """Run ``fn`` for about ``seconds``, and at least ``minimum`` times: (calls done, seconds taken)."""
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or done < minimum:
        fn()
        done += 1
    return done, time.perf_counter() - start


def _serve(conn: Any, build: VariantBuilder, keep_memory: bool, threads: int) -> None:
    if keep_memory:
        keep_freed_memory()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    variants, info = build()
    conn.send((list(variants), info))
    while (request := conn.recv()) is not None:
        name, seconds, warmup = request
        fn = variants[name]
        for _ in range(warmup):
            fn()
        done, elapsed = timed(fn, seconds, minimum=2)
        conn.send(done / elapsed)


class VariantProcess:
    """A spawned process that builds ``build()``'s variants and measures one on request (calls/s)."""

    def __init__(self, build: VariantBuilder, keep_memory: bool, threads: int) -> None:
        spawn = mp.get_context("spawn")
        self.conn, child = spawn.Pipe()
        self.process = spawn.Process(target=_serve, args=(child, build, keep_memory, threads), daemon=True)
        self.process.start()
        self.names, self.info = self.conn.recv()

    def rate(self, name: str, seconds: float, warmup: int = 1) -> float:
        self.conn.send((name, seconds, warmup))
        return self.conn.recv()

    def close(self) -> None:
        self.conn.send(None)
        self.process.join(timeout=30)
