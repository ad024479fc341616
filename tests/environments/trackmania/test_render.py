"""The renderer: frame shape, dependence on pose and camera, visible road markings."""
from __future__ import annotations

import numpy as np
import pytest

from environments.trackmania.sim.render import Renderer
from environments.trackmania.tracks import get_track


@pytest.fixture(scope="module")
def track():
    return get_track("short")


def _pose(track, i: int):
    line = track.reference_line
    t = track.tangent_xz[i]
    return float(line[i, 0]), float(line[i, 2]), float(np.arctan2(t[0], t[1]))


def test_frame_shape_and_dtype(track):
    """Frames are (H, W) uint8 at the configured size."""
    frame = Renderer(track, 120, 160, camera=2).render(*_pose(track, 100))
    assert frame.shape == (120, 160) and frame.dtype == np.uint8
    small = Renderer(track, 48, 64, camera=2).render(*_pose(track, 100))
    assert small.shape == (48, 64)


def test_image_changes_with_pose_and_is_deterministic(track):
    """Moving or turning the car changes the image; the same pose gives the same image."""
    r = Renderer(track, 120, 160, camera=2)
    x, z, psi = _pose(track, 100)
    a = r.render(x, z, psi).copy()
    assert np.array_equal(a, r.render(x, z, psi))
    moved = r.render(x + 1.3 * np.sin(psi), z + 1.3 * np.cos(psi), psi).copy()
    turned = r.render(x, z, psi + 0.3).copy()
    assert np.mean(a != moved) > 0.2
    assert np.mean(a != turned) > 0.2


def test_road_is_visible_with_texture_and_sky(track):
    """Sky on top, a road below with varied shades (markings and texture for motion cues)."""
    frame = Renderer(track, 120, 160, camera=2).render(*_pose(track, 100))
    assert frame[:10].std() < 15  # sky gradient rows are smooth
    ground = frame[70:]
    assert len(np.unique(ground)) > 20
    assert (ground > 200).any()  # bright markings (centre dashes / kerbs)


@pytest.mark.parametrize("camera", [1, 2, 3])
def test_every_camera_renders_a_distinct_view(track, camera):
    """Cameras 1 (behind), 2 (first person) and 3 (top view) give different images; 1 and 3 show the car."""
    pose = _pose(track, 200)
    frame = Renderer(track, 120, 160, camera=camera).render(*pose).copy()
    others = [Renderer(track, 120, 160, camera=c).render(*pose).copy() for c in (1, 2, 3) if c != camera]
    assert all(np.mean(frame != o) > 0.3 for o in others)
    r = Renderer(track, 120, 160, camera=camera)
    assert (r.car_pixels.size > 50) == (camera in (1, 3))


def test_unknown_camera_is_refused(track):
    """Only cameras 1, 2, 3 exist."""
    with pytest.raises(ValueError):
        Renderer(track, 120, 160, camera=7)
