"""The interface between :class:`TrackManiaEnv` and whatever runs the car.

Two backends implement it: ``sim`` (the built-in simulator) and ``tmi`` (the real game through
TMInterface 2). Both hand back the same :class:`CarState` and frame, so the observation, reward and
episode-end code is shared and one network serves both.

Conventions (the game's): world axes x, y (up), z; metres, seconds, m/s, rad/s. ``rotation`` is a
3x3 matrix whose columns are the car's axes in world coordinates: column 0 lateral (left),
column 1 up, column 2 forward. A world vector ``v`` in the car frame is ``rotation.T @ v``.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field

import numpy as np

from rulka.phased_steps import Phases

#: Wheel order everywhere: front-left, front-right, rear-left, rear-right.
N_WHEELS = 4

#: Surface groups of the observation (one-hot per wheel); OTHER is encoded as all zeros.
SURFACE_ASPHALT, SURFACE_GRASS, SURFACE_DIRT, SURFACE_TURBO, SURFACE_OTHER = range(5)


@dataclass(frozen=True)
class InputState:
    """The four binary keyboard inputs of one action."""

    accelerate: bool
    brake: bool
    left: bool
    right: bool


@dataclass
class CarState:
    """Everything the observation and the rewards need about the car at one instant."""

    race_time_ms: int
    position: np.ndarray  # (3,) float64, world metres
    rotation: np.ndarray  # (3, 3) float64, columns = car axes (left, up, forward) in world frame
    linear_velocity: np.ndarray  # (3,) float64, world frame, m/s
    angular_velocity: np.ndarray  # (3,) float64, world frame, rad/s
    gear: int
    rpm: float
    gearbox_state: int  # 0 idle, 1 shifting up, 2 shifting down (the game's encoding)
    gear_change_counter: float  # time since / count of gear changes as the game reports it
    is_freewheeling: bool
    wheel_damper_absorb: np.ndarray  # (4,) float32, metres
    wheel_has_ground_contact: np.ndarray  # (4,) bool
    wheel_surface_group: np.ndarray  # (4,) int8, one of SURFACE_*
    wheel_is_sliding: np.ndarray  # (4,) bool
    finished: bool = False  # the car crossed the finish line in this step
    checkpoint_times_ms: list[int] = field(default_factory=list)

    @property
    def speed_kmh(self) -> float:
        return float(np.linalg.norm(self.linear_velocity) * 3.6)


class TrackManiaBackend(abc.ABC):
    """Runs one car on one track, one agent action (``tm_engine_step_per_action`` ticks) at a time."""

    #: ``start_race`` and ``step`` mostly wait on another process (a game behind a socket), so a
    #: collector may run several such backends' environments at the same time (steps through
    #: :meth:`step_phases`, in the collector's thread; resets each in a thread).
    steps_wait_on_io: bool = False
    #: ``step`` may lose the race (:class:`~environments.trackmania.backend_registry.RolloutDiscardedError`:
    #: a game that hangs or dies): the environment then says so in its ``metadata``, and the learner
    #: stores a race's transitions only once the race has ended, so that none of a lost race is trained on.
    may_discard_races: bool = False

    @abc.abstractmethod
    def start_race(self, track: object, seed: int | None) -> tuple[CarState, np.ndarray]:
        """Put the car on the start of ``track`` at race time 0.

        Returns the state and the frame, a ``(H, W)`` uint8 grayscale image.
        """

    @abc.abstractmethod
    def step(self, inputs: InputState) -> tuple[CarState, np.ndarray]:
        """Hold ``inputs`` for one action and return the new state and frame."""

    def step_phases(self, inputs: InputState) -> Phases[tuple[CarState, np.ndarray]]:
        """:meth:`step` as a generator that yields while the game computes (after each request it
        sends) and returns what ``step`` returns, so that a collector can interleave several games'
        steps in one thread (:mod:`rulka.phased_steps`). This default has one phase."""
        yield from ()
        return self.step(inputs)

    def check_between_races(self) -> None:
        """Called now and then while no race runs (the collector waits): a backend that runs a game finds
        it dead or hung here and relaunches it, instead of at the next ``start_race``. Default: nothing."""

    def close(self) -> None:
        """Release the game or the simulator."""
