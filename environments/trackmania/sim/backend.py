"""The ``sim`` backend: :class:`CarPhysics` + :class:`Renderer` behind :class:`TrackManiaBackend`."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from environments.trackmania.backend import CarState, InputState, TrackManiaBackend
from environments.trackmania.sim.car import CarPhysics
from environments.trackmania.sim.car_parameters import CarParameters
from environments.trackmania.sim.geometry import sim_geometry
from environments.trackmania.sim.render import Renderer
from environments.trackmania.track import Track


@dataclass
class SimOptions:
    """Simulator-only options (not part of the YAML environment section).

    Attributes:
        start_lateral_jitter_m: seeded random lateral offset of the start, +- m.
        start_heading_jitter_rad: seeded random heading offset of the start, +- rad.
        render: produce frames (False returns a blank frame: physics-only speed runs).
        car: the car's constants.
    """

    start_lateral_jitter_m: float = 0.5
    start_heading_jitter_rad: float = 0.02
    render: bool = True
    car: CarParameters = field(default_factory=CarParameters)


class SimBackend(TrackManiaBackend):
    """Runs the built-in simulator: ``tm_engine_step_per_action`` ticks of 10 ms per action."""

    def __init__(self, params, options: SimOptions | None = None) -> None:
        self.params = params
        self.options = options or SimOptions()
        self.ticks_per_action = int(params.tm_engine_step_per_action)
        self.dt = params.ms_per_tm_engine_step / 1000.0
        self.car: CarPhysics | None = None
        self.renderer: Renderer | None = None
        self._track: Track | None = None
        self._blank = np.zeros((params.H_downsized, params.W_downsized), dtype=np.uint8)

    def start_race(self, track: Track, seed: int | None) -> tuple[CarState, np.ndarray]:
        """Put the car at the start (with seeded jitter) at race time 0; returns the state and (H, W) frame."""
        if track is not self._track:
            self._track = track
            self.car = CarPhysics(track, sim_geometry(track), self.options.car, dt=self.dt)
            self.renderer = (Renderer(track, self.params.H_downsized, self.params.W_downsized,
                                      self.params.game_camera_number) if self.options.render else None)
        rng = np.random.default_rng(seed)
        lat = float(rng.uniform(-1.0, 1.0)) * self.options.start_lateral_jitter_m
        head = float(rng.uniform(-1.0, 1.0)) * self.options.start_heading_jitter_rad
        self.car.reset(0, lat, head)
        return self._state(), self._frame()

    def step(self, inputs: InputState) -> tuple[CarState, np.ndarray]:
        """Hold ``inputs`` for one action."""
        steer = (1 if inputs.left else 0) - (1 if inputs.right else 0)
        was_finished = self.car.finished
        self.car.run(inputs.accelerate, inputs.brake, steer, self.ticks_per_action)
        state = self._state()
        state.finished = self.car.finished and not was_finished
        return state, self._frame()

    def _frame(self) -> np.ndarray:
        if self.renderer is None:
            return self._blank
        c = self.car
        return self.renderer.render(c.x, c.z, c.psi)

    def _state(self) -> CarState:
        c = self.car
        sp, cp = math.sin(c.psi), math.cos(c.psi)
        st, ct = math.sin(c.pitch), math.cos(c.pitch)
        fwd = (sp * ct, st, cp * ct)
        left = (cp, 0.0, -sp)
        up = (fwd[1] * left[2] - fwd[2] * left[1], fwd[2] * left[0] - fwd[0] * left[2],
              fwd[0] * left[1] - fwd[1] * left[0])
        rotation = np.array([[left[0], up[0], fwd[0]], [left[1], up[1], fwd[1]], [left[2], up[2], fwd[2]]])
        return CarState(
            race_time_ms=c.time_ms,
            position=np.array([c.x, c.y, c.z]),
            rotation=rotation,
            linear_velocity=np.array([c.vx, c.vy, c.vz]),
            angular_velocity=np.array([0.0, c.r, 0.0]),
            gear=c.gear,
            rpm=c.rpm,
            gearbox_state=c.gearbox_state,
            gear_change_counter=c.since_shift,
            is_freewheeling=c.freewheeling,
            wheel_damper_absorb=np.array(c.damper, dtype=np.float32),
            wheel_has_ground_contact=np.full(4, not c.airborne),
            wheel_surface_group=np.array(c.surfaces, dtype=np.int8),
            wheel_is_sliding=np.array(c.sliding, dtype=bool),
            finished=c.finished,
            checkpoint_times_ms=list(c.checkpoint_times_ms),
        )
