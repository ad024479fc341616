"""Declarative layout of the float observation: every group of floats is a named slice.

Nothing outside this module indexes the float vector with numbers: use ``layout.<field>``
(a ``slice``) or :meth:`FloatLayout.labels` for a per-float name.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Protocol

from environments.trackmania.actions import INPUT_NAMES
from environments.trackmania.backend import N_WHEELS

#: Names of the wheel positions, in the order used by every per-wheel float.
WHEEL_NAMES: tuple[str, ...] = ("front_left", "front_right", "rear_left", "rear_right")
#: Names of the components of a vector in the car frame (columns of CarState.rotation).
CAR_AXES: tuple[str, ...] = ("left", "up", "forward")
#: Names of the one-hot surface groups (index = SURFACE_* constant); "other" is all zeros.
SURFACE_GROUP_NAMES: tuple[str, ...] = ("asphalt", "grass", "dirt", "turbo")


class LayoutSettings(Protocol):
    """The settings a layout is built from (``TrackManiaEnvironmentParameters`` has them; the
    parameters import this module, not the other way round)."""

    n_prev_actions_in_inputs: int
    n_zone_centers_in_inputs: int
    n_contact_material_physics_behavior_types: int


@dataclass(frozen=True)
class FloatLayout:
    """Where each named group lives in the float vector, in the documented (Linesight) order."""

    mini_race_clock: slice
    previous_actions: slice
    wheel_is_sliding: slice
    wheel_has_ground_contact: slice
    wheel_damper_absorb: slice
    gearbox_state: slice
    gear: slice
    rpm: slice
    gear_change_counter: slice
    wheel_surface_one_hot: slice
    angular_velocity: slice
    linear_velocity: slice
    world_up: slice
    zone_centers: slice
    distance_to_finish: slice
    is_freewheeling: slice
    n_prev_actions: int
    n_zone_centers: int
    n_surface_groups: int

    @classmethod
    def build(cls, n_prev_actions: int = 5, n_zone_centers: int = 40, n_surface_groups: int = 4) -> "FloatLayout":
        """Lay the groups out one after another with the given counts."""
        sizes: list[tuple[str, int]] = [
            ("mini_race_clock", 1),
            ("previous_actions", len(INPUT_NAMES) * n_prev_actions),
            ("wheel_is_sliding", N_WHEELS),
            ("wheel_has_ground_contact", N_WHEELS),
            ("wheel_damper_absorb", N_WHEELS),
            ("gearbox_state", 1),
            ("gear", 1),
            ("rpm", 1),
            ("gear_change_counter", 1),
            ("wheel_surface_one_hot", N_WHEELS * n_surface_groups),
            ("angular_velocity", 3),
            ("linear_velocity", 3),
            ("world_up", 3),
            ("zone_centers", 3 * n_zone_centers),
            ("distance_to_finish", 1),
            ("is_freewheeling", 1),
        ]
        slices: dict[str, slice] = {}
        start = 0
        for name, size in sizes:
            slices[name] = slice(start, start + size)
            start += size
        return cls(
            **slices, n_prev_actions=n_prev_actions, n_zone_centers=n_zone_centers, n_surface_groups=n_surface_groups
        )

    @classmethod
    def from_parameters(cls, params: LayoutSettings) -> "FloatLayout":
        """The layout for a configuration (184 floats at defaults)."""
        return cls.build(
            n_prev_actions=params.n_prev_actions_in_inputs,
            n_zone_centers=params.n_zone_centers_in_inputs,
            n_surface_groups=params.n_contact_material_physics_behavior_types,
        )

    def groups(self) -> list[tuple[str, slice]]:
        """The named slices in vector order."""
        return [(f.name, getattr(self, f.name)) for f in fields(self) if isinstance(getattr(self, f.name), slice)]

    @property
    def size(self) -> int:
        """Total number of floats."""
        return self.is_freewheeling.stop

    def labels(self) -> list[str]:
        """One human-readable name per float, e.g. ``zone_centers[3].forward``."""
        out: list[str] = []
        for name, sl in self.groups():
            n = sl.stop - sl.start
            if name == "previous_actions":
                out += [f"previous_actions[{k}].{inp}" for k in range(self.n_prev_actions) for inp in INPUT_NAMES]
            elif name.startswith("wheel_") and name != "wheel_surface_one_hot":
                out += [f"{name}.{w}" for w in WHEEL_NAMES]
            elif name == "wheel_surface_one_hot":
                groups = [SURFACE_GROUP_NAMES[g] if g < len(SURFACE_GROUP_NAMES) else f"group{g}"
                          for g in range(self.n_surface_groups)]
                out += [f"{name}.{w}.{g}" for w in WHEEL_NAMES for g in groups]
            elif name in ("angular_velocity", "linear_velocity", "world_up"):
                out += [f"{name}.{a}" for a in CAR_AXES]
            elif name == "zone_centers":
                out += [f"zone_centers[{k}].{a}" for k in range(self.n_zone_centers) for a in CAR_AXES]
            else:
                out += [name] * n if n == 1 else [f"{name}[{i}]" for i in range(n)]
        return out
