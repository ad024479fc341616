"""A trained policy as a function from the environment's observation to its action.

    from rulka.policy import load_policy

    policy = load_policy("exports/cartpole")          # or a run folder, or a checkpoint file
    action = policy.predict(obs, deterministic=True)  # obs exactly as env.reset() / env.step() return it

:func:`load_policy` reads an export (``rulka export``), a run folder or a checkpoint inside one; the
:class:`Policy` applies the run's input filters to the observation, asks the network, and passes
the chosen action through the run's output filters, so what comes back goes straight to
``env.step``. Nothing of the run's training state (memory, optimizer) is loaded.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from agents.agent import Agent
from filters import ActionFilter, InputFilter, ObservationFilter, OutputFilter, RewardFilter
from rulka.core_types import Counters, RunPhase
from rulka.export import PolicySource, check_same_shapes, decode_object, decode_space, import_class, read_source, \
    rebuild_config


class Policy:
    """The greedy (or exploring) policy of a trained agent, with the run's filters around it.

    Attributes:
        observation_space: the environment's observation space (before filters). A gymnasium
            environment with a plain Box observation shows here as ``Dict({"observation": Box})``;
            :meth:`predict` takes the bare array too.
        action_space: the environment's action space (after output filters).
        agent: the agent that holds the network (``agent.online_network``), in the filtered spaces.
        config: the run's configuration.
        source: where the weights came from (``checkpoint``, ``counters``).
    """

    def __init__(self, agent: Agent, input_filter: InputFilter, output_filter: OutputFilter,
                 observation_space: spaces.Dict, action_space: spaces.Space, source: dict[str, Any]) -> None:
        self.agent = agent
        self.config = agent.config
        self.input_filter = input_filter
        self.output_filter = output_filter
        self.observation_space = observation_space
        self.action_space = action_space
        self.source = source

    def predict(self, observation: Any, deterministic: bool = True, *, sampled_quantiles: bool = False) -> Any:
        """The environment's action for one observation, or the actions of a batch.

        Args:
            observation: as the environment returns it, unbatched (a numpy array, or a dict of
                arrays for a Dict observation space), or a batch of them (every array with a
                leading dimension N).
            deterministic: True: the action of highest value, the same action for the same
                observation on every call. IQN agents rank actions by the mean of ``iqn_k``
                quantiles at the fixed fractions ``tau_i = (i + 0.5) / iqn_k``, i = 0..iqn_k-1 (the
                midpoints of K equal strata), where the run's own acting samples them anew for each
                action. False: explore as the run did at the checkpoint's step (its epsilon and
                Boltzmann schedules at that step, IQN's fractions sampled).
            sampled_quantiles: with ``deterministic``, IQN only: rank by the mean of ``iqn_k``
                quantiles at freshly sampled fractions, exactly as the run's greedy evaluation
                (``rulka --evaluate``) acts: the action can change from call to call, and a race
                replays the run's only from the same torch generator state.

        Returns:
            One action (an ``int`` for a Discrete space, else what the output filters make of
            it) for one observation; for a batch, an array of N actions (a list when the
            actions are not numbers).
        """
        batch, single = self._filtered_batch(observation)
        if deterministic:
            actions = self._values(batch, sampled_quantiles).argmax(dim=1).cpu().numpy()
        else:
            actions = self.agent.act(batch, RunPhase.TRAIN).actions
        env_actions = [self.output_filter.filter(int(a)) for a in actions]
        if single:
            return env_actions[0]
        if all(isinstance(a, (int, np.integer)) for a in env_actions):
            return np.asarray(env_actions, dtype=np.int64)
        return env_actions

    def q_values(self, observation: Any, *, sampled_quantiles: bool = False) -> np.ndarray:
        """Action values, (A,) for one observation or (N, A) for a batch: the values
        ``predict(deterministic=True)`` ranks (IQN: the mean of ``iqn_k`` quantiles at the fixed
        fractions ``(i + 0.5) / iqn_k``; at sampled ones with ``sampled_quantiles``)."""
        batch, single = self._filtered_batch(observation)
        q = self._values(batch, sampled_quantiles).cpu().numpy()
        return q[0] if single else q

    def _values(self, batch: dict[str, np.ndarray], sampled_quantiles: bool):
        tensors = self.agent.to_device(batch)
        with torch.no_grad():
            if sampled_quantiles:
                return self.agent.q_values(tensors)
            return self.agent.deterministic_q_values(tensors)

    def _filtered_batch(self, observation: Any) -> tuple[dict[str, np.ndarray], bool]:
        """The observation as the agent takes it: a dict of filtered (N, ...) arrays; whether it
        was a single observation."""
        observation = self._as_dict(observation)
        expected = self.observation_space.spaces
        missing = set(expected) - set(observation)
        if missing:
            raise ValueError(f"the observation lacks {sorted(missing)}; this policy takes {sorted(expected)}")
        arrays = {k: np.asarray(observation[k]) for k in expected}
        single = self._is_single(arrays)
        if single:
            arrays = {k: v[None] for k, v in arrays.items()}
        if not self.input_filter.observation_filters:
            return arrays, single
        count = len(next(iter(arrays.values())))
        # Filters take one observation at a time (image resizing and the like).
        items = [self.input_filter.filter_observation({k: v[i] for k, v in arrays.items()}) for i in range(count)]
        return {k: np.stack([item[k] for item in items]) for k in arrays}, single

    def _as_dict(self, observation: Any) -> dict[str, Any]:
        if isinstance(observation, dict):
            return observation
        names = list(self.observation_space.spaces)
        if len(names) != 1:
            raise ValueError(f"this policy takes a dict observation with {names}, got {type(observation).__name__}")
        return {names[0]: observation}

    def _is_single(self, arrays: dict[str, np.ndarray]) -> bool:
        kinds = set()
        for name, array in arrays.items():
            shape = tuple(self.observation_space.spaces[name].shape)
            if array.shape == shape:
                kinds.add(True)
            elif array.shape[1:] == shape and array.ndim == len(shape) + 1:
                kinds.add(False)
            else:
                raise ValueError(f"observation '{name}' has shape {array.shape}; this policy takes {shape} (one "
                                 f"observation) or (N, {', '.join(map(str, shape))}) (a batch)")
        if len(kinds) > 1:
            raise ValueError("some arrays of the observation are batched and others are not")
        return kinds.pop()


def load_policy(path: str | Path, device: torch.device | str = "cpu") -> Policy:
    """The policy of an export folder (``rulka export``), a run folder (its last checkpoint) or a
    checkpoint file inside a run folder, on ``device``."""
    return policy_from_source(read_source(path), device)


def policy_from_source(source: PolicySource, device: torch.device | str = "cpu") -> Policy:
    description = source.description
    config = rebuild_config(description, source.snapshot)
    agent_class = import_class(description["agent_class"], Agent)
    filters = description.get("input_filter") or {}
    input_filter = InputFilter(
        {name: [decode_object(f, ObservationFilter) for f in items]
         for name, items in (filters.get("observation_filters") or {}).items()},
        [decode_object(f, RewardFilter) for f in filters.get("reward_filters") or []])
    output_filter = OutputFilter([decode_object(f, ActionFilter)
                                  for f in (description.get("output_filter") or {}).get("action_filters") or []])
    env_observation_space = decode_space(description["observation_space"])
    env_action_space = decode_space(description["action_space"])
    agent = agent_class(config, input_filter.filter_space(env_observation_space),
                        output_filter.agent_action_space(env_action_space), device, 0)
    check_same_shapes(agent.online_network, source.weights, "the exported weights")
    agent.online_network.load_state_dict(source.weights)
    agent.target_network.load_state_dict(source.weights)
    origin = dict(description.get("source") or {})
    agent.counters = Counters(**(origin.get("counters") or {}))  # exploration schedules at the checkpoint's step
    return Policy(agent, input_filter, output_filter, env_observation_space, env_action_space, origin)
