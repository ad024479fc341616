"""DQN (Mnih et al. 2015) with n-step returns, optional Double DQN and dueling heads."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from agents.agent import Agent, LossOutput
from agents.networks.q_network import QNetwork
from rulka.core_types import TransitionBatch


class DQNAgent(Agent):
    def create_networks(self) -> nn.Module:
        p = self.config.neural_network
        return QNetwork(self.observation_space, self.num_actions, p.vector_embedder_hidden_sizes,
                        p.dense_hidden_dimension, p.dueling)

    def q_values(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.online_network(observations)

    def compute_loss(self, batch: TransitionBatch) -> LossOutput:
        """Huber loss to ``R + discount * Q_target(s', a*)``, importance-weighted, averaged over the batch;
        the priority error is ``|Q(s, a) - target|``. ``a*`` maximises the target network's Q (the online
        network's with ``use_ddqn``)."""
        with torch.no_grad():
            next_q_target = self.target_network(batch.next_states)
            if self.config.neural_network.use_ddqn:
                best = self.online_network(batch.next_states).argmax(dim=1, keepdim=True)
            else:
                best = next_q_target.argmax(dim=1, keepdim=True)
            target = batch.returns + batch.discounts * next_q_target.gather(1, best).squeeze(1)
        q = self.online_network(batch.states).gather(1, batch.actions.unsqueeze(1)).squeeze(1)
        loss = (F.smooth_l1_loss(q, target, reduction="none") * batch.weights).mean()
        return LossOutput(loss, (q.detach() - target).abs(), {"mean_q": q.detach().mean().item()})
