"""The IQN network (Dabney et al. 2018) as Linesight builds it.

features = embedders(observations)                       (B, F)
phi(tau) = LeakyReLU(Linear(cos(pi * k * tau)), k=1..E)  (B, N, F)
Z(s, tau) = head(features * phi(tau))                    (B, N, A)  -- dueling by default
"""
from __future__ import annotations

import math

import torch
from gymnasium import spaces
from torch import nn

from agents.networks.embedders import EmbedderFactory, MultiInputEmbedder
from agents.networks.heads import QHead
from agents.networks.init import LEAKY_RELU_SLOPE, orthogonal_init
from agents.networks.precision_regions import without_bfloat16


def sample_symmetric_taus(batch_size: int, num_quantiles: int, device: torch.device | str = "cpu",
                          generator: torch.Generator | None = None) -> torch.Tensor:
    """Stratified, symmetric quantile fractions, shape (B, N), N even.

    The first N/2 are ``(i + U(0, 1)) / N`` for i = 0..N/2-1 (one per stratum of the lower half),
    the other N/2 their mirrors ``1 - tau``.
    """
    if num_quantiles % 2:
        raise ValueError(f"the number of quantiles must be even, got {num_quantiles}")
    half = num_quantiles // 2
    strata = torch.arange(half, device=device, dtype=torch.float32)
    noise = torch.rand(batch_size, half, device=device, generator=generator)
    lower = (strata + noise) / num_quantiles
    return torch.cat([lower, 1.0 - lower], dim=1)


def midpoint_taus(batch_size: int, num_quantiles: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Fixed quantile fractions, shape (B, K): the midpoints ``(i + 0.5) / K`` of K equal strata, i = 0..K-1
    (symmetric: each has its mirror ``1 - tau``). The same every call, for deterministic acting."""
    taus = (torch.arange(num_quantiles, device=device, dtype=torch.float32) + 0.5) / num_quantiles
    return taus.expand(batch_size, num_quantiles)


class IQNNetwork(nn.Module):
    def __init__(self, observation_space: spaces.Dict, num_actions: int, vector_hidden_sizes: list[int],
                 head_hidden_size: int, dueling: bool, embedding_dimension: int,
                 embedder_factories: dict[str, EmbedderFactory] | None = None) -> None:
        super().__init__()
        self.embedder = MultiInputEmbedder(observation_space, vector_hidden_sizes, embedder_factories)
        features = self.embedder.output_size
        self.register_buffer("cos_multipliers", math.pi * torch.arange(1, embedding_dimension + 1, dtype=torch.float32))
        self.quantile_embedding = nn.Sequential(nn.Linear(embedding_dimension, features),
                                                nn.LeakyReLU(LEAKY_RELU_SLOPE, inplace=True))
        self.head = QHead(features, head_hidden_size, num_actions, dueling)
        orthogonal_init(self)

    def forward(self, observations: dict[str, torch.Tensor], taus: torch.Tensor) -> torch.Tensor:
        """Quantile values (B, N, A) at fractions ``taus`` (B, N)."""
        batch, n = taus.shape
        features = self.embedder(observations)  # (B, F)
        # every layer after the embedder runs on flat (B * N, .) rows: a Linear on a 3-D input returns a
        # view, and the in-place LeakyReLU on a view costs a copy of the activations forward and backward
        with without_bfloat16(features):
            phi = self.quantile_embedding(torch.cos(taus.reshape(batch * n, 1) * self.cos_multipliers))  # (B * N, F)
            mixed = (features.unsqueeze(1) * phi.view(batch, n, -1)).view(batch * n, -1)
            return self.head(mixed).view(batch, n, -1)

    def q_values(self, observations: dict[str, torch.Tensor], num_quantiles: int, fixed: bool = False) -> torch.Tensor:
        """Q (B, A): the mean over ``num_quantiles`` quantiles, at sampled symmetric fractions
        (:func:`sample_symmetric_taus`) or, with ``fixed``, at the midpoints (:func:`midpoint_taus`)."""
        batch = next(iter(observations.values())).shape[0]
        device = self.cos_multipliers.device
        if fixed:
            taus = midpoint_taus(batch, num_quantiles, device)
        else:
            taus = sample_symmetric_taus(batch, num_quantiles, device)
        return self(observations, taus).mean(dim=1)
