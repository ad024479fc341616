"""A one-line progress display: phase, steps, steps/s, the last evaluation score and the best so far.

On a terminal it redraws one line; elsewhere (CI, files) it prints a line every ``interval_s``.
"""
from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    def __init__(self, total_steps: int, stream: TextIO | None = None, interval_s: float = 10.0,
                 enabled: bool = True) -> None:
        self.total = total_steps
        self.stream = stream or sys.stderr
        self.interactive = self.stream.isatty()
        self.interval = 0.2 if self.interactive else interval_s
        self.enabled = enabled
        self._last_draw = 0.0
        self._rate_start = (time.monotonic(), 0)
        self.steps_per_s = 0.0

    def update(self, phase: str, steps: int, last_eval: float | None, force: bool = False,
               best_eval: float | None = None) -> None:
        """Redraw (at most every ``interval_s``, or now with ``force``). ``last_eval`` / ``best_eval``: the last
        evaluation and the best so far (None: none yet), in the graph manager's unit (a return, a race time)."""
        now = time.monotonic()
        t0, s0 = self._rate_start
        if now - t0 >= 2.0:
            self.steps_per_s = (steps - s0) / (now - t0)
            self._rate_start = (now, steps)
        if not self.enabled or (not force and now - self._last_draw < self.interval):
            return
        self._last_draw = now
        fraction = min(1.0, steps / self.total) if self.total else 0.0
        filled = int(fraction * 20)
        score = "-" if last_eval is None else f"{last_eval:.2f}"
        best = "-" if best_eval is None else f"{best_eval:.2f}"
        line = (f"{phase:<8} [{'#' * filled}{'.' * (20 - filled)}] {steps}/{self.total} steps "
                f"{self.steps_per_s:.0f} steps/s  last eval {score}  best {best}")
        if self.interactive:
            self.stream.write("\r" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.interactive:
            self.stream.write("\n")
            self.stream.flush()
