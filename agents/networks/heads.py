"""Q heads: dueling (Q = V + A - mean(A)) or a single MLP.

Under autocast (``performance.precision``) the last layer of each branch runs in float32 on the
low-precision hidden features: the quantile values, and with them the targets, the TD errors, the
loss and the priorities, keep float32's resolution (bfloat16 resolves only 1/256 of a value).
Under bfloat16 the whole head runs in float32 (:mod:`agents.networks.precision_regions`).
"""
from __future__ import annotations

import torch
from torch import nn

from agents.networks.embedders import mlp


class QHead(nn.Module):
    """(..., F) features to (..., A) action values."""

    def __init__(self, input_size: int, hidden_size: int, num_actions: int, dueling: bool) -> None:
        super().__init__()
        self.dueling = dueling
        hidden = [hidden_size] if hidden_size > 0 else []
        self.advantage = nn.Sequential(mlp([input_size, *hidden]), nn.Linear(hidden[-1] if hidden else input_size, num_actions))
        if dueling:
            self.value = nn.Sequential(mlp([input_size, *hidden]), nn.Linear(hidden[-1] if hidden else input_size, 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        advantage = _float32_output(self.advantage, features)
        if not self.dueling:
            return advantage
        return _float32_output(self.value, features) + advantage - advantage.mean(dim=-1, keepdim=True)


def _float32_output(branch: nn.Sequential, features: torch.Tensor) -> torch.Tensor:
    """``branch`` = (hidden MLP, output Linear): the MLP in the ambient precision, the output Linear
    in float32."""
    hidden = branch[0](features)
    device_type = hidden.device.type
    if not torch.is_autocast_enabled(device_type):
        return branch[1](hidden)
    with torch.autocast(device_type, enabled=False):
        return branch[1](hidden.float())
