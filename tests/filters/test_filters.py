import numpy as np
import pytest
from gymnasium import spaces

from filters import InputFilter, OutputFilter
from filters.action_filters import DiscreteToDictActionFilter
from filters.observation_filters import (ObservationChannelsFirstFilter, ObservationNormalizationFilter,
                                         ObservationRescaleToSizeFilter, ObservationRGBToGrayscaleFilter,
                                         ObservationTypeCastFilter)
from filters.reward_filters import RewardClippingFilter, RewardRescaleFilter


def test_image_pipeline_transforms_space_and_value_alike():
    """RGB (H, W, 3) -> gray -> resized -> (1, h, w): the filtered space matches the filtered value."""
    rgb = spaces.Box(0, 255, (96, 96, 3), np.uint8)
    pipeline = InputFilter({"frame": [ObservationRGBToGrayscaleFilter(), ObservationRescaleToSizeFilter(48, 64),
                                      ObservationChannelsFirstFilter()]})
    space = pipeline.filter_space(spaces.Dict({"frame": rgb}))
    value = pipeline.filter_observation({"frame": rgb.sample()})
    assert space["frame"].shape == (1, 48, 64) and space["frame"].dtype == np.uint8
    assert space["frame"].contains(value["frame"])


def test_normalization_makes_float_space_and_checks_shapes():
    f = ObservationNormalizationFilter([1.0, 2.0], [2.0, 4.0])
    space = f.filter_space(spaces.Box(0, 10, (2,), np.float32))
    assert space.dtype == np.float32 and np.isinf(space.high).all()
    np.testing.assert_allclose(f.filter(np.array([3.0, 6.0])), [1.0, 1.0])
    with pytest.raises(ValueError, match="do not fit"):
        f.filter_space(spaces.Box(0, 1, (3,), np.float32))


def test_type_cast_and_unknown_names():
    assert ObservationTypeCastFilter(np.float32).filter_space(spaces.Box(0, 255, (2,), np.uint8)).dtype == np.float32
    with pytest.raises(ValueError, match="observation has only"):
        InputFilter({"pixels": []}).filter_space(spaces.Dict({"frame": spaces.Box(0, 1, (1,))}))


def test_reward_filters_clip_then_scale():
    f = InputFilter(reward_filters=[RewardClippingFilter(-1, 1), RewardRescaleFilter(0.5)])
    assert f.filter_reward(5.0) == 0.5 and f.filter_reward(-0.5) == -0.25


def test_discrete_to_dict_action_filter():
    """The agent acts in Discrete(len(table)); the environment receives the table row."""
    table = [{"accelerate": True, "left": False}, {"accelerate": False, "left": True}]
    out = OutputFilter([DiscreteToDictActionFilter(table)])
    assert out.agent_action_space(spaces.Dict({})) == spaces.Discrete(2)
    assert out.filter(1) == {"accelerate": False, "left": True}
