"""Weight initialisation shared by all networks."""
from __future__ import annotations

from torch import nn

LEAKY_RELU_SLOPE = 0.01


def orthogonal_init(module: nn.Module) -> None:
    """Orthogonal weights with the leaky-ReLU gain, zero biases, for every Linear and Conv2d."""
    gain = nn.init.calculate_gain("leaky_relu", LEAKY_RELU_SLOPE)
    for layer in module.modules():
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            nn.init.orthogonal_(layer.weight, gain)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
