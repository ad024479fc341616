"""Stepping a collector's environments at the same time, for environments that wait on I/O.

An environment that drives another program (a game behind a socket) spends most of a step waiting
for it, with this process idle; a :class:`~rulka.collection.collector.Collector` of several such
environments then steps them all at once (:class:`StepPool`) and a step takes the longest of their
waits instead of the sum. Results stay in slot order, so the rollouts are the same either way.

The hook: an environment, or any layer of its wrapper chain (followed through ``.env``), may declare
``steps_wait_on_io = True`` (an attribute or property): its ``step`` and ``reset`` mostly wait on
another process and may run in a thread beside the other environments' (it shares no unguarded
state with them). ``performance.concurrent_env_steps: auto`` steps a collector's environments
concurrently when all of them declare it; rulka's core reads it with ``getattr`` and knows no
environment.

The cheaper way, where the environments offer it: phased steps (:mod:`rulka.phased_steps`), run
interleaved in the collector's own thread instead of in a pool of threads.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

_MAX_WRAPPERS = 16


def steps_wait_on_io(env: Any) -> bool:
    """``steps_wait_on_io`` of the first layer of ``env``'s wrapper chain that declares it, else False."""
    for _ in range(_MAX_WRAPPERS):
        if env is None:
            return False
        flag = getattr(env, "steps_wait_on_io", None)
        if flag is not None:
            return bool(flag)
        env = getattr(env, "env", None)
    return False


def use_concurrent_steps(setting: bool | str, envs: Sequence[Any]) -> bool:
    """Whether a collector of ``envs`` steps them concurrently under ``performance.concurrent_env_steps``
    (``auto``: when there are several and every one declares :func:`steps_wait_on_io`)."""
    if len(envs) < 2 or setting is False:
        return False
    if setting == "auto":
        return all(steps_wait_on_io(env) for env in envs)
    if setting is True:
        return True
    raise ValueError(f"concurrent_env_steps must be 'auto', true or false, got {setting!r}")


class StepPool:
    """Runs ``call(k)`` for ``k`` in ``range(count)`` at the same time, ``count <= size``.

    ``k = 0`` runs in the calling thread, each other ``k`` in a worker thread of its own, started once
    and reused (nothing is allocated per call). :meth:`run` returns when every call has returned and
    then raises the error of the lowest ``k`` that raised, if any (the others ran to their end).
    """

    def __init__(self, size: int, name: str = "rulka-env-step") -> None:
        self.size = max(1, int(size))
        self._call: Callable[[int], None] | None = None
        self._errors: list[BaseException | None] = [None] * self.size
        self._go = [threading.Semaphore(0) for _ in range(self.size)]
        self._done = threading.Semaphore(0)
        self._closed = False
        self._threads = [threading.Thread(target=self._work, args=(k,), name=f"{name}-{k}", daemon=True)
                         for k in range(1, self.size)]
        for thread in self._threads:
            thread.start()

    def run(self, call: Callable[[int], None], count: int) -> None:
        if self._closed:
            raise RuntimeError("the step pool is closed")
        if count > self.size:
            raise ValueError(f"{count} calls for a pool of {self.size}")
        self._call = call
        for k in range(1, count):
            self._go[k].release()
        try:
            call(0)
        except BaseException as error:  # noqa: BLE001 - raised below, after the workers' calls returned
            self._errors[0] = error
        for _ in range(1, count):
            self._done.acquire()
        self._call = None
        first = None
        for k in range(count):
            if first is None:
                first = self._errors[k]
            self._errors[k] = None
        if first is not None:
            raise first

    def _work(self, k: int) -> None:
        while True:
            self._go[k].acquire()
            if self._closed:
                return
            try:
                self._call(k)  # type: ignore[misc]
            except BaseException as error:  # noqa: BLE001 - handed to run's caller
                self._errors[k] = error
            self._done.release()

    def close(self) -> None:
        """Stop the worker threads (between runs)."""
        if self._closed:
            return
        self._closed = True
        for k in range(1, self.size):
            self._go[k].release()
        for thread in self._threads:
            thread.join(timeout=5.0)
