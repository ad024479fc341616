"""How stale the data is: policy lag and queue delay, in the learner's gradient updates.

* policy lag of an action: the gradient updates the learner had made when the action was chosen,
  beyond those of the weights that chose it (what ``send_shared_network_every_n_batches`` and
  ``update_inference_network_every_n_actions`` bound);
* queue delay of an action: the gradient updates the learner made between the action being
  chosen and it being stored.

Collectors stamp every action with the updates of their weights and the wall-clock time
(``time.time()``) at which it was chosen (:class:`~rulka.collection.rollout.Rollout`); the learner
keeps the time of each of its updates (:class:`UpdateClock`) and turns the stamps into counts. On
several machines this assumes their clocks agree (NTP keeps them within milliseconds); a negative
lag from a clock ahead of the learner's is counted as 0.
"""
from __future__ import annotations

import numpy as np

#: Updates whose times are kept (the older half is dropped when full): hours at tens of updates/s.
HISTORY_CAPACITY = 1 << 20


class UpdateClock:
    """The times of the learner's gradient updates: ``updates_at(t)`` = updates made by time ``t``."""

    def __init__(self, updates: int = 0) -> None:
        self._times = np.zeros(1024, dtype=np.float64)
        self._n = 0
        self._base = int(updates)  # updates made before the first kept time

    def record(self, when: float, updates: int) -> None:
        """The learner's count reached ``updates`` at ``when`` (called after each update)."""
        missing = int(updates) - (self._base + self._n)
        if missing <= 0:
            return
        if self._n + missing > self._times.shape[0]:
            if self._times.shape[0] < HISTORY_CAPACITY:
                grown = np.zeros(min(HISTORY_CAPACITY, 2 * self._times.shape[0] + missing), dtype=np.float64)
                grown[:self._n] = self._times[:self._n]
                self._times = grown
            if self._n + missing > self._times.shape[0]:
                drop = max(self._n // 2, self._n + missing - self._times.shape[0])
                self._times[:self._n - drop] = self._times[drop:self._n].copy()
                self._n -= drop
                self._base += drop
        self._times[self._n:self._n + missing] = when
        self._n += missing

    def updates_at(self, times: np.ndarray) -> np.ndarray:
        """(T,) int64: updates made at or before each of ``times`` (seconds of ``time.time()``)."""
        return self._base + np.searchsorted(self._times[:self._n], times, side="right").astype(np.int64)


class LagMeter:
    """Gathers per-action policy lags and queue delays; their percentiles over what it gathered."""

    def __init__(self) -> None:
        self.policy_lag: list[np.ndarray] = []
        self.queue_delay: list[np.ndarray] = []

    def add(self, policy_lag: np.ndarray, queue_delay: np.ndarray) -> None:
        self.policy_lag.append(policy_lag)
        self.queue_delay.append(queue_delay)

    def __len__(self) -> int:
        return sum(len(a) for a in self.policy_lag)

    def percentiles(self, qs: tuple[float, ...] = (50, 95)) -> dict[str, dict[float, float]]:
        """{"policy_lag_batches": {50: p50, 95: p95}, "queue_delay_batches": {...}}; empty when nothing was gathered."""
        if not len(self):
            return {}
        return {name: {q: float(v) for q, v in zip(qs, np.percentile(np.concatenate(arrays), qs))}
                for name, arrays in (("policy_lag_batches", self.policy_lag),
                                     ("queue_delay_batches", self.queue_delay))}

    def clear(self) -> None:
        self.policy_lag.clear()
        self.queue_delay.clear()


def action_lags(clock: UpdateClock, step_policy_updates: np.ndarray, step_times: np.ndarray,
                updates_now: int) -> tuple[np.ndarray, np.ndarray]:
    """(policy lag, queue delay) of each action of a rollout stored when the learner had made ``updates_now``."""
    at_choice = clock.updates_at(step_times)
    policy_lag = np.maximum(at_choice - step_policy_updates, 0)
    queue_delay = np.maximum(updates_now - at_choice, 0)
    return policy_lag, queue_delay


def policy_lag_bound(send_every_n_batches: int, update_every_n_actions: int, gradient_updates: int,
                     actions_per_environment: float) -> float:
    """The guide's promise on the policy lag: the learner publishes every ``send_every_n_batches``
    updates, a collector loads every ``update_every_n_actions`` actions of each environment, so an
    action's weights are at most ``send_every_n_batches`` plus the updates the learner makes during
    ``update_every_n_actions`` actions behind (at the run's average rates: ``gradient_updates`` made
    while each environment played ``actions_per_environment`` actions)."""
    per_action = gradient_updates / max(actions_per_environment, 1e-9)
    return send_every_n_batches + update_every_n_actions * per_action
