"""IQN (Dabney et al. 2018) as Linesight trains it.

Online quantiles Z(s, a, tau) at N = ``iqn_n`` fractions; targets ``R + discount * Z'(s', a*, tau')``
at N fractions of the target network. Quantile Huber loss with ``iqn_kappa``. Acting uses the
mean over K = ``iqn_k`` quantiles. Priorities (with ``prio_alpha > 0``) come from
``|mean(predicted) - mean(target)|`` per sample, as Linesight's.

The bootstrap action ``a*`` maximises the quantile-mean Q of the target network, or of the
online network with ``use_ddqn`` (as Linesight). Without ``use_ddqn`` this differs from Linesight,
which takes the maximum over actions separately for each target quantile: that mixes the
quantiles of different actions into one "distribution" that no policy has, and biases every
quantile upwards (a maximum of noisy estimates); the textbook choice evaluates one action, the
one the greedy policy would take. Linesight ships with ``use_ddqn`` off, so its targets and
ours differ there; this agent keeps the textbook choice on purpose.

The loss of a batch is the importance-weighted mean of the per-sample losses here; the
TrackMania agent uses Linesight's scaling and sum instead (:meth:`IQNAgent.scale_loss`,
:meth:`IQNAgent.reduce_loss`).
"""
from __future__ import annotations

import torch
from torch import nn

from agents.agent import Agent, LossOutput
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

    def q_values(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.online_network.q_values(observations, self.config.neural_network.iqn_k)

    def deterministic_q_values(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        """Q (B, A): the mean of ``iqn_k`` quantiles at the fixed midpoint fractions ``(i + 0.5) / iqn_k``,
        the same every call (the run's own acting samples them: :meth:`q_values`)."""
        return self.online_network.q_values(observations, self.config.neural_network.iqn_k, fixed=True)

    def quantiles(self, batch: TransitionBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(predicted, targets, taus, target_taus)``, each (B, N): the online quantiles of the taken
        actions at ``taus`` and the (gradient-free) target quantiles at ``target_taus``."""
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
            next_values = next_quantiles.gather(2, best.view(size, 1, 1).expand(size, n, 1)).squeeze(2)  # (B, N)
            targets = batch.returns.unsqueeze(1) + batch.discounts.unsqueeze(1) * next_values
        taus = sample_symmetric_taus(size, n, self.device)
        quantiles = self.online_network(batch.states, taus)  # (B, N, A)
        predicted = quantiles.gather(2, batch.actions.view(size, 1, 1).expand(size, n, 1)).squeeze(2)
        return predicted, targets, taus, target_taus

    def scale_loss(self, loss: torch.Tensor, targets: torch.Tensor, target_taus: torch.Tensor,
                   update_statistics: bool) -> torch.Tensor:
        """Per-sample rescaling of the (B,) losses (none here); ``update_statistics`` is False for
        held-out batches, whose statistics must not leak into training."""
        return loss

    def reduce_loss(self, per_sample: torch.Tensor) -> torch.Tensor:
        """The batch's loss from the (B,) weighted per-sample losses: their mean here."""
        return per_sample.mean()

    def batch_loss(self, batch: TransitionBatch, update_statistics: bool = True
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(loss, per_sample, predicted, targets)``: the reduced weighted loss and its (B,) parts."""
        predicted, targets, taus, target_taus = self.quantiles(batch)
        per_sample = quantile_huber_loss(predicted, targets, taus, self.config.neural_network.iqn_kappa)
        per_sample = self.scale_loss(per_sample, targets, target_taus, update_statistics)
        return self.reduce_loss(per_sample * batch.weights), per_sample, predicted, targets

    def compute_loss(self, batch: TransitionBatch) -> LossOutput:
        loss, _, predicted, targets = self.batch_loss(batch)
        predicted = predicted.detach()
        errors = (predicted.mean(dim=1) - targets.mean(dim=1)).abs()
        return LossOutput(loss, errors, {"mean_q": predicted.mean().item()})
