"""Float layout order and size, and the observation values written into it."""
from __future__ import annotations

import numpy as np
import pytest

from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.layout import FloatLayout
from environments.trackmania.training.normalization import default_normalization
from environments.trackmania.parameters import TrackManiaEnvironmentParameters

#: The documented (Linesight) positions at defaults.
DOCUMENTED = {
    "mini_race_clock": (0, 1), "previous_actions": (1, 21), "wheel_is_sliding": (21, 25),
    "wheel_has_ground_contact": (25, 29), "wheel_damper_absorb": (29, 33), "gearbox_state": (33, 34),
    "gear": (34, 35), "rpm": (35, 36), "gear_change_counter": (36, 37), "wheel_surface_one_hot": (37, 53),
    "angular_velocity": (53, 56), "linear_velocity": (56, 59), "world_up": (59, 62), "zone_centers": (62, 182),
    "distance_to_finish": (182, 183), "is_freewheeling": (183, 184),
}


def test_default_layout_is_184_floats_in_documented_order():
    """At defaults the layout has 184 floats at exactly the documented positions."""
    layout = FloatLayout.from_parameters(TrackManiaEnvironmentParameters())
    assert layout.size == 184 == TrackManiaEnvironmentParameters().float_input_dim
    assert [name for name, _ in layout.groups()] == list(DOCUMENTED)
    for name, (a, b) in DOCUMENTED.items():
        sl = getattr(layout, name)
        assert (sl.start, sl.stop) == (a, b), name
    assert len(layout.labels()) == 184
    assert layout.labels()[58] == "linear_velocity.forward" and layout.labels()[56] == "linear_velocity.left"


@pytest.mark.parametrize("n_prev,n_zones,n_surf", [(3, 20, 4), (0, 40, 4), (5, 10, 3), (8, 60, 4)])
def test_layout_size_follows_the_configuration(n_prev, n_zones, n_surf):
    """Changing the counts changes the size: 1 + 4 prev + 16 + 4 surf + 9 + 3 zones + 2."""
    params = TrackManiaEnvironmentParameters(n_prev_actions_in_inputs=n_prev, n_zone_centers_in_inputs=n_zones,
                                             n_contact_material_physics_behavior_types=n_surf)
    layout = FloatLayout.from_parameters(params)
    expected = 1 + 4 * n_prev + 16 + 4 * n_surf + 9 + 3 * n_zones + 2
    assert layout.size == expected == params.float_input_dim
    slices = [sl for _, sl in layout.groups()]
    assert slices[0].start == 0 and all(a.stop == b.start for a, b in zip(slices, slices[1:]))
    mean, std = default_normalization(params)
    assert mean.shape == std.shape == (expected,) and np.all(std > 0)


def test_env_with_other_sizes_produces_matching_observations():
    """The env's float vector follows a non-default configuration."""
    params = TrackManiaEnvironmentParameters(n_prev_actions_in_inputs=2, n_zone_centers_in_inputs=12,
                                             H_downsized=60, W_downsized=80)
    env = TrackManiaEnv(params=params, track="short")
    obs, _ = env.reset(seed=0)
    assert obs["floats"].shape == (1 + 8 + 32 + 9 + 36 + 2,)
    assert obs["frame"].shape == (1, 60, 80)


def test_observation_values_land_in_their_named_slices():
    """Speed, reference points, previous actions and distance to finish appear where the layout says."""
    env = TrackManiaEnv(track="short", backend_options={"render": False})
    layout = env.layout
    obs, _ = env.reset(seed=0)
    f0 = obs["floats"]
    assert f0[layout.distance_to_finish][0] == pytest.approx(min(700.0, env.track.length_m), abs=2.0)
    zc = f0[layout.zone_centers].reshape(-1, 3)
    assert np.all(np.diff(zc[:6, 2]) > 8.0)  # points ahead, ~10 m apart, in the forward axis
    for k in range(40):
        obs, *_ = env.step(0 if k < 38 else 2)  # accelerate, then accelerate + right
    f = obs["floats"]
    assert f[layout.linear_velocity][2] > 10.0  # forward speed
    assert np.array_equal(f[layout.previous_actions].reshape(-1, 4)[-1], [1, 0, 0, 1])
    assert f[layout.gear][0] >= 2 and f[layout.rpm][0] > 1000
    assert f[layout.wheel_has_ground_contact].tolist() == [1, 1, 1, 1]
    assert f[layout.world_up][1] > 0.9
    assert f[layout.wheel_surface_one_hot].reshape(4, 4).sum() >= 1
