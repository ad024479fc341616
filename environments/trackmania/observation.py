"""Builds the float observation from a :class:`CarState`, the zone tracker and the previous actions."""
from __future__ import annotations

from collections import deque

import numpy as np

from environments.trackmania.actions import ACTION_FLAGS, ACTION_FORWARD_IDX
from environments.trackmania.backend import N_WHEELS, CarState
from environments.trackmania.layout import FloatLayout
from environments.trackmania.zones import ZoneCenters

_WORLD_UP = np.array([0.0, 1.0, 0.0])


class ObservationBuilder:
    """Fills one preallocated float32 vector per call, group by group through the layout's slices.

    The mini-race clock is written as 0 (the replay memory rewrites it when sampling); the previous
    actions are padded with the forward action at the start of a race, oldest first.
    """

    def __init__(self, layout: FloatLayout, zones: ZoneCenters, stride: int, margin_to_finish_m: float) -> None:
        self.layout = layout
        self.zones = zones
        self.stride = stride
        self.margin_to_finish_m = margin_to_finish_m
        self.floats = np.zeros(layout.size, dtype=np.float32)
        self.prev_actions: deque[int] = deque([ACTION_FORWARD_IDX] * layout.n_prev_actions,
                                              maxlen=max(layout.n_prev_actions, 1))
        self._finish_progress = zones.finish_progress_m
        n = layout.n_zone_centers
        self._zc_rel = np.empty((n, 3))
        self._zc_car = np.empty((n, 3))
        self._last_index = len(zones.centers) - 1
        self._zc_idx = np.empty(n, dtype=np.int64)
        self._zc_offsets = np.arange(n, dtype=np.int64) * stride
        self._surface_one_hot = self.floats[layout.wheel_surface_one_hot].reshape(N_WHEELS, layout.n_surface_groups)
        self._prev = self.floats[layout.previous_actions].reshape(layout.n_prev_actions, ACTION_FLAGS.shape[1])

    def reset(self) -> None:
        """Forget the previous actions (a new race)."""
        for _ in range(len(self.prev_actions)):
            self.prev_actions.append(ACTION_FORWARD_IDX)

    def push_action(self, action: int) -> None:
        """Record the action just taken."""
        if self.layout.n_prev_actions:
            self.prev_actions.append(int(action))

    def build(self, state: CarState, zone: int, progress_m: float) -> np.ndarray:
        """The float vector for ``state`` in zone ``zone`` at ``progress_m``; returns the internal buffer."""
        L, f = self.layout, self.floats
        f[L.mini_race_clock] = 0.0
        if L.n_prev_actions:
            self._prev[:] = ACTION_FLAGS[list(self.prev_actions)]
        f[L.wheel_is_sliding] = state.wheel_is_sliding
        f[L.wheel_has_ground_contact] = state.wheel_has_ground_contact
        f[L.wheel_damper_absorb] = state.wheel_damper_absorb
        f[L.gearbox_state] = state.gearbox_state
        f[L.gear] = state.gear
        f[L.rpm] = state.rpm
        f[L.gear_change_counter] = state.gear_change_counter
        oh = self._surface_one_hot
        oh[:] = 0.0
        groups = state.wheel_surface_group
        for w in range(N_WHEELS):
            g = int(groups[w])
            if g < L.n_surface_groups:  # "other" (and any group beyond the encoded ones) stays all zeros
                oh[w, g] = 1.0
        rot = state.rotation
        f[L.angular_velocity] = state.angular_velocity @ rot
        f[L.linear_velocity] = state.linear_velocity @ rot
        f[L.world_up] = _WORLD_UP @ rot
        if L.n_zone_centers:
            np.add(self._zc_offsets, zone, out=self._zc_idx)
            np.minimum(self._zc_idx, self._last_index, out=self._zc_idx)
            np.subtract(self.zones.centers[self._zc_idx], state.position, out=self._zc_rel)
            np.matmul(self._zc_rel, rot, out=self._zc_car)
            f[L.zone_centers] = self._zc_car.reshape(-1)
        f[L.distance_to_finish] = min(self.margin_to_finish_m, max(0.0, self._finish_progress - progress_m))
        f[L.is_freewheeling] = float(state.is_freewheeling)
        return f
