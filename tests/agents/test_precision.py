"""performance.precision: what each setting means per device and CPU, and that mixed precision keeps
the values that need it in float32 and still learns."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.agent import Agent
from agents.precision import Precision, cpu_bf16_flags, gradient_scaler, resolve_precision
from rulka.config import ConfigError, apply_overrides
from rulka.core_types import RunPhase
from rulka.presets import load_graph_manager
from rulka.validation import validate_config
from tests.agents.test_iqn import small_agent
from tests.agents.test_trackmania_iqn_agent import fill_from_sim, small_sim_agent


def test_cpu_bf16_flags_read_from_cpuinfo(tmp_path):
    """The bf16 units come from the CPU's flags line (avx512_bf16, amx_bf16); none without them or
    without a readable file."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 amx_tile amx_bf16\n")
    assert cpu_bf16_flags(cpuinfo) == ["avx512_bf16", "amx_bf16"]
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n")
    assert cpu_bf16_flags(cpuinfo) == []
    assert cpu_bf16_flags(tmp_path / "absent") == []


def test_auto_picks_per_device_cpu_units_and_network():
    """auto: bfloat16 learning (float32 acting) for a conv network on a CPU with bf16 units; float32
    without the units or without convolutions; float16 learning with a gradient scaler on CUDA."""
    with_units = resolve_precision("auto", "cpu", has_convolutions=True, bf16_flags=["avx512_bf16"])
    assert (with_units.dtype, with_units.act_dtype) == (torch.bfloat16, None)
    assert "avx512_bf16" in with_units.describe() and "learning in bfloat16, acting in float32" in with_units.describe()
    assert resolve_precision("auto", "cpu", True, bf16_flags=[]).dtype is None
    assert resolve_precision("auto", "cpu", False, bf16_flags=["amx_bf16"]).dtype is None
    cuda = resolve_precision("auto", "cuda", True)
    assert (cuda.dtype, cuda.act_dtype, cuda.scales_gradients) == (torch.float16, None, True)
    assert resolve_precision("float32", "cuda").dtype is None


def test_explicit_settings_and_their_warnings():
    """bfloat16 is bfloat16 for learning and acting (a warning on a CPU without bf16 units; a network
    without convolutions is told it computes in float32); float16
    on a CPU (CPU collectors of a CUDA learner) does what auto does there, with a warning; an
    unknown setting is refused naming the choices."""
    assert resolve_precision("bfloat16", "cpu", bf16_flags=["avx512_bf16"]).act_dtype == torch.bfloat16
    assert "this network has none" in resolve_precision("bfloat16", "cpu", False, bf16_flags=["avx512_bf16"]).describe()
    with pytest.warns(UserWarning, match="emulated"):
        assert resolve_precision("bfloat16", "cpu", bf16_flags=[]).dtype == torch.bfloat16
    with pytest.warns(UserWarning, match="float16 is for CUDA"):
        assert resolve_precision("float16", "cpu", True, bf16_flags=["avx512_bf16"]).dtype == torch.bfloat16
    with pytest.warns(UserWarning, match="float16 is for CUDA"):
        assert resolve_precision("float16", "cpu", True, bf16_flags=[]).dtype is None
    assert resolve_precision("float16", "cuda").scales_gradients
    with pytest.raises(ConfigError, match="auto, float32, bfloat16, float16"):
        resolve_precision("fp16", "cpu")


def test_config_refuses_an_unknown_precision():
    """performance.precision is checked with the rest of the configuration, before any work."""
    config = load_graph_manager("cartpole_iqn").config
    config.performance.precision = "half"
    with pytest.raises(ConfigError, match="performance.precision: must be one of 'auto', 'float32', 'bfloat16', 'float16'"):
        validate_config(config)


def _bfloat16(agent: Agent) -> None:
    agent.precision = Precision("bfloat16", "cpu", torch.bfloat16, torch.bfloat16, "test")


def test_bfloat16_keeps_values_targets_loss_and_priorities_float32():
    """Under bfloat16 autocast the quantile values, targets, loss and priority errors are float32,
    the weights and their gradients stay float32, acting returns float32 Q-values, and one update
    moves the weights."""
    agent, env = small_sim_agent()
    fill_from_sim(agent, env, 120)
    _bfloat16(agent)
    batch = agent.memory.sample(16, agent.gamma())
    with agent.precision.autocast():
        predicted, targets, _, _ = agent.quantiles(batch)
        out = agent.compute_loss(batch)
    assert predicted.dtype == targets.dtype == out.loss.dtype == out.priority_errors.dtype == torch.float32
    before = [p.detach().clone() for p in agent.online_parameters]
    stats = agent.learn_from_batch(batch)
    assert np.isfinite(stats["loss"]) and stats["grad_norm"] > 0
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in agent.online_parameters)
    assert any(not torch.equal(a, p) for a, p in zip(before, agent.online_parameters))
    obs, _ = env.reset(seed=1)
    info = agent.act({k: v[None] for k, v in obs.items()}, RunPhase.TRAIN)
    assert info.q_values.dtype == np.float32 and np.isfinite(info.q_values).all()


def test_float16_gradient_scaler_steps_and_is_checkpointed():
    """float16's path (CUDA's, run here on the CPU's float16 autocast): the loss is scaled for
    backward, gradients unscaled before clipping, the step taken; the scaler's state goes into the
    checkpoint and comes back."""
    agent = small_agent()
    agent.precision = Precision("float16", "cpu", torch.float16, None, "test")
    agent.grad_scaler = gradient_scaler(agent.precision)
    rng = np.random.default_rng(0)
    for t in range(40):
        s = {"observation": rng.uniform(-1, 1, 3).astype(np.float32)}
        agent.observe(s, t % 2, True, float(t % 2), s, True, False)
    before = [p.detach().clone() for p in agent.online_parameters]
    stats = agent.learn_from_batch(agent.sample_batch())
    assert np.isfinite(stats["loss"])
    assert any(not torch.equal(a, p) for a, p in zip(before, agent.online_parameters))
    assert stats["grad_norm"] < 1e3  # unscaled (the scale starts at 65536)
    state = agent.state_dict(include_memory=False)
    assert state["grad_scaler"]["scale"] == agent.grad_scaler.get_scale()
    other = small_agent()
    other.precision, other.grad_scaler = agent.precision, gradient_scaler(agent.precision)
    state["grad_scaler"]["scale"] = 1024.0
    other.load_state_dict(state)
    assert other.grad_scaler.get_scale() == 1024.0


def test_conv_weights_are_channels_last_in_both_networks_and_after_loading():
    """The conv weights are channels_last (Linesight's layout) in the online and target networks, and
    stay so when a checkpoint's weights are loaded; in-place activations everywhere."""
    agent, _ = small_sim_agent()
    convs = [m for net in (agent.online_network, agent.target_network) for m in net.modules()
             if isinstance(m, torch.nn.Conv2d)]
    assert convs and all(m.weight.is_contiguous(memory_format=torch.channels_last) for m in convs)
    agent.load_state_dict(agent.state_dict(include_memory=False))
    assert all(m.weight.is_contiguous(memory_format=torch.channels_last) for m in convs)
    assert all(m.inplace for m in agent.online_network.modules() if isinstance(m, torch.nn.LeakyReLU))


def test_precision_setting_reaches_the_agent():
    """-cp performance.precision=float32 gives a float32 agent whatever the CPU."""
    config = apply_overrides(load_graph_manager("trackmania_iqn_sim").config, overrides=["performance.precision=float32"])
    agent, _ = small_sim_agent(**{"performance.precision": config.performance.precision})
    assert agent.precision.dtype is None and agent.precision.act_dtype is None
