"""Which slots of a :class:`~memories.storage.StepStorage` a batch is drawn from, and their weights.

* :class:`UniformSampler`: every ready slot equally likely, weights 1.
* :class:`PrioritizedSampler`: proportional prioritized replay (Schaul et al. 2015) as Linesight
  runs it. A slot's priority (a leaf of a :class:`~memories.sum_tree.SumTree`) is
  ``(|error| + prio_epsilon) ** prio_alpha`` once it has been learnt from; a slot that becomes
  ready gets Linesight's default priority: 0.4 until the first batch is drawn, then twice the
  average leaf of the memory at the last draw (Linesight's ``CustomPrioritizedSampler``; torchrl's
  sampler would give the maximum). Slots that are not ready have priority 0 and are never drawn.
  Sampling is stratified (one draw per ``total / batch_size`` segment). Importance weights
  ``(N * P(i)) ** -prio_beta`` with ``N`` the number of ready slots are divided by their batch
  maximum (Schaul et al.; Linesight leaves them undivided, which only rescales the step).
"""
from __future__ import annotations

import numpy as np
import torch

from memories.storage import StepStorage
from memories.sum_tree import SumTree

#: Linesight's default priority before the first batch has been drawn.
INITIAL_PRIORITY = 0.4
#: A new slot's priority, in average priorities (Linesight's ``default_priority_ratio``).
DEFAULT_PRIORITY_RATIO = 2.0


class UniformSampler:
    """Uniformly drawn ready slots (rejection sampling: almost every slot is ready)."""

    prioritized = False

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def sample(self, storage: StepStorage, batch_size: int) -> tuple[np.ndarray, np.ndarray | None]:
        """(B,) slots and their importance weights (None: all 1)."""
        if storage.size == 0:
            raise ValueError("cannot sample from a memory with no complete transition")
        draw = self.rng.integers(0, storage.size, size=2 * batch_size + 8)
        chosen = draw[storage.ready[draw]]
        while chosen.size < batch_size:
            if chosen.size == 0 and not storage.ready[: storage.size].any():  # (checked only when in doubt)
                raise ValueError("cannot sample from a memory with no complete transition")
            draw = self.rng.integers(0, storage.size, size=2 * (batch_size - chosen.size) + 8)
            chosen = np.concatenate([chosen, draw[storage.ready[draw]]])
        return chosen[:batch_size], None

    def sync(self, storage: StepStorage) -> None:
        storage.pop_changed()

    def resize(self, capacity: int, keep: np.ndarray) -> None:
        """Nothing to move."""

    def state_dict(self, storage: StepStorage) -> dict:
        return {}

    def load_state_dict(self, state: dict, storage: StepStorage) -> None:
        storage.pop_changed()


class PrioritizedSampler:
    """Proportional prioritized sampling over the ready slots.

    Args:
        capacity: number of slots of the storage.
        rng: the memory's generator.
        alpha: ``memory.prio_alpha`` (> 0).
        epsilon: ``memory.prio_epsilon``, added to ``|error|`` so every slot keeps a chance.
        beta: ``memory.prio_beta``; the attribute may be changed at any time (annealing).
    """

    prioritized = True

    def __init__(self, capacity: int, rng: np.random.Generator, alpha: float = 0.6, epsilon: float = 2e-3,
                 beta: float = 1.0) -> None:
        if alpha < 0:
            raise ValueError(f"the priority exponent alpha must be non-negative, got {alpha}")
        if epsilon <= 0 and alpha > 0:
            raise ValueError(f"the priority offset epsilon must be positive, got {epsilon}")
        self.rng = rng
        self.alpha, self.epsilon, self.beta = float(alpha), float(epsilon), float(beta)
        self.tree = SumTree(capacity)
        self.average_priority: float | None = None  # leaf average at the last draw

    def default_priority(self) -> float:
        """Leaf value of a slot that just became ready."""
        if self.average_priority is None:
            return INITIAL_PRIORITY
        return DEFAULT_PRIORITY_RATIO * self.average_priority

    def priority_of(self, errors: np.ndarray) -> np.ndarray:
        """(B,) leaf values ``(|errors| + epsilon) ** alpha``."""
        return (np.abs(np.asarray(errors, dtype=np.float64)) + self.epsilon) ** self.alpha

    def sync(self, storage: StepStorage) -> None:
        """Follow the storage: slots written or closed since the last call get 0 or the default priority."""
        changed = storage.pop_changed()
        if changed.size:
            ready = storage.ready[changed]
            self.tree.update(changed[~ready], 0.0)
            self.tree.update(changed[ready], self.default_priority())

    def sample(self, storage: StepStorage, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        self.sync(storage)
        total, count = self.tree.total, len(storage)
        if total <= 0.0 or count == 0:
            raise ValueError("cannot sample from a memory with no complete transition")
        self.average_priority = total / count
        values = (np.arange(batch_size) + self.rng.random(batch_size)) * (total / batch_size)
        indices = self.tree.find(np.minimum(values, np.nextafter(total, 0.0)))
        return indices, self.importance_weights(indices, count)

    def importance_weights(self, indices: np.ndarray, count: int) -> np.ndarray:
        """(B,) float32 ``(N * P(i)) ** -beta`` divided by their maximum."""
        probabilities = self.tree[indices] / self.tree.total
        with np.errstate(divide="ignore"):
            weights = (count * probabilities) ** -self.beta
        weights = np.where(np.isfinite(weights), weights, 0.0)
        highest = weights.max(initial=0.0)
        return (weights / highest if highest > 0 else np.ones_like(weights)).astype(np.float32)

    def update(self, storage: StepStorage, indices: np.ndarray, errors: np.ndarray | torch.Tensor) -> int:
        """Set the priorities of ``indices`` (B,) from ``errors`` (B,); slots no longer ready are left
        alone; with repeated indices the last error wins. Returns the number written."""
        self.sync(storage)
        if isinstance(errors, torch.Tensor):
            errors = errors.detach().to("cpu", torch.float64).numpy()
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        errors = np.asarray(errors, dtype=np.float64).reshape(-1)
        if errors.shape != indices.shape:
            raise ValueError(f"got {errors.size} errors for {indices.size} indices")
        if not np.all(np.isfinite(errors)):
            raise ValueError("errors must be finite to be used as priorities")
        mask = storage.ready[indices]
        self.tree.update(indices[mask], self.priority_of(errors[mask]))
        return int(mask.sum())

    def resize(self, capacity: int, keep: np.ndarray) -> None:
        self.tree.resize(capacity, keep)

    @property
    def priorities(self) -> np.ndarray:
        """(capacity,) leaf values (call :meth:`sync` first for an up-to-date view)."""
        return self.tree.leaves

    def state_dict(self, storage: StepStorage) -> dict:
        self.sync(storage)
        return {"priorities": torch.from_numpy(self.tree.leaves[: storage.size].copy()),
                "average_priority": self.average_priority}

    def load_state_dict(self, state: dict, storage: StepStorage) -> None:
        """Restore; a checkpoint of a uniform memory gives every ready slot the default priority."""
        storage.pop_changed()
        self.tree = SumTree(storage.capacity)
        n = storage.size
        self.average_priority = state.get("average_priority")
        if "priorities" in state:
            leaves = state["priorities"].numpy().astype(np.float64)
        else:
            leaves = np.full(n, self.default_priority())
        self.tree.rebuild(np.where(storage.ready[:n], leaves, 0.0))
