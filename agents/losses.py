"""Losses of the value-based agents."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def quantile_huber_loss(predictions: torch.Tensor, targets: torch.Tensor, taus: torch.Tensor,
                        kappa: float) -> torch.Tensor:
    """The IQN loss per sample, shape (B,).

    Args:
        predictions: (B, N) online quantile values at fractions ``taus`` (B, N).
        targets: (B, N') target quantile values (no gradient flows into them).
        kappa: Huber threshold; ``0.5 / kappa * d**2`` if ``|d| < kappa`` else ``|d| - 0.5 * kappa``.

    The Huber terms of every pair (i, j), with ``d = target_j - prediction_i``, are weighted by
    ``|tau_i - 1{d < 0}|``, summed over target quantiles j and averaged over online quantiles i.
    """
    shape = (predictions.shape[0], predictions.shape[1], targets.shape[1])
    online = predictions.unsqueeze(2).expand(shape)  # (B, N, N'), no copy
    target = targets.unsqueeze(1).expand(shape)
    # smooth_l1_loss with beta = kappa is the Huber term above, in one kernel (forward and backward)
    huber = F.smooth_l1_loss(online, target, reduction="none", beta=kappa)
    weight = (taus.unsqueeze(2) - (target < online.detach()).to(taus.dtype)).abs()  # d < 0
    return (weight * huber).sum(dim=2).mean(dim=1)
