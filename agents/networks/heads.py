"""Q heads: dueling (Q = V + A - mean(A)) or a single MLP."""
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
        advantage = self.advantage(features)
        if not self.dueling:
            return advantage
        return self.value(features) + advantage - advantage.mean(dim=-1, keepdim=True)
