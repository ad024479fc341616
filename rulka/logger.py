"""TensorBoard scalars in named groups, one log directory per run, with the suffix schedule.

Scalars are named ``Group/name`` (``Training/loss``, ``RL/epsilon``, ``Eval/return``,
``Performance/steps_per_s``). When the env-step counter passes a knot of
``tensorboard_suffix_schedule``, a new writer opens in ``<log_root>/<run_name><suffix>``.
"""
from __future__ import annotations

from pathlib import Path

from tensorboardX import SummaryWriter

from rulka.schedules import Schedule


class RunLogger:
    def __init__(self, log_root: str | Path, run_name: str, suffix_schedule: Schedule, speed: float = 1.0) -> None:
        self.log_root = Path(log_root)
        self.run_name = run_name
        self.suffix_schedule = suffix_schedule
        self.speed = speed
        self.suffix: str | None = None
        self.writer: SummaryWriter | None = None

    def _writer_for(self, env_steps: int) -> SummaryWriter:
        suffix = str(self.suffix_schedule.value(env_steps, self.speed))
        if self.writer is None or suffix != self.suffix:
            if self.writer is not None:
                self.writer.close()
            self.suffix = suffix
            self.writer = SummaryWriter(str(self.log_root / f"{self.run_name}{suffix}"))
        return self.writer

    @property
    def log_dir(self) -> Path | None:
        return None if self.suffix is None else self.log_root / f"{self.run_name}{self.suffix}"

    def scalars(self, values: dict[str, float], env_steps: int) -> None:
        """Log ``{"Group/name": value}`` at ``env_steps``."""
        writer = self._writer_for(env_steps)
        for tag, value in values.items():
            writer.add_scalar(tag, float(value), env_steps)

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
