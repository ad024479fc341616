"""IQN (Dabney et al. 2018) as Linesight trains it.

Online quantiles Z(s, a, tau) at N = ``iqn_n`` fractions; targets ``R + gamma_n * Z'(s', a*, tau')``
at N fractions of the target network, where a* maximises the quantile-mean Q of the target network
(or of the online network with ``use_ddqn``). Quantile Huber loss with ``iqn_kappa``. Acting uses
the mean over K = ``iqn_k`` quantiles.
"""
from __future__ import annotations

import torch
from torch import nn

from agents.agent import Agent
from agents.losses import quantile_huber_loss
from agents.networks.iqn_network import IQNNetwork, sample_symmetric_taus
from rulka.core_types import TransitionBatch


class IQNAgent(Agent):
    def create_networks(self) -> nn.Module:
        p = self.config.neural_network
        return IQNNetwork(self.observation_space, self.num_actions, p.vector_embedder_hidden_sizes,
                          p.dense_hidden_dimension, p.dueling, p.iqn_embedding_dimension,
                          self.embedder_factories())

    def embedder_factories(self) -> dict:
        """Per-observation-name embedder factories that replace the defaults (none here)."""
        return {}

    def loss_per_sample(self, predicted: torch.Tensor, targets: torch.Tensor, taus: torch.Tensor,
                        target_taus: torch.Tensor) -> torch.Tensor:
        """(B,) loss of each sample; predicted (B, N) at ``taus``, targets (B, N) at ``target_taus``."""
        return quantile_huber_loss(predicted, targets, taus, self.config.neural_network.iqn_kappa)

    def after_update(self, batch: TransitionBatch, per_sample_loss: torch.Tensor) -> None:
        """Called after each gradient step with the (B,) sample losses (e.g. for priorities)."""

    def q_values(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.online_network.q_values(observations, self.config.neural_network.iqn_k)

    def quantile_loss(self, batch: TransitionBatch, normalise: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-sample loss (B,) and the online quantiles of the taken actions (B, N).

        ``normalise=False`` skips :meth:`loss_per_sample`'s adjustments (for a held-out test loss).
        """
        p = self.config.neural_network
        size, n = batch.size, p.iqn_n
        with torch.no_grad():
            target_taus = sample_symmetric_taus(size, n, self.device)
            next_quantiles = self.target_network(batch.next_states, target_taus)  # (B, N, A)
            if p.use_ddqn:
                chooser = self.online_network(batch.next_states, sample_symmetric_taus(size, n, self.device))
            else:
                chooser = next_quantiles
            best = chooser.mean(dim=1).argmax(dim=1)  # (B,)
            next_values = next_quantiles[torch.arange(size, device=self.device), :, best]  # (B, N)
            targets = batch.returns.unsqueeze(1) + batch.discounts.unsqueeze(1) * next_values
        taus = sample_symmetric_taus(size, n, self.device)
        quantiles = self.online_network(batch.states, taus)  # (B, N, A)
        predicted = quantiles.gather(2, batch.actions.view(size, 1, 1).expand(size, n, 1)).squeeze(2)
        if not normalise:
            return quantile_huber_loss(predicted, targets, taus, p.iqn_kappa), predicted
        return self.loss_per_sample(predicted, targets, taus, target_taus), predicted

    def learn_from_batch(self, batch: TransitionBatch) -> dict[str, float]:
        per_sample, predicted = self.quantile_loss(batch)
        loss = (per_sample * batch.weights).mean()
        grad_norm = self.optimize(loss)
        self.after_update(batch, per_sample.detach())
        return {"loss": loss.item(), "mean_q": predicted.detach().mean().item(), "grad_norm": grad_norm}
