"""Mixed precision (``performance.precision``): the dtype the networks compute in, per device.

* ``float32``: no autocast; every value in float32.
* ``bfloat16``: ``torch.autocast(dtype=bfloat16)`` around the forward passes, learning and acting
  (the collectors' inference: :meth:`agents.agent.Agent.act`); inside the networks only the
  convolutions compute in bfloat16, every other layer in float32
  (:mod:`agents.networks.precision_regions` says why). On a CPU it pays only with bf16 units
  (``avx512_bf16`` or ``amx_bf16``); without them it is emulated, slower than float32 (asked for
  explicitly it runs, with a warning). A network without convolutions computes all in float32.
* ``float16``: float16 autocast with a gradient scaler, as Linesight trains on its GPUs. CUDA's: on a
  CPU (CPU collectors of a CUDA learner) it means what ``auto`` means there, with a warning.
* ``auto``, what measured fastest without hurting learning (``bench/update_speed.py``, AMD EPYC
  with avx512_bf16, 1 thread):
  - learning on a CPU with bf16 units, for a network with convolutions: bfloat16 (1.2-1.3x the
    float32 updates/s at the sim preset's shape, 1.07x at Linesight's; every layer in bfloat16 ran
    faster, 1.4x and 2.4x, but learned worse); for an MLP-only network float32 (bfloat16 has nothing to compute there);
  - acting on a CPU: float32 (bfloat16 ran 0.6-1.0x on batches of 1-8 observations);
  - CUDA: learning in float16 with a gradient scaler, acting in float32, as Linesight;
  - any other device or CPU: float32.

What stays float32 whatever the setting: the weights, gradients and optimizer state (autocast casts
copies); the inputs' normalisation; the quantile values themselves (the head's last layers run in
float32 on the low-precision hidden features, :class:`agents.networks.heads.QHead`; under bfloat16
every layer after the convolutions does), hence the targets, the TD errors, the loss and the replay
priorities; the replay stores uint8 frames and float32 floats as before.
"""
from __future__ import annotations

import contextlib
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from rulka.config import ConfigError
from rulka.machine import CPUINFO, cpu_flags

PRECISIONS = ("auto", "float32", "bfloat16", "float16")
_DTYPES = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}
#: CPU flags (``/proc/cpuinfo``) of bf16 arithmetic units.
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")

log = logging.getLogger(__name__)


def cpu_bf16_flags(cpuinfo: str | Path = CPUINFO) -> list[str]:
    """The bf16 unit flags this CPU reports (empty where there are none or nothing to read)."""
    return cpu_flags(BF16_CPU_FLAGS, cpuinfo)


@dataclass(frozen=True)
class Precision:
    """A resolved ``performance.precision``: the autocast dtype of learning and of acting (None: float32)."""

    setting: str
    device_type: str
    dtype: torch.dtype | None
    act_dtype: torch.dtype | None
    reason: str

    @property
    def name(self) -> str:
        return _name(self.dtype)

    @property
    def scales_gradients(self) -> bool:
        """float16 needs a gradient scaler (its range underflows small gradients); bfloat16 does not."""
        return self.dtype == torch.float16

    def autocast(self) -> contextlib.AbstractContextManager:
        """The context of the learner's forward passes."""
        return _autocast(self.device_type, self.dtype)

    def act_autocast(self) -> contextlib.AbstractContextManager:
        """The context of acting's forward passes (the collectors' inference)."""
        return _autocast(self.device_type, self.act_dtype)

    def describe(self) -> str:
        return (f"learning in {self.name}, acting in {_name(self.act_dtype)} on {self.device_type} "
                f"(performance.precision: {self.setting}; {self.reason})")


def _name(dtype: torch.dtype | None) -> str:
    return "float32" if dtype is None else str(dtype).removeprefix("torch.")


def _autocast(device_type: str, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext() if dtype is None else torch.autocast(device_type, dtype=dtype)


def resolve_precision(setting: str, device: torch.device | str, has_convolutions: bool = True,
                      bf16_flags: list[str] | None = None) -> Precision:
    """What ``setting`` means on ``device`` for a network with or without convolutions.
    ``bf16_flags`` (default: read from the CPU) is for tests. Raises ConfigError for an unknown setting."""
    device_type = torch.device(device).type
    if setting not in PRECISIONS:
        raise ConfigError(f"performance.precision: {setting!r} is not a precision; use one of {', '.join(PRECISIONS)}")
    if device_type == "cuda":
        if setting == "auto":
            return Precision(setting, device_type, torch.float16, None,
                             "CUDA: float16 with a gradient scaler for learning, as Linesight")
        return Precision(setting, device_type, _DTYPES[setting], _DTYPES[setting], _as_configured(setting, has_convolutions))
    if device_type != "cpu":
        if setting in ("auto", "float32"):
            return Precision(setting, device_type, None, None, f"no mixed precision on {device_type}")
        raise ConfigError(f"performance.precision: {setting} is for cpu or cuda, not {device_type}; use auto or float32")
    flags = cpu_bf16_flags() if bf16_flags is None else bf16_flags
    if setting == "float16":  # (float16 on a CPU is emulated, slow: the CPU's best instead)
        cpu = resolve_precision("auto", device, has_convolutions, flags)
        warnings.warn(f"performance.precision: float16 is for CUDA; on the CPU {cpu.name} ({cpu.reason})", stacklevel=2)
        return Precision(setting, device_type, cpu.dtype, cpu.act_dtype, f"float16 is for CUDA; {cpu.reason}")
    if setting == "auto":
        if not flags:
            return Precision(setting, device_type, None, None, "the CPU has no bf16 units (avx512_bf16 / amx_bf16)")
        if not has_convolutions:
            return Precision(setting, device_type, None, None,
                             f"the CPU has {' and '.join(flags)}, but bfloat16 applies to convolutions only and "
                             "this network has none")
        return Precision(setting, device_type, torch.bfloat16, None,
                         f"the CPU has {' and '.join(flags)}; acting stays float32, faster on small batches")
    if setting == "bfloat16" and not flags:
        warnings.warn("performance.precision: bfloat16 on a CPU without bf16 units (avx512_bf16 / amx_bf16) is "
                      "emulated, slower than float32; use auto or float32", stacklevel=2)
        return Precision(setting, device_type, torch.bfloat16, torch.bfloat16, "as configured; the CPU has no bf16 units")
    return Precision(setting, device_type, _DTYPES[setting], _DTYPES[setting], _as_configured(setting, has_convolutions))


def _as_configured(setting: str, has_convolutions: bool) -> str:
    if setting == "bfloat16" and not has_convolutions:
        return "as configured; bfloat16 applies to convolutions only and this network has none: it computes in float32"
    return "as configured"


def gradient_scaler(precision: Precision) -> torch.amp.GradScaler | None:
    """A gradient scaler for float16 (None otherwise)."""
    return torch.amp.GradScaler(precision.device_type) if precision.scales_gradients else None
