"""The learner's side of rollouts: storing their transitions, and gathering finished episodes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.agent import Agent
from rulka.collection.rollout import EpisodeSpec, Rollout
from rulka.core_types import RunPhase


def store_rollout(agent: Agent, rollout: Rollout) -> None:
    """Hand a rollout's transitions to ``agent.observe`` (which counts them) in order.

    A chunk that ends mid-episode without ``continues`` is stored as a cut (``truncated``): the
    memory bootstraps from its last state, and the next chunk of the episode starts a new stretch.
    """
    if not rollout.spec.store:
        return
    agent.begin_stream(rollout.stream)
    last = rollout.length - 1
    cut = not rollout.episode_ended and not rollout.continues
    states = rollout.states
    for t in range(rollout.length):
        state = {k: v[t] for k, v in states.items()}
        next_state = {k: v[t + 1] for k, v in states.items()}
        at_end = t == last
        agent.observe(state, int(rollout.actions[t]), bool(rollout.was_greedy[t]), float(rollout.rewards[t]),
                      next_state, at_end and rollout.terminated, at_end and (rollout.truncated or cut))
    if rollout.discarded:
        agent.abandon_episode()
    elif rollout.terminated or rollout.truncated:
        agent.handle_episode_ended()


#: The ``metadata`` key of an environment whose episodes may be lost mid-way (``info["discarded"]``: a game
#: that hangs or dies). Where it is true the learner holds each episode's chunks until the episode ends
#: (:class:`HeldEpisodes`), so no transition of a lost episode is stored.
DISCARDS_EPISODES = "may_discard_episodes"


def may_discard_episodes(env: Any) -> bool:
    """Whether ``env`` (or the environment a wrapper wraps) says its episodes may be discarded."""
    return bool((getattr(env, "metadata", None) or {}).get(DISCARDS_EPISODES, False))


class HeldEpisodes:
    """The chunks of each open episode, held by the learner until the episode ends: then all are stored,
    in order, or none, when the episode was discarded or its collector died. Chunks let a collector
    send a long race while it is played without waiting for the learner; holding them keeps a lost
    race's first minutes out of the replay (Linesight sends a race only when it ends, for the same
    reason). The cost: the learner trains on a race once it has ended, not while it is played."""

    def __init__(self) -> None:
        self.open: dict[tuple, list[Rollout]] = {}

    def add(self, rollout: Rollout) -> list[Rollout]:
        """The chunks to store now, in play order: none until ``rollout`` ends its episode, none of a
        discarded episode; a chunk that is not to be stored (an evaluation race) passes at once."""
        if not rollout.spec.store:
            return [rollout]
        if not rollout.episode_ended:
            self.open.setdefault(rollout.stream, []).append(rollout)
            return []
        chunks = self.open.pop(rollout.stream, [])
        return [] if rollout.discarded else chunks + [rollout]

    def forget_source(self, collector_id: int, incarnation: int) -> int:
        """Drop the held chunks of a collector that died; how many episodes were dropped."""
        return drop_source(self.open, collector_id, incarnation)


@dataclass
class EpisodeRecord:
    """A finished episode as the learner received it, chunk after chunk."""

    spec: EpisodeSpec
    phase: RunPhase
    source: tuple[int, int, int]
    chunks: list[Rollout] = field(default_factory=list)

    @property
    def last(self) -> Rollout:
        return self.chunks[-1]

    @property
    def final_info(self) -> dict[str, Any]:
        return self.last.final_info or {}

    @property
    def episode_return(self) -> float:
        return self.last.episode_return

    @property
    def length(self) -> int:
        return self.last.episode_length

    @property
    def discarded(self) -> bool:
        return self.last.discarded

    @property
    def played_in_heatup(self) -> bool:
        """Some of its actions were played at random in heatup, whatever its plan said (not an evaluation)."""
        return self.last.played_in_heatup

    def actions(self) -> np.ndarray:
        return np.concatenate([c.actions for c in self.chunks]) if self.chunks else np.zeros(0, np.int64)

    def states(self, key: str) -> np.ndarray:
        """(T + 1, ...) observations ``key`` of the whole episode (chunk boundaries not repeated)."""
        parts = [self.chunks[0].states[key]] + [c.states[key][1:] for c in self.chunks[1:]]
        return np.concatenate(parts)

    def step_info(self, key: str) -> np.ndarray:
        return np.concatenate([c.step_info[key] for c in self.chunks])


class EpisodeGatherer:
    """Joins the chunks of each open episode; hands back an :class:`EpisodeRecord` when it ends.

    With ``keep_steps`` false only the last chunk is kept (returns and lengths are cumulative), so
    nothing is held per open episode beyond one chunk.
    """

    def __init__(self, keep_steps: bool) -> None:
        self.keep_steps = keep_steps
        self.open: dict[tuple, EpisodeRecord] = {}

    def add(self, rollout: Rollout) -> EpisodeRecord | None:
        record = self.open.get(rollout.stream)
        if record is None:
            record = self.open[rollout.stream] = EpisodeRecord(rollout.spec, rollout.phase, rollout.source)
        if self.keep_steps:
            record.chunks.append(rollout)
        else:
            record.chunks[:] = [rollout]
        if rollout.episode_ended:
            del self.open[rollout.stream]
            return record
        return None

    def forget_source(self, collector_id: int, incarnation: int) -> int:
        """Drop the open episodes of a collector that died; how many were dropped."""
        return drop_source(self.open, collector_id, incarnation)


def drop_source(open_episodes: dict[tuple, Any], collector_id: int, incarnation: int) -> int:
    """Remove from ``open_episodes`` (keyed by :attr:`Rollout.stream`) those of one collector incarnation."""
    dead = [key for key in open_episodes if key[0][:2] == (collector_id, incarnation)]
    for key in dead:
        del open_episodes[key]
    return len(dead)
