"""Each observation filter on its own: the filtered space, the filtered value, and the inputs it refuses."""
import numpy as np
import pytest
from gymnasium import spaces
from PIL import Image

from filters.observation_filters import (ObservationChannelsFirstFilter, ObservationNormalizationFilter,
                                         ObservationRescaleToSizeFilter, ObservationRGBToGrayscaleFilter,
                                         ObservationTypeCastFilter)


def test_normalization_space_and_value():
    """(x - mean) / std as float32, in an unbounded float32 space of the observation's shape."""
    f = ObservationNormalizationFilter([1.0, 2.0], [2.0, 0.5])
    space = f.filter_space(spaces.Box(0, 10, (2,), np.uint8))
    assert space.shape == (2,) and space.dtype == np.float32
    assert np.all(space.low == -np.inf) and np.all(space.high == np.inf)
    out = f.filter(np.array([3, 1], dtype=np.uint8))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [1.0, -2.0])


def test_normalization_std_must_be_positive():
    """A zero or negative std is refused when the filter is made, with a message naming std; std < 1 is fine."""
    for bad in ([1.0, 0.0], [1.0, -1.0]):
        with pytest.raises(ValueError, match="std must be > 0"):
            ObservationNormalizationFilter([0.0, 0.0], bad)
    ObservationNormalizationFilter([0.0, 0.0], [0.5, 0.25])


def test_normalization_statistics_shapes():
    """Scalar statistics fit any observation; a mean or a std of the wrong shape is refused by filter_space."""
    ObservationNormalizationFilter(0.0, 1.0).filter_space(spaces.Box(0, 1, (3, 2), np.float32))
    box = spaces.Box(0, 1, (3,), np.float32)
    for mean, std in (([0.0, 0.0], 1.0), (0.0, [1.0, 1.0])):
        with pytest.raises(ValueError, match="do not fit"):
            ObservationNormalizationFilter(mean, std).filter_space(box)


def test_grayscale_space_value_and_refusals():
    """(H, W, 3) uint8 -> (H, W) uint8 luma in [0, 255] with ITU-R 601 weights; other shapes are refused."""
    f = ObservationRGBToGrayscaleFilter()
    space = f.filter_space(spaces.Box(0, 255, (4, 5, 3), np.uint8))
    assert space.shape == (4, 5) and space.dtype == np.uint8 and space.low.min() == 0 and space.high.max() == 255
    rgb = np.zeros((1, 3, 3), np.uint8)
    rgb[0, 0] = (255, 0, 0)
    rgb[0, 1] = (0, 255, 0)
    rgb[0, 2] = (200, 200, 200)
    out = f.filter(rgb)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, [[76, 149, 200]])  # int(0.299 * 255), int(0.587 * 255), gray stays gray
    for shape in ((4, 5, 4), (4, 5)):
        with pytest.raises(ValueError, match=r"grayscale needs \(H, W, 3\)"):
            f.filter_space(spaces.Box(0, 255, shape, np.uint8))


@pytest.mark.parametrize("shape", [(8, 6), (8, 6, 3)])
def test_rescale_space_and_value(shape):
    """Gray (H, W) and colour (H, W, C) images are resized to (height, width), channels kept, uint8 in [0, 255]."""
    f = ObservationRescaleToSizeFilter(4, 3)
    space = f.filter_space(spaces.Box(0, 255, shape, np.uint8))
    assert space.shape == (4, 3, *shape[2:]) and space.dtype == np.uint8
    assert space.low.min() == 0 and space.high.max() == 255
    image = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    out = f.filter(image)
    assert out.shape == space.shape and out.dtype == np.uint8


def test_rescale_is_bilinear_and_refuses_other_ranks():
    """Resizing uses bilinear interpolation (as documented; Pillow's default would be bicubic); a 1-D or 4-D
    observation is refused naming the shapes it accepts."""
    image = np.random.default_rng(1).integers(0, 256, (16, 16), dtype=np.uint8)
    out = ObservationRescaleToSizeFilter(5, 7).filter(image)
    bilinear = np.asarray(Image.fromarray(image).resize((7, 5), Image.BILINEAR))
    bicubic = np.asarray(Image.fromarray(image).resize((7, 5), Image.BICUBIC))
    assert not np.array_equal(bilinear, bicubic)  # the check below can tell them apart
    np.testing.assert_array_equal(out, bilinear)
    for shape in ((8,), (2, 8, 8, 3)):
        with pytest.raises(ValueError, match=r"rescaling needs \(H, W\) or \(H, W, C\)"):
            ObservationRescaleToSizeFilter(4, 4).filter_space(spaces.Box(0, 255, shape, np.uint8))


def test_channels_first_colour_image():
    """(H, W, C) -> (C, H, W): the space keeps dtype and bounds, and pixel (h, w, c) moves to (c, h, w)."""
    f = ObservationChannelsFirstFilter()
    space = f.filter_space(spaces.Box(-1.0, 2.0, (4, 5, 3), np.float32))
    assert space.shape == (3, 4, 5) and space.dtype == np.float32
    assert np.all(space.low == -1.0) and np.all(space.high == 2.0)
    image = np.arange(4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3)
    out = f.filter(image)
    assert out.shape == (3, 4, 5)
    for h, w, c in ((0, 0, 0), (1, 2, 2), (3, 4, 1)):
        assert out[c, h, w] == image[h, w, c]


def test_channels_first_gray_image():
    """(H, W) -> (1, H, W), values unchanged."""
    f = ObservationChannelsFirstFilter()
    assert f.filter_space(spaces.Box(0, 255, (4, 5), np.uint8)).shape == (1, 4, 5)
    image = np.arange(20, dtype=np.uint8).reshape(4, 5)
    np.testing.assert_array_equal(f.filter(image), image[None])


def test_type_cast_space_and_value():
    """The space and the value take the new dtype; bounds and shape are kept."""
    f = ObservationTypeCastFilter(np.float64)
    space = f.filter_space(spaces.Box(0, 255, (2, 3), np.uint8))
    assert space.shape == (2, 3) and space.dtype == np.float64
    assert np.all(space.low == 0) and np.all(space.high == 255)
    out = f.filter(np.array([[1, 2, 3], [4, 5, 255]], dtype=np.uint8))
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [[1, 2, 3], [4, 5, 255]])
    assert ObservationTypeCastFilter(np.uint8).filter([3.0, 4.0]).dtype == np.uint8
