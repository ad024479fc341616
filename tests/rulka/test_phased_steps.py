"""The driver of phased steps (several environments stepped in one thread)."""
from __future__ import annotations

import pytest

from rulka.phased_steps import finish_phases, run_phases


def test_run_phases_resumes_steps_in_rounds_and_raises_the_lowest_error():
    """The driver: round by round, each unfinished step resumes in order; results land by index; steps of
    different lengths end on their own round; the lowest index's error is raised after all ended."""
    order = []

    def phases(k, n, fail=False):
        for round_ in range(n):
            order.append((round_, k))
            yield
        if fail:
            raise ValueError(f"step {k}")
        return k * 10

    results = [None] * 3
    run_phases([phases(0, 2), phases(1, 1), phases(2, 3)], results)
    assert results == [0, 10, 20]
    assert order == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 2), (2, 2)]
    results = [None] * 3
    with pytest.raises(ValueError, match="step 1"):
        run_phases([phases(0, 1), phases(1, 1, fail=True), phases(2, 2, fail=True)], results)
    assert results == [0, None, None]
    assert finish_phases(phases(4, 3)) == 40
