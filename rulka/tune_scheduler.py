"""ASHA that writes down the trials it stops, so that ``rulka tune``'s table tells them from trials that
ran to their budget and from trials a Ctrl-C interrupted (imported only with Ray Tune installed)."""
from __future__ import annotations

from typing import Any

from ray.tune.schedulers import ASHAScheduler, TrialScheduler


class RecordingASHAScheduler(ASHAScheduler):
    """:class:`ASHAScheduler` that appends the sweep index of each trial it stops to ``record_path``."""

    def __init__(self, record_path: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.record_path = record_path

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        decision = super().on_trial_result(tune_controller, trial, result)
        if decision == TrialScheduler.STOP:
            with open(self.record_path, "a", encoding="utf-8") as f:
                f.write(f"{trial.config['trial']['index']}\n")
        return decision
