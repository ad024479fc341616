"""``TMIBackend``: the real game behind :class:`~environments.trackmania.backend.TrackManiaBackend`.

Wiring in a backend factory is one line::

    from environments.trackmania.tmi.backend import TMIBackend
    backend = TMIBackend(instance_index=0, frame_height=120, frame_width=160)

``start_race(track, seed)`` takes the map to load from ``track``: a path string (``str`` or
``os.PathLike``) or an object with a ``tmi_map_path`` / ``map_path`` / ``gbx_path`` attribute; the
game is deterministic, so ``seed`` is ignored. One backend drives one game instance and serves every
map of a cycle: a track whose map differs from the one loaded is loaded on the same instance.

Through the environment (the registry calls :func:`make_tmi_backend`)::

    env = TrackManiaEnv(params, track=track_from_map(map_path, line_npy, road_width), backend="tmi",
                        backend_options={"port": 8478, "running_speed": 10})

Backend options (:func:`make_tmi_backend`): ``instance_index`` or ``port`` (the plugin's port,
default ``TMI_BASE_PORT + instance_index``), ``running_speed`` (game speed while driving; above
100 a warning says why), ``start_timeout_s`` (menus, map load and countdown; default 600 s or
``TMI_START_TIMEOUT_S``), ``settings``/``env_file``/``launcher``, ``manager_options`` (any
:class:`ManagerConfig` field).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np

from rulka.phased_steps import Phases

from ..backend import CarState, InputState, TrackManiaBackend
from .games.game_instance_manager import (
    DEFAULT_START_TIMEOUT_S,
    GameInstanceManager,
    ManagerConfig,
    RolloutDiscarded,
    StepResult,
)
from .games.launcher import Launcher
from .link.protocol import TMInterfaceError
from .games.settings import TMISettings, load_settings
from .link.state import decode_state

_TRACK_PATH_ATTRIBUTES = ("tmi_map_path", "map_path", "gbx_path")


def map_path_of(track: object) -> str:
    """The game map path that ``track`` designates (see the module docstring)."""
    if isinstance(track, (str, os.PathLike)):
        return os.fspath(track)
    for attr in _TRACK_PATH_ATTRIBUTES:
        value = getattr(track, attr, None)
        if value:
            return os.fspath(value)
    raise TypeError(
        f"the tmi backend needs a map path: pass a path or an object with one of "
        f"{', '.join(_TRACK_PATH_ATTRIBUTES)}; got {type(track).__name__}"
    )


class TMIStartError(TMInterfaceError):
    """The game could not be brought to race time 0 even after the manager's bounded retries."""


class TMIBackend(TrackManiaBackend):
    """Races in TrackMania Nations Forever through TMInterface 2 and the rulka_link plugin.

    Args:
        instance_index: game instance number; its port is ``base_port + instance_index``.
        settings: user settings; by default read from ``env_file`` and ``TMI_*`` variables.
        env_file: the ``.env`` file to read when ``settings`` is not given.
        launcher: ``launcher(port) -> GameProcess``; default: TMLoader (Windows) / Wine script.
        frame_height, frame_width: size of the grayscale frames, pixels.
        running_speed: game speed while driving (1 = real time).
        config: full manager settings; overrides the three arguments above when given.
        manager: an existing manager (tests); everything else is then ignored.
        port: the plugin's port; default ``settings.base_port + instance_index``.
    """

    #: A step is a few socket round trips to the game (rulka's process idle meanwhile): a collector
    #: steps several games at the same time (``performance.concurrent_env_steps: auto``).
    steps_wait_on_io = True
    #: A game that hangs or dies loses the race in flight (it is discarded, not stored).
    may_discard_races = True

    def __init__(
        self,
        instance_index: int = 0,
        *,
        settings: TMISettings | None = None,
        env_file: str | Path | None = ".env",
        launcher: Launcher | None = None,
        frame_height: int = 120,
        frame_width: int = 160,
        running_speed: float = 1.0,
        config: ManagerConfig | None = None,
        manager: GameInstanceManager | None = None,
        port: int | None = None,
    ) -> None:
        if manager is None:
            settings = settings if settings is not None else load_settings(env_file)
            if config is None:
                start = settings.start_timeout_s or DEFAULT_START_TIMEOUT_S  # TMI_START_TIMEOUT_S
                config = ManagerConfig(
                    frame_height=frame_height, frame_width=frame_width, running_speed=running_speed,
                    start_timeout_s=start, connect_timeout_s=start,
                )
            manager = GameInstanceManager(
                instance_index, settings=settings, config=config, launcher=launcher, port=port
            )
        self.manager = manager
        self._gear_change_counter = 0.0
        self._map_checkpoints: dict[str, np.ndarray] = {}

    def _to_car(self, result: StepResult) -> tuple[CarState, np.ndarray]:
        car = decode_state(result.state)
        car.finished = result.finished
        car.race_time_ms = result.race_time_ms if result.finished else car.race_time_ms
        car.checkpoint_times_ms = list(result.checkpoint_times_ms)
        # Linesight's gear-change counter: +1 per action while the gearbox is shifting, else 0.
        self._gear_change_counter = self._gear_change_counter + 1.0 if car.gearbox_state != 0 else 0.0
        car.gear_change_counter = self._gear_change_counter
        return car, result.frame

    def start_race(self, track: object, seed: int | None) -> tuple[CarState, np.ndarray]:
        """Load the map if needed and put the car at race time 0 (``seed`` is ignored)."""
        self._gear_change_counter = 0.0
        map_path = map_path_of(track)
        try:
            result = self.manager.start_race(map_path)
        except TMInterfaceError as exc:
            m = self.manager
            raise TMIStartError(
                f"could not start a race on {map_path!r} with game instance {m.instance_index} (port {m.port}) "
                f"after {m.config.max_start_attempts} attempt(s): {exc.detail}. Diagnose the link with "
                f"`rulka tmi check --port {m.port}` (is the game running with the rulka_link plugin?)",
                message_id=exc.message_id,
                expected=exc.expected,
            ) from exc
        return self._to_car(result)

    def check_between_races(self) -> None:
        """See :meth:`GameInstanceManager.check_between_races`."""
        self.manager.check_between_races()

    @property
    def game_pids(self) -> tuple[int, ...]:
        """Pids of the game instance this backend launched (``()`` when none runs); see
        :attr:`GameInstanceManager.game_pids`."""
        return self.manager.game_pids

    @property
    def game_port(self) -> int:
        """The port of this backend's game instance."""
        return self.manager.port

    def map_checkpoint_positions(self, track: object) -> np.ndarray | None:
        """The real checkpoints (K, 3) of ``track``'s map, read from its ``.Challenge.Gbx``
        (:mod:`.maps.map_checkpoints`; needs ``pygbx`` and, for a relative map path,
        ``TMI_USER_DATA_PATH``), once per map. ``TrackManiaEnv`` pairs them with the reference line
        when ``sync_virtual_and_real_checkpoints`` is on.

        None (the track's own ``checkpoint_positions`` are used) when the track gives its checkpoints
        itself (``checkpoint_s``) or its map path is not a ``.Gbx`` file (e.g. a stand-in game's track).
        """
        if getattr(track, "checkpoint_s", None):
            return None
        try:
            map_path = map_path_of(track)
        except TypeError:
            return None
        from .maps.map_checkpoints import is_map_file, read_map_checkpoint_positions

        if not is_map_file(map_path):
            return None
        if map_path not in self._map_checkpoints:
            self._map_checkpoints[map_path] = read_map_checkpoint_positions(
                map_path, self.manager.settings.user_data_path
            )
        return self._map_checkpoints[map_path]

    def step(self, inputs: InputState) -> tuple[CarState, np.ndarray]:
        """Hold ``inputs`` for one action (50 ms of race time).

        Raises:
            RolloutDiscarded: the game hung or dropped the connection; the rollout must be thrown
                away and a new race started (the game is relaunched as needed).
        """
        return self._to_car(
            self.manager.step(accelerate=inputs.accelerate, brake=inputs.brake, left=inputs.left, right=inputs.right)
        )

    def step_phases(self, inputs: InputState) -> Phases[tuple[CarState, np.ndarray]]:
        """:meth:`step` in phases: yields while the game plays the action and while it renders."""
        result = yield from self.manager.step_phases(
            accelerate=inputs.accelerate, brake=inputs.brake, left=inputs.left, right=inputs.right
        )
        return self._to_car(result)

    def end_race(self) -> None:
        """End the race before the finish (a cut-off); the game waits for the next start_race."""
        self.manager.end_race()

    def race_inputs_text(self) -> str:
        """The game's own record of the inputs of the last race, in TMInterface script format.

        Read it after the finish (before the next ``start_race``) to save a run that replays as the
        game played it; :mod:`.maps.inputs_export` rebuilds one from the actions instead.
        """
        if self.manager.client is None:
            raise RuntimeError("no game connected: race_inputs_text() needs a race started with start_race()")
        return self.manager.client.get_inputs()

    def close(self) -> None:
        """Disconnect and stop the game instance this backend launched."""
        self.manager.close()


def manager_config_from_parameters(
    params: Any, running_speed: float = 1.0, **overrides: Any
) -> ManagerConfig:
    """The manager settings for ``params`` (TrackManiaEnvironmentParameters); ``overrides`` replace fields."""
    config = ManagerConfig(
        running_speed=float(running_speed),
        ms_per_action=int(params.ms_per_action),
        frame_width=int(params.W_downsized),
        frame_height=int(params.H_downsized),
        timeout_during_run_ms=int(params.timeout_during_run_ms),
        timeout_between_runs_ms=int(params.timeout_between_runs_ms),
        game_reboot_interval_s=float(params.game_reboot_interval),
        game_camera=int(params.game_camera_number),
    )
    return dataclasses.replace(config, **overrides)  # an unknown field raises TypeError


def make_tmi_backend(
    params: Any,
    *,
    instance_index: int = 0,
    port: int | None = None,
    settings: TMISettings | None = None,
    env_file: str | Path | None = ".env",
    launcher: Launcher | None = None,
    running_speed: float = 1.0,
    start_timeout_s: float | None = None,
    manager_options: dict[str, Any] | None = None,
) -> TMIBackend:
    """The ``tmi`` backend factory of the registry: ``make_backend("tmi", params, **options)``.

    Frame size, timeouts, reboot interval and camera come from ``params``. ``port`` (default
    ``TMI_BASE_PORT + instance_index``) picks the game instance; ``running_speed`` is the game speed
    while driving; ``start_timeout_s`` bounds menus, map load and countdown (and the plugin's
    accepting after a launch): this argument, else ``TMI_START_TIMEOUT_S``, else 600 s.
    ``manager_options`` overrides any :class:`ManagerConfig` field; ``settings``/``launcher`` may be
    injected (tests), else they come from ``env_file``.
    """
    settings = settings if settings is not None else load_settings(env_file)
    if start_timeout_s is None:
        start_timeout_s = settings.start_timeout_s if settings.start_timeout_s is not None else DEFAULT_START_TIMEOUT_S
    if not float(start_timeout_s) > 0:
        raise ValueError(f"start_timeout_s must be > 0 seconds, got {start_timeout_s}")
    options = {"start_timeout_s": float(start_timeout_s), "connect_timeout_s": float(start_timeout_s)}
    options.update(manager_options or {})
    config = manager_config_from_parameters(params, running_speed, **options)
    return TMIBackend(instance_index, settings=settings, launcher=launcher, config=config, port=port)


__all__ = [
    "RolloutDiscarded",
    "TMIBackend",
    "TMIStartError",
    "make_tmi_backend",
    "manager_config_from_parameters",
    "map_path_of",
]
