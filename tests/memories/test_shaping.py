"""DistancePotential: its refusals and its value."""
import numpy as np
import pytest

from memories.shaping import DistancePotential


def test_empty_slice_or_clip_range_is_refused():
    """stop <= start and maximum < minimum are refused, naming the bad range; a one-element slice and a
    single-value clip range are fine."""
    with pytest.raises(ValueError, match=r"vector slice \[2, 2\) is empty"):
        DistancePotential("floats", 2, 2, 1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"clip range \[3.0, 2.0\] is empty"):
        DistancePotential("floats", 0, 2, 1.0, 3.0, 2.0)
    DistancePotential("floats", 2, 3, 1.0, 0.0, 1.0)
    DistancePotential("floats", 0, 2, 1.0, 2.0, 2.0)


def test_potential_is_the_clipped_weighted_norm_as_float32():
    """phi = weight x clip(|s[key][start:stop]|, minimum, maximum), (B,) float32, from float64 or float32 states."""
    phi = DistancePotential("floats", 1, 3, -0.5, 2.0, 25.0)
    states = {"floats": np.array([[9.0, 3.0, 4.0], [9.0, 0.0, 1.0], [9.0, 30.0, 40.0]], np.float64)}
    out = phi(states)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [-2.5, -1.0, -12.5])  # 5, clipped up from 1 to 2, clipped down from 50 to 25
