"""The map cycle as an episode plan: each race takes the next entry of ``map_cycle.entries``.

Every environment (game instance) races the cycle on its own; environment ``i`` starts ``i``
entries in, so greedy races spread over instances. An entry says which track, whether the race
explores (else it is the map's greedy evaluation) and whether it fills the replay memory.
"""
from __future__ import annotations

from typing import Any

from environments.trackmania.training.experiment_parameters import MapCycleEntry, TrackManiaExperimentConfig
from environments.trackmania.track import Track
from rulka.collection.rollout import EpisodePlan, EpisodeSpec
from rulka.config import ConfigError

#: Physical road width given to real-game tracks (only drawn by the simulator's renderer), m.
TMI_ROAD_WIDTH_M = 24.0


def cycle_entries(config: TrackManiaExperimentConfig) -> list[MapCycleEntry]:
    """The cycle with each entry repeated ``repeat`` times."""
    entries = [e for e in config.map_cycle.entries for _ in range(e.repeat)]
    if not entries:
        raise ConfigError("map_cycle.entries is empty: give at least one map to race on")
    return entries


def entry_track(entry: MapCycleEntry, backend: str) -> Track | str:
    """What ``TrackManiaEnv`` races for ``entry``: a Track for the real game, a name or path for the simulator."""
    if backend == "tmi":
        if not entry.reference_line_path:
            raise ConfigError(f"map_cycle entry '{entry.short_name}' needs a reference_line_path for the real game")
        from environments.trackmania.track import track_from_map

        return track_from_map(entry.map_path, entry.reference_line_path, road_width=TMI_ROAD_WIDTH_M,
                              name=entry.short_name)
    return entry.reference_line_path or entry.map_path


class MapCyclePlan(EpisodePlan):
    """The races of one environment, in cycle order; tracks are resolved once per map."""

    def __init__(self, config: TrackManiaExperimentConfig, instance: int) -> None:
        self.entries = cycle_entries(config)
        self.backend = config.environment.backend
        self.position = instance % len(self.entries)
        self._tracks: dict[tuple[str, str], Any] = {}

    def next_episode(self) -> EpisodeSpec:
        entry = self.entries[self.position % len(self.entries)]
        self.position += 1
        key = (entry.map_path, entry.reference_line_path)
        if key not in self._tracks:
            track = entry_track(entry, self.backend)
            if isinstance(track, str):
                from environments.trackmania.tracks import resolve_track

                track = resolve_track(track)
            self._tracks[key] = track
        return EpisodeSpec(reset_options={"track": self._tracks[key]}, explore=entry.is_exploration,
                           store=entry.fill_buffer, tag=entry.short_name)

    def state_dict(self) -> dict[str, int]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.position = int(state["position"])


def map_cycle_plan(config: TrackManiaExperimentConfig, instance: int) -> MapCyclePlan:
    """The plan factory of TrackMania graph managers (module level, so collector processes can unpickle it)."""
    return MapCyclePlan(config, instance)
