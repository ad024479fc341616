"""Demonstration sets: whole episodes someone else played, read into a replay as collected episodes are.

On disk a demonstration set is a folder:

* ``demonstrations.yaml``: what recorded it (``source``, free-form), the observation arrays' names,
  shapes and dtypes, the number of actions, and one entry per episode (``file``, ``steps``,
  ``outcome``, ``return``);
* ``episode_NNNNN.npz`` per episode (``numpy.savez_compressed``, read with ``allow_pickle=False``):
  ``state/<name>`` (T + 1, ...) the environment's observations before any filter (frames stay
  uint8), ``actions`` (T,) int64, ``rewards`` (T,) float32 as the environment paid them,
  ``terminated`` / ``truncated`` () bool for the last step, and ``info/<key>`` (T,) float64 the
  numeric state the environment reported after each step (e.g. race time, progress).

:func:`fill_replay` stores a set's episodes step by step with the run's input filter applied, in
the order and with the same episode ends a collected episode has, so the assembler (n-step,
mini-race, shaping) builds their transitions like any other. :class:`MixedReplay` then draws a
share of each batch from them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import torch
import yaml
from gymnasium import spaces

from memories.replay import Replay
from rulka.core_types import TransitionBatch

MANIFEST = "demonstrations.yaml"
FORMAT_VERSION = 1


class DemonstrationError(ValueError):
    """A demonstration set that cannot be read or does not fit the run."""


@dataclass
class DemoEpisode:
    """One whole episode. Shapes: ``states`` (T + 1, ...) per name, ``actions`` (T,) int64,
    ``rewards`` (T,) float32, ``step_info`` (T,) per key; ``terminated`` / ``truncated`` describe the
    last step; ``outcome`` says how it ended (e.g. ``finished``, ``crashed``)."""

    states: dict[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    terminated: bool
    truncated: bool
    outcome: str = ""
    step_info: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def length(self) -> int:
        return int(len(self.actions))

    @property
    def episode_return(self) -> float:
        return float(np.sum(self.rewards, dtype=np.float64))

    def check(self) -> None:
        """Raise :class:`DemonstrationError` when the arrays' lengths disagree."""
        t = self.length
        if t < 1:
            raise DemonstrationError("an episode needs at least one action")
        if len(self.rewards) != t:
            raise DemonstrationError(f"{t} actions but {len(self.rewards)} rewards")
        for name, array in self.states.items():
            if len(array) != t + 1:
                raise DemonstrationError(f"state {name!r} has {len(array)} rows; {t} actions need {t + 1}")
        for key, array in self.step_info.items():
            if len(array) != t:
                raise DemonstrationError(f"info {key!r} has {len(array)} rows for {t} actions")


@dataclass
class DemonstrationSet:
    """The episodes of a folder and its manifest (``source``: what recorded them)."""

    episodes: list[DemoEpisode]
    source: dict[str, Any] = field(default_factory=dict)

    @property
    def num_steps(self) -> int:
        return sum(e.length for e in self.episodes)

    def check_fits(self, observation_space: spaces.Dict, num_actions: int, folder: str | Path = "") -> None:
        """Refuse a set whose observations or actions differ from the environment's (before filters).

        Raises:
            DemonstrationError: naming the first mismatch and how to fix it.
        """
        where = f"demonstrations in {folder}: " if folder else "demonstrations: "
        hint = "record them again with the run's environment settings (rulka demos record)"
        for episode in self.episodes:
            if set(episode.states) != set(observation_space.spaces):
                raise DemonstrationError(f"{where}observations {sorted(episode.states)} differ from the "
                                         f"environment's {sorted(observation_space.spaces)}; {hint}")
            for name, space in observation_space.spaces.items():
                shape = episode.states[name].shape[1:]
                if shape != space.shape:
                    raise DemonstrationError(f"{where}observation {name!r} has shape {shape}, the environment's "
                                             f"{space.shape}; {hint}")
            if episode.actions.min() < 0 or episode.actions.max() >= num_actions:
                raise DemonstrationError(f"{where}actions outside 0..{num_actions - 1}; {hint}")


def save_episode(folder: str | Path, index: int, episode: DemoEpisode) -> Path:
    """Write ``episode`` as ``folder/episode_{index:05d}.npz``; returns the path."""
    episode.check()
    path = Path(folder) / f"episode_{index:05d}.npz"
    arrays = {f"state/{k}": np.ascontiguousarray(v) for k, v in episode.states.items()}
    arrays.update({f"info/{k}": np.asarray(v, dtype=np.float64) for k, v in episode.step_info.items()})
    np.savez_compressed(path, actions=np.asarray(episode.actions, np.int64),
                        rewards=np.asarray(episode.rewards, np.float32),
                        terminated=np.bool_(episode.terminated), truncated=np.bool_(episode.truncated), **arrays)
    return path


def write_demonstrations(folder: str | Path, episodes: Iterable[DemoEpisode], source: dict[str, Any],
                         num_actions: int) -> Path:
    """Write a whole set (episodes, then the manifest); returns the manifest's path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    entries, first = [], None
    for index, episode in enumerate(episodes):
        path = save_episode(folder, index, episode)
        first = first or episode
        entries.append({"file": path.name, "steps": episode.length, "outcome": episode.outcome,
                        "return": round(episode.episode_return, 6),
                        **({"final_info": {k: float(v[-1]) for k, v in episode.step_info.items()}}
                           if episode.step_info else {})})
    if first is None:
        raise DemonstrationError("no episode to write")
    manifest = {
        "format": FORMAT_VERSION, "source": source, "num_actions": int(num_actions),
        "observations": {k: {"shape": list(v.shape[1:]), "dtype": str(v.dtype)} for k, v in first.states.items()},
        "episodes": entries,
    }
    path = folder / MANIFEST
    path.write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    return path


_NAME = re.compile(r"^episode_\d{5}\.npz$")


def load_demonstrations(folder: str | Path) -> DemonstrationSet:
    """Read a set written by :func:`write_demonstrations`.

    Raises:
        DemonstrationError: no manifest, a missing or malformed episode file.
    """
    folder = Path(folder)
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise DemonstrationError(f"no {MANIFEST} in {folder}: not a demonstration set "
                                 "(rulka demos record --out DIR writes one)")
    manifest = yaml.safe_load(manifest_path.read_text(encoding="utf-8")) or {}
    if manifest.get("format") != FORMAT_VERSION:
        raise DemonstrationError(f"{manifest_path}: format {manifest.get('format')!r}, this rulka reads "
                                 f"{FORMAT_VERSION}")
    episodes = []
    for entry in manifest.get("episodes") or []:
        name = str(entry.get("file", ""))
        if not _NAME.match(name) or not (folder / name).is_file():
            raise DemonstrationError(f"{manifest_path}: episode file {name!r} is missing")
        with np.load(folder / name, allow_pickle=False) as data:
            states = {k[len("state/"):]: data[k] for k in data.files if k.startswith("state/")}
            info = {k[len("info/"):]: data[k] for k in data.files if k.startswith("info/")}
            episode = DemoEpisode(states, data["actions"].astype(np.int64), data["rewards"].astype(np.float32),
                                  bool(data["terminated"]), bool(data["truncated"]), str(entry.get("outcome", "")),
                                  info)
        try:
            episode.check()
        except DemonstrationError as error:
            raise DemonstrationError(f"{folder / name}: {error}") from None
        episodes.append(episode)
    if not episodes:
        raise DemonstrationError(f"{manifest_path} lists no episode")
    return DemonstrationSet(episodes, dict(manifest.get("source") or {}))


def fill_replay(replay: Replay, episodes: Iterable[DemoEpisode],
                filter_observation: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] = lambda o: o,
                filter_reward: Callable[[float], float] = float) -> int:
    """Store every step of ``episodes`` into ``replay`` (greedy actions; the episode ends as recorded),
    each observation and reward through the run's filters; returns the number of steps stored."""
    stored = 0
    for episode in episodes:
        observations = [filter_observation({k: v[t] for k, v in episode.states.items()})
                        for t in range(episode.length + 1)]
        last = episode.length - 1
        for t in range(episode.length):
            at_end = t == last
            replay.add(observations[t], int(episode.actions[t]), float(filter_reward(float(episode.rewards[t]))),
                       observations[t + 1], at_end and episode.terminated,
                       at_end and not episode.terminated, True)
        stored += episode.length
    return stored


def _concatenate(a: TransitionBatch, b: TransitionBatch, device: torch.device) -> TransitionBatch:
    """``a``'s rows then ``b``'s, both sampled on the CPU, joined there and moved to ``device`` once."""
    def cat(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        joined = torch.cat([x, y])
        return joined if device.type == "cpu" else joined.to(device, non_blocking=True)

    mask_a = np.ones(a.size, bool) if a.priority_mask is None else a.priority_mask
    steps = (None if a.steps_used is None or b.steps_used is None
             else np.concatenate([a.steps_used, b.steps_used]))
    return TransitionBatch(
        states={k: cat(v, b.states[k]) for k, v in a.states.items()},
        actions=cat(a.actions, b.actions), returns=cat(a.returns, b.returns), discounts=cat(a.discounts, b.discounts),
        next_states={k: cat(v, b.next_states[k]) for k, v in a.next_states.items()},
        weights=cat(a.weights, b.weights),
        indices=np.concatenate([a.indices, b.indices]),
        steps_used=steps,
        priority_mask=np.concatenate([mask_a, np.zeros(b.size, bool)]),  # demonstrations keep their priority
    )


class MixedReplay:
    """The run's replay with demonstrations beside it: each batch draws ``round(share() * B)`` of its
    ``B`` transitions from ``demonstrations`` (uniformly) and the rest from ``collected``.

    Everything else (adding, the gate's counts, capacity, checkpoints) is the collected replay's:
    the demonstrations are read again from their folder when a run resumes. Demonstration rows come
    last in a batch, with importance weight 1 and ``priority_mask`` False (their priorities are never
    written).

    Args:
        collected: the replay the collectors fill.
        demonstrations: a replay holding only demonstrations (same assembler kind and ``n_steps``).
        share: returns the fraction of a batch to draw from the demonstrations now, in [0, 1].
    """

    def __init__(self, collected: Replay, demonstrations: Replay, share: Callable[[], float]) -> None:
        self.collected, self.demonstrations, self.share = collected, demonstrations, share
        self.demonstration_rows = 0  # demonstration transitions drawn into batches so far

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["collected"], name)

    def __len__(self) -> int:
        return len(self.collected)

    def demonstration_count(self, batch_size: int) -> int:
        """How many of ``batch_size`` rows come from the demonstrations now: ``round(share * B)``, or all
        of them while the share is positive and nothing collected can be sampled yet."""
        share = min(1.0, max(0.0, float(self.share())))
        if len(self.demonstrations) == 0 or share == 0.0:
            return 0
        count = int(round(share * batch_size))
        return count if len(self.collected) > 0 else batch_size

    def sample(self, batch_size: int, gamma: float, device: torch.device | str = "cpu") -> TransitionBatch:
        count = self.demonstration_count(batch_size)
        if count == 0:
            return self.collected.sample(batch_size, gamma, device)
        self.demonstration_rows += count
        if count == batch_size:
            demos = self.demonstrations.sample(count, gamma, device)
            demos.priority_mask = np.zeros(batch_size, bool)
            return demos
        cpu = torch.device("cpu")  # both parts stay on the CPU (no copy) until the joined batch moves
        demos = self.demonstrations.sample(count, gamma, cpu)
        return _concatenate(self.collected.sample(batch_size - count, gamma, cpu), demos, torch.device(device))

    def update_priorities(self, batch: TransitionBatch, errors: torch.Tensor | np.ndarray) -> int:
        return self.collected.update_priorities(batch, errors)
