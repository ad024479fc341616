"""Losses of the value-based agents."""
from __future__ import annotations

import torch


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
    td = targets.unsqueeze(1) - predictions.unsqueeze(2)  # (B, N, N')
    abs_td = td.abs()
    huber = torch.where(abs_td < kappa, 0.5 / kappa * td.pow(2), abs_td - 0.5 * kappa)
    weight = (taus.unsqueeze(2) - (td.detach() < 0).float()).abs()
    return (weight * huber).sum(dim=2).mean(dim=1)
