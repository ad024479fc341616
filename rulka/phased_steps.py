"""Phased steps: a step written as a generator, so that one thread can step several environments.

An environment (the outermost layer a LevelManager holds) may offer ``step_phases(action)``: the same
step as ``step``, written as a generator that yields each time it has sent a request to another
process (a game behind a socket) and would wait for the reply, and returns ``step``'s five values.
A collector whose environments all offer it steps them in its own thread (:func:`run_phases`): it
sends every environment's request, then reads each reply in turn while the others compute, and no
thread hands work to another (on a machine with few cores each hand-off waits for a core).
:func:`finish_phases` runs one phased step to its end: the plain ``step`` it stands for.
"""
from __future__ import annotations

from typing import Any, Generator, Sequence, TypeVar

Result = TypeVar("Result")
#: A step written in phases: yields while the other process computes, returns the step's result.
Phases = Generator[None, None, Result]


def offers_step_phases(env: Any) -> bool:
    """Whether ``env`` itself (not a layer it wraps: a wrapper's own ``step`` would be skipped) has
    ``step_phases``."""
    return callable(getattr(env, "step_phases", None))


def finish_phases(phases: Phases[Result]) -> Result:
    """Run a phased step to its end in this thread: the plain ``step`` it stands for."""
    try:
        while True:
            next(phases)
    except StopIteration as stop:
        return stop.value


def run_phases(steps: Sequence[Phases[Any]], results: list[Any]) -> None:
    """Run the phased ``steps`` together in this thread: each round resumes every step not yet ended,
    in order, so that while one waits for its reply the others' requests are already out.

    ``results[k]`` receives what step ``k`` returned. When some raised, the others still run to
    their end, then the error of the lowest ``k`` is raised.
    """
    errors: list[BaseException | None] = [None] * len(steps)
    live = list(range(len(steps)))
    while live:
        still = 0
        for k in live:
            try:
                next(steps[k])
            except StopIteration as stop:
                results[k] = stop.value
            except BaseException as error:  # noqa: BLE001 - raised below, after the other steps ended
                errors[k] = error
            else:
                live[still] = k
                still += 1
        del live[still:]
    for error in errors:
        if error is not None:
            raise error
