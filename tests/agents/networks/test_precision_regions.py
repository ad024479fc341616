"""Under bfloat16 autocast only the convolutions compute in bfloat16; every other layer (the float
inputs' MLP, the quantile embedding, the heads) in float32. float16 autocast covers every hidden layer."""
import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from agents.networks.iqn_network import IQNNetwork
from agents.networks.precision_regions import without_bfloat16
from agents.networks.q_network import QNetwork
from agents.qr_dqn_agent import QuantileNetwork

SPACE = spaces.Dict({
    "frame": spaces.Box(0, 255, (1, 48, 48), np.uint8),
    "floats": spaces.Box(-np.inf, np.inf, (5,), np.float32),
})
NETWORKS = {
    "iqn": lambda: IQNNetwork(SPACE, 4, [8, 8], 16, dueling=True, embedding_dimension=8),
    "dqn": lambda: QNetwork(SPACE, 4, [8, 8], 16, dueling=True),
    "qr_dqn": lambda: QuantileNetwork(SPACE, 4, 6, [8, 8], 16, dueling=True),
}


def _output_dtypes(network: nn.Module, dtype: torch.dtype) -> tuple[dict[str, set[torch.dtype]], torch.dtype]:
    """The dtypes the network's Conv2d and Linear layers return, and its output's, under CPU autocast."""
    seen: dict[str, set[torch.dtype]] = {"Conv2d": set(), "Linear": set()}
    for module in network.modules():
        if type(module).__name__ in seen:
            module.register_forward_hook(lambda m, _, out: seen[type(m).__name__].add(out.dtype))
    observations = {"frame": torch.randint(0, 256, (3, 1, 48, 48), dtype=torch.uint8), "floats": torch.randn(3, 5)}
    with torch.autocast("cpu", dtype=dtype):
        out = network(observations, torch.rand(3, 6)) if isinstance(network, IQNNetwork) else network(observations)
    return seen, out.dtype


@pytest.mark.parametrize("name", NETWORKS)
def test_bfloat16_autocast_reaches_the_convolutions_only(name):
    """bfloat16: convolutions in bfloat16, every Linear and the output in float32 (with them in
    bfloat16 too, short seed 0's best races ended 6-8 % slower than float32's)."""
    seen, out = _output_dtypes(NETWORKS[name](), torch.bfloat16)
    assert seen == {"Conv2d": {torch.bfloat16}, "Linear": {torch.float32}}
    assert out == torch.float32


def test_float16_autocast_still_covers_every_hidden_layer():
    """float16 (CUDA's setting, Linesight's GPU training) keeps every layer in float16 but the heads'
    output layers (float32, as before)."""
    seen, out = _output_dtypes(NETWORKS["iqn"](), torch.float16)
    assert seen == {"Conv2d": {torch.float16}, "Linear": {torch.float16, torch.float32}}
    assert out == torch.float32


def test_without_bfloat16_changes_nothing_outside_bfloat16_autocast():
    """Outside autocast and under float16 the block is a no-op; under bfloat16 it turns autocast off."""
    x = torch.ones(1)
    with without_bfloat16(x):
        assert not torch.is_autocast_enabled("cpu")
    with torch.autocast("cpu", dtype=torch.float16), without_bfloat16(x):
        assert torch.is_autocast_enabled("cpu")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with without_bfloat16(x):
            assert not torch.is_autocast_enabled("cpu")
        assert torch.is_autocast_enabled("cpu")
