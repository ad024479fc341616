"""The ``demonstrations`` section at run time: read the sets, keep them beside the replay, pretrain.

Called by :meth:`rulka.graph_manager.BasicRLGraphManager.create` once the agent and the filters
exist, before any collection (:mod:`agents.demonstrations` holds the learning parts,
:mod:`memories.demonstrations` the sets).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gymnasium import spaces

from agents.agent import Agent
from agents.demonstrations import PretrainResult, attach_demonstrations, demonstration_replay, pretrain
from filters import InputFilter
from memories.demonstrations import MANIFEST, DemoEpisode, DemonstrationError, load_demonstrations
from rulka.config import ConfigError
from rulka.parameters import ExperimentConfig


def check_demonstration_folders(config: ExperimentConfig) -> None:
    """Refuse, before any work, a ``demonstrations.folders`` entry that is not a demonstration set."""
    for i, folder in enumerate(getattr(getattr(config, "demonstrations", None), "folders", None) or []):
        if not (Path(folder) / MANIFEST).is_file():
            raise ConfigError(f"demonstrations.folders[{i}]: no demonstration set at {folder} (no {MANIFEST}); "
                              "record one with rulka demos record --out DIR, or remove the entry")


def read_demonstrations(config: ExperimentConfig, observation_space: spaces.Dict, num_actions: int
                        ) -> list[DemoEpisode]:
    """Every episode of ``demonstrations.folders``, checked against the environment's observation
    space (before filters) and the agent's number of actions; ConfigError names the problem."""
    check_demonstration_folders(config)
    episodes: list[DemoEpisode] = []
    for i, folder in enumerate(config.demonstrations.folders):
        try:
            found = load_demonstrations(folder)
            found.check_fits(observation_space, num_actions, folder)
        except DemonstrationError as error:
            raise ConfigError(f"demonstrations.folders[{i}]: {error}") from None
        episodes += found.episodes
    return episodes


def use_demonstrations(agent: Agent, config: ExperimentConfig, env_observation_space: spaces.Dict,
                       input_filter: InputFilter, seed: int, do_pretrain: bool,
                       log: Any = None) -> PretrainResult | None:
    """Keep the demonstrations beside ``agent``'s replay and, with ``do_pretrain``, pretrain on them;
    prints one line per step on stderr and returns what pretraining did (None when it did not)."""
    d = config.demonstrations
    episodes = read_demonstrations(config, env_observation_space, agent.num_actions)
    replay = demonstration_replay(agent, episodes, input_filter.filter_observation, input_filter.filter_reward,
                                  seed + 7919)
    attach_demonstrations(agent, replay)
    print(f"rulka: {len(episodes)} demonstration episode(s), {sum(e.length for e in episodes)} steps, from "
          f"{len(d.folders)} folder(s); share of each batch: {agent.memory.share():.2f} now", file=sys.stderr,
          flush=True)
    if not do_pretrain or not d.pretrains():
        return None
    result = pretrain(agent, replay, d.pretrain_updates, d.pretrain_loss, d.margin)
    print(f"rulka: pretrained on the demonstrations: {result.updates} updates ({d.pretrain_loss}) in "
          f"{result.seconds:.1f} s ({result.updates_per_s:.1f} updates/s), loss {result.first_loss:.3f} -> "
          f"{result.last_loss:.3f}, greedy action = demonstrated on {result.agreement:.0%} of the last batch",
          file=sys.stderr, flush=True)
    if log is not None:
        log({"Training/pretrain_loss": result.last_loss, "Training/pretrain_agreement": result.agreement,
             "Training/pretrain_updates_per_s": result.updates_per_s})
    return result
