"""Learning from demonstrations, for any agent that learns from :class:`~rulka.core_types.TransitionBatch`.

Two uses of a demonstration set (:mod:`memories.demonstrations`), as DQfD (Hester et al. 2018):

* :func:`pretrain`: supervised updates of the online network on demonstrated states and actions
  before the first collected action, on the agent's acting Q-values (:meth:`Agent.q_values`: the
  quantile means for IQN and QR-DQN), then the target network is copied from it;
* :func:`attach_demonstrations`: the demonstrations go into a replay of their own, assembled like
  the agent's memory (n-step, mini-race, shaping), and each batch draws a scheduled share from it
  (:class:`~memories.demonstrations.MixedReplay`).

Only the agent's public parts are used (``create_memory``, ``q_values``, ``optimize``, the
precision's autocast, the counters), so a new agent gets both without code of its own.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from agents.agent import Agent
from memories.demonstrations import DemoEpisode, MixedReplay, fill_replay
from memories.replay import Replay

LOSSES = ("large_margin", "cross_entropy")


def supervised_loss(q: torch.Tensor, actions: torch.Tensor, kind: str = "large_margin",
                    margin: float = 0.8) -> torch.Tensor:
    """(B,) per-sample loss of Q-values ``q`` (B, A) against demonstrated ``actions`` (B,).

    ``large_margin``: ``max_a [Q(s, a) + margin * (a != a_E)] - Q(s, a_E)`` (DQfD's J_E, >= 0);
    ``cross_entropy``: ``-log softmax(Q(s))[a_E]``.
    """
    if kind == "cross_entropy":
        return F.cross_entropy(q, actions, reduction="none")
    if kind != "large_margin":
        raise ValueError(f"unknown supervised loss {kind!r}: use one of {', '.join(LOSSES)}")
    penalty = torch.full_like(q, margin)
    penalty.scatter_(1, actions.unsqueeze(1), 0.0)
    return (q + penalty).max(dim=1).values - q.gather(1, actions.unsqueeze(1)).squeeze(1)


@dataclass
class PretrainResult:
    """What :func:`pretrain` did: updates made, seconds taken, the first and last batch's loss and the
    last batch's share of states where the greedy action is the demonstrated one."""

    updates: int
    seconds: float
    first_loss: float
    last_loss: float
    agreement: float

    @property
    def updates_per_s(self) -> float:
        return self.updates / self.seconds if self.seconds > 0 else float("inf")


def pretrain(agent: Agent, demonstrations: Replay, updates: int, kind: str = "large_margin", margin: float = 0.8,
             batch_size: int | None = None) -> PretrainResult:
    """``updates`` supervised updates of ``agent``'s online network on batches of ``demonstrations``
    (the agent's batch size unless given), at the learning rate of the agent's schedule; then the
    target network is copied from the online one. Each update counts as a gradient update (not as
    sampled transitions: the replay-ratio gate is left as it was)."""
    batch_size = batch_size or agent.config.training.batch_size
    gamma = agent.gamma()
    first = last = float("nan")
    agreement = float("nan")
    for group in agent.optimizer.param_groups:
        group["lr"] = agent.learning_rate()
    start = time.perf_counter()
    for update in range(updates):
        batch = demonstrations.sample(batch_size, gamma, agent.device)
        with agent.precision.autocast():
            q = agent.q_values(batch.states).float()
            loss = supervised_loss(q, batch.actions, kind, margin).mean()
        agent.optimize(loss)
        agent.counters.gradient_updates += 1
        if update == 0 or update == updates - 1:
            value = float(loss.detach())
            first = value if update == 0 else first
            last = value
            agreement = float((q.detach().argmax(dim=1) == batch.actions).float().mean())
    seconds = time.perf_counter() - start
    agent.sync_target_network(1.0)
    return PretrainResult(updates, seconds, first, last, agreement)


def demonstration_replay(agent: Agent, episodes: list[DemoEpisode],
                         filter_observation: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
                         filter_reward: Callable[[float], float], seed: int | None = None) -> Replay:
    """A uniform replay built as the agent builds its memory (same assembler), holding ``episodes``
    through the run's filters; sized to hold them all (a slot per step and one per episode end)."""
    capacity = sum(e.length + 1 for e in episodes) + agent.config.training.n_steps + 2
    replay = agent.create_memory(seed, capacity=capacity, prioritized=False)
    fill_replay(replay, episodes, filter_observation, filter_reward)
    return replay


def attach_demonstrations(agent: Agent, demonstrations: Replay) -> MixedReplay:
    """Make ``agent.memory`` draw ``demonstrations.batch_share_schedule`` of each batch from
    ``demonstrations`` (evaluated on the agent's counters like every schedule); returns the new memory."""
    schedule = agent.config.demonstrations.batch_share_schedule
    collected = agent.memory.collected if isinstance(agent.memory, MixedReplay) else agent.memory
    agent.memory = MixedReplay(collected, demonstrations, lambda: float(agent.schedule_value(schedule)))
    return agent.memory


