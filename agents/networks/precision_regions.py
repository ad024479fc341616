"""Where bfloat16 autocast (``performance.precision``) applies inside a network: the convolutions only.

The agent opens autocast around each forward pass. Under bfloat16, every layer but the
convolutions runs inside :func:`without_bfloat16`, in float32: the float inputs' MLP, the quantile
embedding and the heads. bfloat16 keeps 8 bits of mantissa (a resolution of 1/256 of a value).
Measured (issue 23, ``short`` seed 0, 30 minutes a run, docs/benchmarks.md "Only the convolutions
in bfloat16"): with every layer in bfloat16 the best greedy race ended at 0.926-0.942 of the tuned
driver in three runs, float32 at 0.871 and 0.876; with only the convolutions in bfloat16, 0.871 and
0.882; with the convolutions and the heads' hidden layers in bfloat16 (the quantile embedding and
the heads' output layers in float32), 0.968. The price is speed: end to end the sim preset plays
0.88x the actions/s of every layer in bfloat16, and at Linesight's shape (a 1024-wide head on
512 x 8 rows) an update runs 1.07x float32's where every layer in bfloat16 ran 2.4x.
float16 autocast (11 bits, Linesight's GPU training) covers every layer
but the heads' output layers (:mod:`agents.networks.heads`).
"""
from __future__ import annotations

import contextlib

import torch


def without_bfloat16(like: torch.Tensor) -> contextlib.AbstractContextManager:
    """Inside the block, bfloat16 autocast on ``like``'s device is off (other autocast dtypes and no
    autocast: nothing changes). Tensors that enter the block in bfloat16 must be cast with ``.float()``."""
    device_type = like.device.type
    if not torch.is_autocast_enabled(device_type) or torch.get_autocast_dtype(device_type) != torch.bfloat16:
        return contextlib.nullcontext()
    return torch.autocast(device_type, enabled=False)
