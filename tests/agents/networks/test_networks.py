"""The network building blocks: Q heads, embedders, initialisation, the IQN and DQN networks."""
import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from agents.networks.embedders import ImageEmbedder, MultiInputEmbedder, VectorEmbedder, default_embedder, mlp
from agents.networks.heads import QHead
from agents.networks.init import LEAKY_RELU_SLOPE, orthogonal_init
from agents.networks.iqn_network import IQNNetwork, sample_symmetric_taus
from agents.networks.q_network import QNetwork


def linears(module: nn.Module) -> list[nn.Linear]:
    return [m for m in module.modules() if isinstance(m, nn.Linear)]


def test_dueling_head_is_value_plus_centred_advantage():
    """Dueling: Q = V + A - mean(A), so the mean of Q over actions is V; without dueling Q = A."""
    torch.manual_seed(0)
    features = torch.randn(5, 7)
    head = QHead(7, 6, 3, dueling=True)
    q = head(features)
    v, a = head.value(features), head.advantage(features)
    torch.testing.assert_close(q, v + a - a.mean(dim=-1, keepdim=True))
    torch.testing.assert_close(q.mean(dim=-1, keepdim=True), v)
    plain = QHead(7, 6, 3, dueling=False)
    torch.testing.assert_close(plain(features), plain.advantage(features))
    assert not hasattr(plain, "value")


def test_head_sizes_with_and_without_hidden_layer():
    """hidden_size > 0: features -> hidden -> actions (LeakyReLU between); 0: one Linear to the actions."""
    head = QHead(7, 6, 3, dueling=True)
    assert [(l.in_features, l.out_features) for l in linears(head.advantage)] == [(7, 6), (6, 3)]
    assert [(l.in_features, l.out_features) for l in linears(head.value)] == [(7, 6), (6, 1)]
    bare = QHead(7, 0, 3, dueling=True)
    assert [(l.in_features, l.out_features) for l in linears(bare.advantage)] == [(7, 3)]
    assert [(l.in_features, l.out_features) for l in linears(bare.value)] == [(7, 1)]


def test_mlp_layers_and_slope():
    """mlp([4, 8, 2]): Linear(4, 8), LeakyReLU(0.01), Linear(8, 2), LeakyReLU(0.01)."""
    net = mlp([4, 8, 2])
    assert [type(m) for m in net] == [nn.Linear, nn.LeakyReLU, nn.Linear, nn.LeakyReLU]
    assert [(l.in_features, l.out_features) for l in linears(net)] == [(4, 8), (8, 2)]
    assert all(m.negative_slope == LEAKY_RELU_SLOPE == 0.01 for m in net if isinstance(m, nn.LeakyReLU))


def test_vector_embedder_normalises_inside_the_network():
    """(x - mean) / std before the MLP (mean 0, std 1 by default); the output size is the last hidden size
    (the input size with no hidden layer)."""
    torch.manual_seed(0)
    mean, std = torch.tensor([1.0, -2.0, 3.0]), torch.tensor([2.0, 0.5, 4.0])
    e = VectorEmbedder(3, [5, 4], mean, std)
    x = torch.randn(6, 3)
    torch.testing.assert_close(e(x), e.layers((x - mean) / std))
    assert e.output_size == 4 and e(x).shape == (6, 4)
    plain = VectorEmbedder(3, [5])
    torch.testing.assert_close(plain(x), plain.layers(x))
    assert VectorEmbedder(3, []).output_size == 3


def test_image_embedder_scales_pixels_and_sizes_its_output():
    """uint8 pixels become (x - 128) / 128 before Linesight's conv stack; output_size is the flat feature count."""
    torch.manual_seed(0)
    e = ImageEmbedder((1, 48, 64))
    x = torch.randint(0, 256, (2, 1, 48, 64), dtype=torch.uint8)
    out = e(x)
    torch.testing.assert_close(out, e.layers((x.float() - 128.0) / 128.0))
    convs = [m for m in e.modules() if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size[0], c.stride[0]) for c in convs] == [
        (1, 16, 4, 2), (16, 32, 4, 2), (32, 64, 3, 2), (64, 32, 3, 1)]
    assert out.shape == (2, e.output_size) and e.output_size == 32 * 2 * 4  # 48x64 -> 23x31 -> 10x14 -> 4x6 -> 2x4


def test_default_embedder_follows_the_rank_of_the_space():
    """Rank 1: an MLP; rank 3: a conv stack; anything else is refused with the fix."""
    vector = default_embedder(spaces.Box(-1, 1, (3,), np.float32), [8])
    assert isinstance(vector, VectorEmbedder) and vector.output_size == 8
    assert isinstance(default_embedder(spaces.Box(0, 255, (1, 48, 64), np.uint8), [8]), ImageEmbedder)
    with pytest.raises(ValueError, match=r"no default embedder for observations of shape \(4, 4\).*filter"):
        default_embedder(spaces.Box(0, 1, (4, 4), np.float32), [8])


def test_multi_input_embedder_concatenates_in_space_order_and_honours_factories():
    """Each name gets its embedder (a factory when given); the features are concatenated in the order of
    the observation space and output_size is their sum."""
    space = spaces.Dict({"a": spaces.Box(-1, 1, (2,), np.float32), "b": spaces.Box(-1, 1, (3,), np.float32)})
    e = MultiInputEmbedder(space, [4], {"b": lambda s: VectorEmbedder(s.shape[0], [6])})
    assert e.embedders["a"].output_size == 4 and e.embedders["b"].output_size == 6 and e.output_size == 10
    obs = {"a": torch.randn(2, 2), "b": torch.randn(2, 3)}
    torch.testing.assert_close(e(obs), torch.cat([e.embedders["a"](obs["a"]), e.embedders["b"](obs["b"])], dim=1))


def test_orthogonal_init_uses_the_leaky_relu_gain_and_zero_biases():
    """Every Linear / Conv2d: orthogonal weights scaled by the leaky-ReLU gain, biases 0."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 6), nn.Conv2d(2, 3, 2))
    orthogonal_init(net)
    gain = math.sqrt(2.0 / (1 + LEAKY_RELU_SLOPE ** 2))
    w = net[0].weight
    torch.testing.assert_close(w @ w.T, gain ** 2 * torch.eye(6), atol=1e-5, rtol=1e-5)
    c = net[1].weight.reshape(3, -1)
    torch.testing.assert_close(c @ c.T, gain ** 2 * torch.eye(3), atol=1e-5, rtol=1e-5)
    assert all((m.bias == 0).all() for m in net)


def iqn(dueling=True) -> IQNNetwork:
    torch.manual_seed(0)
    space = spaces.Dict({"observation": spaces.Box(-1, 1, (3,), np.float32)})
    return IQNNetwork(space, 4, [8], 8, dueling, 6)


def test_iqn_network_embeds_taus_with_cosines_and_multiplies_the_features():
    """Z(s, tau) = head(features * LeakyReLU(Linear(cos(pi k tau)))), k = 1..E; shape (B, N, A)."""
    net = iqn()
    torch.testing.assert_close(net.cos_multipliers, math.pi * torch.arange(1, 7, dtype=torch.float32))
    obs = {"observation": torch.randn(2, 3)}
    taus = torch.rand(2, 5)
    z = net(obs, taus)
    assert z.shape == (2, 5, 4)
    k = torch.arange(1, 7, dtype=torch.float32)
    phi = nn.functional.leaky_relu(net.quantile_embedding[0](torch.cos(math.pi * k * taus.unsqueeze(-1))), 0.01)
    torch.testing.assert_close(z, net.head(net.embedder(obs).unsqueeze(1) * phi))


def _autograd_nodes(output: torch.Tensor) -> set[str]:
    seen, names, stack = set(), set(), [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


def test_iqn_network_copies_no_activation_in_its_backward():
    """Every layer after the embedder runs on flat (B * N, F) rows. A Linear on a (B, N, F) input
    returns a view, and the in-place LeakyReLU on that view makes autograd copy the whole activation
    forward and backward (CopySlices): about 4 % of an update at Linesight's shape."""
    net = iqn()
    z = net({"observation": torch.randn(2, 3)}, torch.rand(2, 4))
    nodes = _autograd_nodes(z)
    assert "LeakyReluBackward1" in nodes  # the in-place activations are in the graph...
    assert not {"CopySlices", "AsStridedBackward0"} & nodes  # ...and none of them on a view


def test_iqn_q_values_average_k_symmetric_quantiles():
    """Q(s) is the mean of Z over K symmetric taus (the same draw as sample_symmetric_taus)."""
    net = iqn()
    obs = {"observation": torch.randn(3, 3)}
    torch.manual_seed(5)
    q = net.q_values(obs, 6)
    torch.manual_seed(5)
    taus = sample_symmetric_taus(3, 6)
    torch.testing.assert_close(q, net(obs, taus).mean(dim=1))
    assert q.shape == (3, 4)


def test_q_network_is_the_head_on_the_embedded_features():
    """DQN's network: head(embedder(observations)), (B, A), orthogonally initialised (zero biases)."""
    torch.manual_seed(0)
    space = spaces.Dict({"observation": spaces.Box(-1, 1, (3,), np.float32)})
    net = QNetwork(space, 2, [8], 8, dueling=False)
    obs = {"observation": torch.randn(4, 3)}
    torch.testing.assert_close(net(obs), net.head(net.embedder(obs)))
    assert net(obs).shape == (4, 2) and all((l.bias == 0).all() for l in linears(net))


def test_q_network_uses_the_given_embedder_factories():
    """An embedder factory given for a name replaces the default embedder of that observation."""
    space = spaces.Dict({"observation": spaces.Box(-1, 1, (3,), np.float32)})
    net = QNetwork(space, 2, [8], 8, dueling=False, embedder_factories={"observation": lambda s: VectorEmbedder(3, [5])})
    assert net.embedder.output_size == 5
