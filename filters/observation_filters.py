"""Observation filters: normalisation, resizing, grayscale, channel order and type casts."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from gymnasium import spaces
from PIL import Image

from filters.filter import ObservationFilter


class ObservationNormalizationFilter(ObservationFilter):
    """``(x - mean) / std`` with fixed statistics (e.g. the TrackMania ``state_normalization``)."""

    def __init__(self, mean: Sequence[float] | np.ndarray, std: Sequence[float] | np.ndarray) -> None:
        self.mean = np.asarray(mean, dtype=np.float32)
        self.std = np.asarray(std, dtype=np.float32)
        if np.any(self.std <= 0):
            raise ValueError("normalisation std must be > 0 everywhere")

    def filter_space(self, space: spaces.Box) -> spaces.Box:
        if self.mean.shape not in ((), space.shape) or self.std.shape not in ((), space.shape):
            raise ValueError(f"normalisation statistics of shape {self.mean.shape} do not fit observations of shape {space.shape}")
        return spaces.Box(-np.inf, np.inf, space.shape, np.float32)

    def filter(self, observation: np.ndarray) -> np.ndarray:
        return ((observation - self.mean) / self.std).astype(np.float32, copy=False)


class ObservationRGBToGrayscaleFilter(ObservationFilter):
    """(H, W, 3) uint8 RGB to (H, W) uint8 luma (ITU-R 601)."""

    _WEIGHTS = np.array([0.299, 0.587, 0.114], dtype=np.float32)

    def filter_space(self, space: spaces.Box) -> spaces.Box:
        if len(space.shape) != 3 or space.shape[-1] != 3:
            raise ValueError(f"grayscale needs (H, W, 3) images, got shape {space.shape}")
        return spaces.Box(0, 255, space.shape[:2], np.uint8)

    def filter(self, observation: np.ndarray) -> np.ndarray:
        return (observation @ self._WEIGHTS).astype(np.uint8)


class ObservationRescaleToSizeFilter(ObservationFilter):
    """Resize (H, W) or (H, W, C) uint8 images to ``(height, width)`` (bilinear)."""

    def __init__(self, height: int, width: int) -> None:
        self.size = (height, width)

    def filter_space(self, space: spaces.Box) -> spaces.Box:
        if len(space.shape) not in (2, 3):
            raise ValueError(f"rescaling needs (H, W) or (H, W, C) images, got shape {space.shape}")
        return spaces.Box(0, 255, (*self.size, *space.shape[2:]), np.uint8)

    def filter(self, observation: np.ndarray) -> np.ndarray:
        image = Image.fromarray(observation).resize(self.size[::-1], Image.BILINEAR)
        return np.asarray(image, dtype=np.uint8)


class ObservationChannelsFirstFilter(ObservationFilter):
    """(H, W) to (1, H, W) or (H, W, C) to (C, H, W), the layout of convolution embedders."""

    def filter_space(self, space: spaces.Box) -> spaces.Box:
        shape = (1, *space.shape) if len(space.shape) == 2 else (space.shape[2], *space.shape[:2])
        low = np.zeros(shape, space.dtype) + space.low.min()
        high = np.zeros(shape, space.dtype) + space.high.max()
        return spaces.Box(low, high, shape, space.dtype)

    def filter(self, observation: np.ndarray) -> np.ndarray:
        return observation[None] if observation.ndim == 2 else np.moveaxis(observation, -1, 0)


class ObservationTypeCastFilter(ObservationFilter):
    def __init__(self, dtype: type | np.dtype) -> None:
        self.dtype = np.dtype(dtype)

    def filter_space(self, space: spaces.Box) -> spaces.Box:
        return spaces.Box(space.low.astype(self.dtype), space.high.astype(self.dtype), space.shape, self.dtype)

    def filter(self, observation: np.ndarray) -> np.ndarray:
        return np.asarray(observation).astype(self.dtype, copy=False)
