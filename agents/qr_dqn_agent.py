"""QR-DQN (Dabney et al. 2017, "Distributional Reinforcement Learning with Quantile Regression"),
added to rulka by subclassing :class:`~agents.iqn_agent.IQNAgent` (the walk-through: docs/new_agent.md).

QR-DQN and IQN learn the same thing, N quantiles of the return distribution of every action with
the quantile Huber loss, and differ only in where the quantile fractions come from:

* IQN samples fresh fractions for every batch and feeds them to its network (cosine embedding);
* QR-DQN fixes them at the midpoints ``tau_i = (2i - 1) / (2N)``, i = 1..N, and its network
  outputs the N x A quantile values at once (no fraction input).

So three methods change: the network (:meth:`QRDQNAgent.create_networks`), acting
(:meth:`QRDQNAgent.q_values`: the mean of the N quantiles) and the quantiles of a batch
(:meth:`QRDQNAgent.quantiles`: fixed fractions instead of sampled ones). Everything else is
inherited: the loss (:func:`agents.losses.quantile_huber_loss`, importance-weighted and averaged
over the batch), the priority errors, memory, exploration, replay-ratio gate, optimizer, target
sync and checkpoints.

Configuration: ``neural_network.iqn_n`` is N, ``iqn_kappa`` the Huber
threshold, ``use_ddqn`` picks the bootstrap action with the online network; ``iqn_k`` and
``iqn_embedding_dimension`` are not used.
"""
from __future__ import annotations

import torch
from gymnasium import spaces
from torch import nn

from agents.iqn_agent import IQNAgent
from agents.networks.embedders import EmbedderFactory, MultiInputEmbedder
from agents.networks.heads import QHead
from agents.networks.init import orthogonal_init
from agents.networks.precision_regions import without_bfloat16
from rulka.core_types import TransitionBatch


def quantile_fractions(num_quantiles: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The fixed fractions ``tau_i = (2i - 1) / (2N)``, i = 1..N, shape (N,): the midpoints of N equal
    slices of [0, 1] (the fractions whose quantiles minimise the 1-Wasserstein distance)."""
    if num_quantiles < 1:
        raise ValueError(f"QR-DQN needs at least one quantile (neural_network.iqn_n), got {num_quantiles}")
    i = torch.arange(1, num_quantiles + 1, dtype=torch.float32, device=device)
    return (2 * i - 1) / (2 * num_quantiles)


class QuantileNetwork(nn.Module):
    """Embedders, then heads with N x A outputs: dict of (B, ...) -> (B, N, A) quantile values.

    Dueling: ``Z(s, a)_i = V(s)_i + A(s, a)_i - mean_a A(s, a)_i`` (one value per quantile).
    """

    def __init__(self, observation_space: spaces.Dict, num_actions: int, num_quantiles: int,
                 vector_hidden_sizes: list[int], head_hidden_size: int, dueling: bool,
                 embedder_factories: dict[str, EmbedderFactory] | None = None) -> None:
        super().__init__()
        self.num_actions, self.num_quantiles = num_actions, num_quantiles
        self.embedder = MultiInputEmbedder(observation_space, vector_hidden_sizes, embedder_factories)
        features = self.embedder.output_size
        self.advantage = QHead(features, head_hidden_size, num_quantiles * num_actions, dueling=False)
        self.value = QHead(features, head_hidden_size, num_quantiles, dueling=False) if dueling else None
        orthogonal_init(self)

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        features = self.embedder(observations)  # (B, F)
        with without_bfloat16(features):
            advantage = self.advantage(features).view(-1, self.num_quantiles, self.num_actions)  # (B, N, A)
            if self.value is None:
                return advantage
            return self.value(features).unsqueeze(2) + advantage - advantage.mean(dim=2, keepdim=True)


class QRDQNAgent(IQNAgent):
    def create_networks(self) -> nn.Module:
        p = self.config.neural_network
        return QuantileNetwork(self.observation_space, self.num_actions, p.iqn_n, p.vector_embedder_hidden_sizes,
                               p.dense_hidden_dimension, p.dueling, self.embedder_factories())

    def q_values(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        """Q (B, A): the mean of the N quantiles (each stands for 1/N of the distribution)."""
        return self.online_network(observations).mean(dim=1)

    def quantiles(self, batch: TransitionBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(predicted, targets, taus, taus)``, each (B, N): the online quantiles of the taken actions
        and the targets ``R + discount * Z_target(s', a*)``, both at the fixed fractions ``taus``.

        ``a*`` maximises the quantile mean of the target network (of the online network with
        ``use_ddqn``)."""
        size, rows = batch.size, torch.arange(batch.size, device=self.device)
        taus = quantile_fractions(self.config.neural_network.iqn_n, self.device).expand(size, -1)
        with torch.no_grad():
            next_quantiles = self.target_network(batch.next_states)  # (B, N, A)
            chooser = self.online_network(batch.next_states) if self.config.neural_network.use_ddqn else next_quantiles
            best = chooser.mean(dim=1).argmax(dim=1)  # (B,)
            targets = batch.returns.unsqueeze(1) + batch.discounts.unsqueeze(1) * next_quantiles[rows, :, best]
        predicted = self.online_network(batch.states)[rows, :, batch.actions]  # (B, N)
        return predicted, targets, taus, taus
