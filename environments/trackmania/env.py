"""``TrackManiaEnv``: the gymnasium environment, identical for every backend.

Observation ``Dict(frame=Box(uint8, (1, H, W)), floats=Box(float32, (F,)))`` (F = 184 at defaults,
layout in :mod:`environments.trackmania.layout`), action ``Discrete(12)`` (table in
:mod:`environments.trackmania.actions`). Crossing the finish line (the backend's
``CarState.finished``: in the real game, checkpoint count == target) terminates; the race-time limit
and the no-progress limit truncate. A rollout the backend lost (the game hung or dropped the link,
:class:`~environments.trackmania.backend_registry.RolloutDiscardedError`) is truncated with
``info["discarded"] = True``: it is not a terminal state, and the next ``reset()`` starts a new race.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from environments.trackmania.actions import N_ACTIONS, action_to_inputs
from environments.trackmania.backend import CarState, TrackManiaBackend
from environments.trackmania.backend_registry import RolloutDiscardedError, make_backend
from environments.trackmania.layout import FloatLayout
from environments.trackmania.observation import ObservationBuilder
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.rewards import EpisodeEndRules, RewardFunction
from environments.trackmania.track import Track
from environments.trackmania.tracks import resolve_track
from environments.trackmania.zones import (REAL_CHECKPOINT_RADIUS_M, ZoneCenters, ZoneTracker,
                                          checkpoint_radius_for_gate)

_SEED_BOUND = 2 ** 31 - 1


def trackmania_spaces(params: TrackManiaEnvironmentParameters) -> tuple[spaces.Dict, spaces.Discrete]:
    """The observation and action spaces of every TrackMania environment with ``params``."""
    h, w = params.H_downsized, params.W_downsized
    observation_space = spaces.Dict({
        "frame": spaces.Box(0, 255, shape=(1, h, w), dtype=np.uint8),
        "floats": spaces.Box(-np.inf, np.inf, shape=(FloatLayout.from_parameters(params).size,), dtype=np.float32),
    })
    return observation_space, spaces.Discrete(N_ACTIONS)


class TrackManiaEnv(gym.Env):
    """A TrackMania race on one track, one action = ``tm_engine_step_per_action`` engine ticks."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        params: TrackManiaEnvironmentParameters | None = None,
        track: Track | str | None = None,
        backend: str | TrackManiaBackend = "sim",
        backend_options: dict[str, Any] | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.params = params = params or TrackManiaEnvironmentParameters()
        self.track = resolve_track(track)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        if isinstance(backend, TrackManiaBackend):
            self.backend = backend
        else:
            self.backend = make_backend(backend, params, **(backend_options or {}))
        self.backend_name = backend if isinstance(backend, str) else type(backend).__name__
        # rulka.collection.episodes.DISCARDS_EPISODES (the learner then stores a race only once it has ended)
        self.metadata = {**type(self).metadata, "may_discard_episodes": self.backend.may_discard_races}
        self.layout = FloatLayout.from_parameters(params)
        self._set_track(self.track)
        self.reward_fn = RewardFunction(params)
        self.end_rules = EpisodeEndRules(params)
        self.observation_space, self.action_space = trackmania_spaces(params)
        self.state: CarState | None = None
        self._frame: np.ndarray | None = None
        self._last_obs: dict[str, np.ndarray] | None = None
        self._progress = 0.0
        self._furthest_progress = 0.0
        self._last_new_zone_ms = 0
        self._steps = 0

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start a new race; with ``seed`` the whole episode is reproducible.

        ``options={"track": T}`` races track ``T`` (a :class:`Track`, or a name or path as the
        constructor takes) from now on, on the same backend: one game instance serves every map.
        """
        super().reset(seed=seed)
        if options and options.get("track") is not None:
            track = options["track"]
            track = track if isinstance(track, Track) else resolve_track(track)
            if track is not self.track:
                self.track = track
                self._set_track(track)
        backend_seed = int(self.np_random.integers(_SEED_BOUND))
        self.state = None  # a failed start (e.g. the game cannot be started) leaves the env un-reset
        state, frame = self.backend.start_race(self.track, backend_seed)
        self.tracker.reset()
        zone = self.tracker.update(state.position)
        self._progress = self._furthest_progress = self.zones.progress_m(zone, state.position)
        self._last_new_zone_ms = state.race_time_ms
        self._steps = 0
        self.builder.reset()
        self.reward_fn.reset(self._distance_to_current_point(state.position))
        self.state = state
        return self._observation(state, frame), self._info(state, "")

    def step(self, action):
        """Hold action ``action`` (0..11) for one action duration."""
        action = self._checked_action(action)
        try:
            state, frame = self.backend.step(action_to_inputs(action))
        except RolloutDiscardedError as exc:
            return self._discarded_step(exc)
        return self._after_step(action, state, frame)

    def step_phases(self, action):
        """:meth:`step` through the backend's phased step: a generator that yields while the game
        computes and returns ``step``'s five values (see :mod:`rulka.phased_steps`)."""
        action = self._checked_action(action)
        try:
            state, frame = yield from self.backend.step_phases(action_to_inputs(action))
        except RolloutDiscardedError as exc:
            return self._discarded_step(exc)
        return self._after_step(action, state, frame)

    def _checked_action(self, action) -> int:
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        if not self.action_space.contains(action):
            raise ValueError(f"invalid action {action!r}; expected an int in [0, {N_ACTIONS})")
        return int(action)

    def _after_step(self, action: int, state: CarState, frame: np.ndarray):
        """Rewards, end rules and observation after the backend played ``action``."""
        self.builder.push_action(action)
        furthest_before = self.tracker.furthest
        zone = self.tracker.update(state.position)
        if self.tracker.furthest > furthest_before:
            self._last_new_zone_ms = state.race_time_ms
        progress = self.zones.progress_m(zone, state.position)
        reward = self.reward_fn(progress - self._progress)
        self._progress = progress
        self._furthest_progress = max(self._furthest_progress, progress)
        end = self.end_rules(state.finished, state.race_time_ms, self._last_new_zone_ms)
        if end.truncated:
            end = self.end_rules.explain_unfinished(end, self._furthest_progress >= self.zones.finish_progress_m,
                                                    len(state.checkpoint_times_ms), len(self.track.checkpoint_s),
                                                    self.tracker.held_at_checkpoint(state.position))
            end, lost_reward = self.end_rules.lose_at_missed_gate(end)
            reward += lost_reward
        self.state = state
        self._steps += 1
        if (end.truncated or end.terminated) and not state.finished:
            self._end_backend_race()
        return self._observation(state, frame), float(reward), end.terminated, end.truncated, self._info(state,
                                                                                                          end.reason)

    def render(self):
        """The last frame as an (H, W, 3) uint8 image (render_mode ``rgb_array``)."""
        if self._frame is None:
            return None
        return np.repeat(self._frame[0][:, :, None], 3, axis=2)

    def close(self) -> None:
        """Release the backend."""
        self.backend.close()

    @property
    def steps_wait_on_io(self) -> bool:
        """The backend mostly waits on another process (the real game): the hook of
        :mod:`rulka.collection.concurrent_steps`, so that a collector steps its games at the same time."""
        return bool(getattr(self.backend, "steps_wait_on_io", False))

    def check_between_episodes(self) -> None:
        """The hook of :mod:`rulka.collection.owned` that a collector calls while this environment waits
        between races: the backend checks its game (``check_between_races``; nothing on the simulator)."""
        self.backend.check_between_races()

    def owned_pids(self) -> tuple[int, ...]:
        """The processes this environment's backend launched and still runs (the real game and its
        launch script; ``()`` on the simulator): the hook of :mod:`rulka.collection.owned`, so that a
        collector's games are killed with it."""
        return tuple(getattr(self.backend, "game_pids", ()) or ())

    def owned_ports(self) -> tuple[int, ...]:
        """The port of this environment's game while one runs (``()`` otherwise)."""
        port = getattr(self.backend, "game_port", None)
        return (int(port),) if port is not None and self.owned_pids() else ()

    # ------------------------------------------------------------------ helpers
    def _set_track(self, track: Track) -> None:
        """Build everything that depends on the track: zones, tracker, observation builder."""
        params = self.params
        real_cps, pair_radius, cp_radius = None, None, REAL_CHECKPOINT_RADIUS_M
        if params.sync_virtual_and_real_checkpoints:
            # a backend that races real maps (tmi) reads their checkpoints from the map file
            read_map = getattr(self.backend, "map_checkpoint_positions", None)
            map_cps = read_map(track) if callable(read_map) else None
            if map_cps is not None:
                real_cps, pair_radius = map_cps, REAL_CHECKPOINT_RADIUS_M
            else:  # the track's own gates (simulator, stand-in games)
                real_cps, cp_radius = track.checkpoint_positions, checkpoint_radius_for_gate(track.gate_half_width)
        self.zones = ZoneCenters.from_raw_line(
            track.reference_line,
            params.n_zone_centers_extrapolate_before_start_of_map,
            params.n_zone_centers_extrapolate_after_end_of_map,
            real_checkpoints=real_cps,
            pair_radius_m=pair_radius,
            checkpoint_radius_m=cp_radius,
        )
        self._start_progress_m = self.zones.progress_m(self.zones.first_real,
                                                       self.zones.centers[self.zones.first_real])
        self.tracker = ZoneTracker(self.zones, params.road_width, params.sync_virtual_and_real_checkpoints)
        self.builder = ObservationBuilder(self.layout, self.zones, params.one_every_n_zone_centers_in_inputs,
                                          params.margin_to_announce_finish_meters)

    def _discarded_step(self, exc: Exception):
        """The backend lost the race: truncate with the last observation, reward 0, ``discarded``."""
        assert self.state is not None and self._last_obs is not None
        info = self._info(self.state, "discarded")
        info["discarded"] = True
        info["discard_reason"] = str(exc)
        obs = {key: value.copy() for key, value in self._last_obs.items()}
        self.state = None  # step() now needs a reset(), which starts a new race
        return obs, 0.0, False, True, info

    def _end_backend_race(self) -> None:
        """Tell a backend that keeps a game waiting (tmi) that this race was cut off."""
        end_race = getattr(self.backend, "end_race", None)
        if callable(end_race):
            end_race()

    def _distance_to_current_point(self, position: np.ndarray) -> float:
        return float(np.linalg.norm(self.zones.centers[self.tracker.current] - position))

    def _observation(self, state: CarState, frame: np.ndarray) -> dict[str, np.ndarray]:
        floats = self.builder.build(state, self.tracker.current, self._progress)
        self._frame = frame.reshape(1, *frame.shape).copy()
        self._last_obs = {"frame": self._frame, "floats": floats.copy()}
        return self._last_obs

    @property
    def progress_m(self) -> float:
        """Metres along the reference line from its first transition (the start is ~n_before x 0.5 m in)."""
        return self._progress

    @property
    def race_progress_m(self) -> float:
        """Metres driven along the line since the start."""
        return self._progress - self._start_progress

    @property
    def _start_progress(self) -> float:
        return self._start_progress_m

    def _info(self, state: CarState, end_reason: str) -> dict[str, Any]:
        finish = self.zones.finish_progress_m
        start = self._start_progress
        return {
            "race_time_ms": state.race_time_ms,
            "progress_m": self._progress - start,
            "furthest_progress_m": self._furthest_progress - start,
            "distance_to_finish_m": max(0.0, finish - self._progress),
            "progress_fraction": (self._progress - start) / max(finish - start, 1e-9),
            "finished": bool(state.finished),
            "zone": self.tracker.current,
            "furthest_zone": self.tracker.furthest,
            "speed_kmh": state.speed_kmh,
            "gear": state.gear,
            "track": self.track.name,
            "backend": self.backend_name,
            "end_reason": end_reason,
            "checkpoint_times_ms": list(state.checkpoint_times_ms),
            "steps": self._steps,
            "discarded": False,
            # the reward is never shaped; the memory shapes with this potential (read from the floats)
            "shaping_potential": self.reward_fn.potential(self._distance_to_current_point(state.position)),
        }
