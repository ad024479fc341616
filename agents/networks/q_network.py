"""The DQN network: embedders, then a Q head. dict of (B, ...) -> (B, A)."""
from __future__ import annotations

import torch
from gymnasium import spaces
from torch import nn

from agents.networks.embedders import EmbedderFactory, MultiInputEmbedder
from agents.networks.heads import QHead
from agents.networks.init import orthogonal_init
from agents.networks.precision_regions import without_bfloat16


class QNetwork(nn.Module):
    def __init__(self, observation_space: spaces.Dict, num_actions: int, vector_hidden_sizes: list[int],
                 head_hidden_size: int, dueling: bool, embedder_factories: dict[str, EmbedderFactory] | None = None) -> None:
        super().__init__()
        self.embedder = MultiInputEmbedder(observation_space, vector_hidden_sizes, embedder_factories)
        self.head = QHead(self.embedder.output_size, head_hidden_size, num_actions, dueling)
        orthogonal_init(self)

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        features = self.embedder(observations)
        with without_bfloat16(features):
            return self.head(features)
