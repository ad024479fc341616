"""Track catalogue: built-in tracks, the seeded generator, reference-line files and Hockolicious."""
from __future__ import annotations

import numpy as np
import pytest

from environments.trackmania.backend import SURFACE_TURBO
from environments.trackmania.tracks import BUILTIN_TRACK_NAMES, DEFAULT_TRACK, get_track
from environments.trackmania.tracks.generator import generate_loop, generate_point_to_point
from environments.trackmania.tracks.geometry import min_clearance
from tests.environments.trackmania.helpers import require_hockolicious


@pytest.mark.parametrize("name", BUILTIN_TRACK_NAMES)
def test_builtin_tracks_are_complete(name):
    """Built-in tracks carry a 0.5 m line, road width, checkpoints, surfaces/turbos, and do not overlap."""
    track = get_track(name)
    spacing = np.linalg.norm(np.diff(track.reference_line, axis=0), axis=1)
    assert np.allclose(spacing[:-1], 0.5, atol=0.02)
    assert track.road_width > 8 and track.checkpoint_s and track.name == name
    assert track.surface_patches or track.turbo_pads
    assert min_clearance(track.reference_line) > track.road_width + 2 * track.runoff_width


def test_default_track_is_short():
    """The default track is 'short'."""
    assert DEFAULT_TRACK == "short"


def test_generator_is_seeded_and_varied():
    """Same seed -> same track; different seeds -> different tracks; both kinds carry decorations."""
    a, b, c = generate_point_to_point(11), generate_point_to_point(11), generate_point_to_point(12)
    assert np.array_equal(a.reference_line, b.reference_line)
    assert a.reference_line.shape != c.reference_line.shape or not np.allclose(a.reference_line, c.reference_line)
    assert min_clearance(a.reference_line) > a.road_width + 2 * a.runoff_width
    loop = generate_loop(4)
    assert loop.is_loop and np.linalg.norm(loop.reference_line[0] - loop.reference_line[-1]) < 1.0
    assert min_clearance(loop.reference_line, closed=True) > loop.road_width
    for t in (a, c, loop):
        assert t.checkpoint_s
    tracks = [generate_point_to_point(s) for s in range(5)]
    assert any(p.surface == SURFACE_TURBO for t in tracks for p in t.turbo_pads)
    assert any(t.surface_patches for t in tracks)


def test_any_npy_line_with_a_road_width_is_a_track(tmp_path):
    """A reference-line .npy plus a road width loads as a track (PATH@WIDTH)."""
    z = np.arange(0, 200, 0.5)
    line = np.stack([np.sin(z / 30) * 10, np.full_like(z, 5.0), z], axis=1)
    path = tmp_path / "my_line.npy"
    np.save(path, line)
    track = get_track(f"{path}@18")
    assert track.road_width == 18 and np.array_equal(track.reference_line, line) and track.name == "my_line"


def test_unknown_track_name_is_refused():
    """An unknown name raises a KeyError listing what exists."""
    with pytest.raises(KeyError, match="short"):
        get_track("no-such-track")


def test_hockolicious_loads():
    """The real ESL-Hockolicious line loads: 8062 points, ~4 km, 9-38 m elevation."""
    require_hockolicious()
    track = get_track("hockolicious")
    assert track.reference_line.shape == (8062, 3)
    assert 4000 < track.length_m < 4100
    assert track.reference_line[:, 1].min() >= 8.9 and track.reference_line[:, 1].max() <= 38.0
