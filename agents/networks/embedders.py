"""Input embedders: one per observation name, sized from the filtered observation space.

The default choice follows the space: a vector (rank 1) gets an MLP, an image (rank 3, C x H x W)
gets a convolution stack. An agent subclass can pass its own factory for a name (the TrackMania
agent does, for its frame and float heads).
"""
from __future__ import annotations

from typing import Callable

import torch
from gymnasium import spaces
from torch import nn

from agents.networks.init import LEAKY_RELU_SLOPE
from agents.networks.precision_regions import without_bfloat16

EmbedderFactory = Callable[[spaces.Box], nn.Module]


def mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers of the given sizes, each followed by LeakyReLU (in place: one allocation less
    per layer, forward and backward; bench/update_speed.py measures it)."""
    layers: list[nn.Module] = []
    for n_in, n_out in zip(sizes, sizes[1:]):
        layers += [nn.Linear(n_in, n_out), nn.LeakyReLU(LEAKY_RELU_SLOPE, inplace=True)]
    return nn.Sequential(*layers)


class VectorEmbedder(nn.Module):
    """(B, D) float vectors to (B, hidden_sizes[-1]) features.

    With ``mean`` / ``std`` (D,), inputs are normalised first: ``(x - mean) / std``. Normalising
    inside the network lets the memory rewrite raw values (the mini-race clock) at sampling time.
    Computes in float32 under bfloat16 autocast (:mod:`agents.networks.precision_regions`).
    """

    def __init__(self, input_size: int, hidden_sizes: list[int], mean: torch.Tensor | None = None,
                 std: torch.Tensor | None = None) -> None:
        super().__init__()
        self.layers = mlp([input_size, *hidden_sizes])
        self.output_size = hidden_sizes[-1] if hidden_sizes else input_size
        self.register_buffer("mean", torch.zeros(input_size) if mean is None else torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.ones(input_size) if std is None else torch.as_tensor(std, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with without_bfloat16(x):
            return self.layers((x.float() - self.mean) / self.std)


class ImageEmbedder(nn.Module):
    """(B, C, H, W) uint8 images to flat features: ``(x - 128) / 128`` then a conv stack.

    The default stack is Linesight's: Conv(C->16, k4, s2), Conv(16->32, k4, s2), Conv(32->64, k3, s2),
    Conv(64->32, k3, s1), LeakyReLU (in place) after each. The output size is computed from H x W.
    The agent keeps the conv weights channels_last (:class:`agents.agent.Agent`); the scaled
    images are made channels_last here, so every convolution runs in that layout. The convolutions
    compute in the ambient autocast dtype; the features come out float32.
    """

    def __init__(self, shape: tuple[int, int, int],
                 convs: tuple[tuple[int, int, int], ...] = ((16, 4, 2), (32, 4, 2), (64, 3, 2), (32, 3, 1))) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = shape[0]
        for out_channels, kernel, stride in convs:
            layers += [nn.Conv2d(channels, out_channels, kernel, stride), nn.LeakyReLU(LEAKY_RELU_SLOPE, inplace=True)]
            channels = out_channels
        self.layers = nn.Sequential(*layers, nn.Flatten())
        #: Layout of the scaled images (the conv weights' layout is set by whoever owns the network).
        self.memory_format = torch.channels_last
        with torch.no_grad():
            self.output_size = int(self.layers(torch.zeros(1, *shape)).shape[1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(((x.float() - 128.0) / 128.0).contiguous(memory_format=self.memory_format)).float()


def default_embedder(space: spaces.Box, vector_hidden_sizes: list[int]) -> nn.Module:
    if len(space.shape) == 1:
        return VectorEmbedder(space.shape[0], vector_hidden_sizes)
    if len(space.shape) == 3:
        return ImageEmbedder(space.shape)
    raise ValueError(
        f"no default embedder for observations of shape {space.shape}: flatten them with a filter or "
        "give the agent an embedder factory for that name"
    )


class MultiInputEmbedder(nn.Module):
    """Embeds each named observation and concatenates the features: dict -> (B, output_size)."""

    def __init__(self, observation_space: spaces.Dict, vector_hidden_sizes: list[int],
                 factories: dict[str, EmbedderFactory] | None = None) -> None:
        super().__init__()
        factories = factories or {}
        self.embedders = nn.ModuleDict({
            name: factories[name](space) if name in factories else default_embedder(space, vector_hidden_sizes)
            for name, space in observation_space.spaces.items()
        })
        self.output_size = sum(e.output_size for e in self.embedders.values())

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([embedder(observations[name]) for name, embedder in self.embedders.items()], dim=1)
