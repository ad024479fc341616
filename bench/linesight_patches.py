"""What ``bench/vs_linesight_training.py`` changes in its temporary copy of Linesight, in one place.

Linesight's code never enters this repository: the bench copies a checkout the user gives and changes
the copy only through what this module lists.

* :data:`PATCHES`: exact text substitutions into Linesight's code, each with the reason a CPU-only
  Linux machine needs it. Every one must match exactly once (:func:`apply_patch` raises
  :class:`PatchError` otherwise), so a changed Linesight fails loudly instead of silently running
  something else.
* :func:`config_block`: Linesight's ``user_config`` / ``config`` *values* (appended as plain
  assignments after its own, so that they win): map cycle, game count, network sizes, paths, ports.
* :data:`SHIMS`: two small modules put first on the copy's ``PYTHONPATH`` in place of packages that
  need a desktop or real map files: ``xdo`` (the X11 window lookup of the game) and ``pygbx`` (the
  ``.Gbx`` reads that hide the personal-record ghost and find the real checkpoints).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class PatchError(RuntimeError):
    """A substitution did not match exactly once: the Linesight checkout is not the one the bench knows."""


@dataclass(frozen=True)
class Patch:
    """Replace ``old`` (which must occur exactly once in ``path``) with ``new``; ``why`` says why."""

    path: str
    old: str
    new: str
    why: str


_CPU = "there is no CUDA device on a CPU-only machine"

PATCHES: tuple[Patch, ...] = (
    # --- device: every tensor and network Linesight puts on "cuda" goes to the CPU instead
    Patch("trackmania_rl/agents/iqn.py",
          'self.float_inputs_mean = torch.tensor(float_inputs_mean, dtype=torch.float32).to("cuda")',
          'self.float_inputs_mean = torch.tensor(float_inputs_mean, dtype=torch.float32).to("cpu")', _CPU),
    Patch("trackmania_rl/agents/iqn.py",
          'self.float_inputs_std = torch.tensor(float_inputs_std, dtype=torch.float32).to("cuda")',
          'self.float_inputs_std = torch.tensor(float_inputs_std, dtype=torch.float32).to("cpu")', _CPU),
    Patch("trackmania_rl/agents/iqn.py",
          'torch.arange(num_quantiles // 2, device="cuda", dtype=torch.float32)',
          'torch.arange(num_quantiles // 2, device="cpu", dtype=torch.float32)', _CPU),
    Patch("trackmania_rl/agents/iqn.py",
          'torch.rand(size=(batch_size * num_quantiles // 2, 1), device="cuda", dtype=torch.float32)',
          'torch.rand(size=(batch_size * num_quantiles // 2, 1), device="cpu", dtype=torch.float32)', _CPU),
    Patch("trackmania_rl/agents/iqn.py",
          'torch.arange(1, self.iqn_embedding_dimension + 1, 1, device="cuda")',
          'torch.arange(1, self.iqn_embedding_dimension + 1, 1, device="cpu")', _CPU),
    Patch("trackmania_rl/agents/iqn.py",
          '.to("cuda", memory_format=torch.channels_last, non_blocking=True, dtype=torch.float32)',
          '.to("cpu", memory_format=torch.channels_last, non_blocking=True, dtype=torch.float32)', _CPU),
    Patch("trackmania_rl/agents/iqn.py",
          'torch.from_numpy(np.expand_dims(float_inputs, axis=0)).to("cuda", non_blocking=True)',
          'torch.from_numpy(np.expand_dims(float_inputs, axis=0)).to("cpu", non_blocking=True)', _CPU),
    Patch("trackmania_rl/agents/iqn.py",
          'model.to(device="cuda", memory_format=torch.channels_last).train(),\n'
          '        uncompiled_model.to(device="cuda", memory_format=torch.channels_last).train(),',
          'model.to(device="cpu", memory_format=torch.channels_last).train(),\n'
          '        uncompiled_model.to(device="cpu", memory_format=torch.channels_last).train(),', _CPU),
    Patch("trackmania_rl/buffer_utilities.py",
          'non_blocking=True, device="cuda", memory_format=',
          'non_blocking=True, device="cpu", memory_format=', _CPU + " (the sampled batch stays in memory)"),
    Patch("trackmania_rl/multiprocess/learner_process.py",
          'tau = torch.linspace(0.05, 0.95, config_copy.iqn_k)[:, None].to("cuda")',
          'tau = torch.linspace(0.05, 0.95, config_copy.iqn_k)[:, None].to("cpu")', _CPU),
    # --- pinned memory: page-locking needs a CUDA driver
    Patch("trackmania_rl/buffer_utilities.py",
          "torch.empty(size=shape, dtype=data_type, pin_memory=True)",
          "torch.empty(size=shape, dtype=data_type, pin_memory=False)",
          "pinned (page-locked) memory needs a CUDA driver; it only speeds up copies to a GPU"),
    # --- buffer dtypes and mixed precision: float16 is a GPU format
    Patch("trackmania_rl/buffer_utilities.py",
          "state_img = (state_img.to(torch.float16) - 128) / 128",
          "state_img = (state_img.to(torch.float32) - 128) / 128",
          "the sampled frames are float16 for the GPU's autocast; without CUDA autocast is off (below) and a "
          "float32 network cannot take float16 inputs"),
    Patch("trackmania_rl/buffer_utilities.py",
          "next_state_img = (next_state_img.to(torch.float16) - 128) / 128",
          "next_state_img = (next_state_img.to(torch.float32) - 128) / 128",
          "as state_img: float32 frames for a float32 network"),
    Patch("trackmania_rl/agents/iqn.py",
          'with torch.amp.autocast(device_type="cuda", dtype=torch.float16):',
          'with torch.amp.autocast(device_type="cpu", enabled=False):',
          "float16 autocast is CUDA's; the CPU learns in float32 (rulka's stand-in configuration does too)"),
    Patch("trackmania_rl/multiprocess/learner_process.py",
          'scaler = torch.amp.GradScaler("cuda")',
          'scaler = torch.amp.GradScaler("cpu", enabled=False)',
          "the float16 loss scaler is only needed with float16 autocast, which is off on the CPU"),
    # --- compile: inductor's max-autotune modes target GPUs
    Patch("trackmania_rl/agents/iqn.py",
          "@torch.compile(disable=not config_copy.is_linux, dynamic=False)",
          "@torch.compile(disable=True, dynamic=False)",
          "torch.compile of the loss on Linux builds C++ kernels at the first batch (minutes on 2 cores, "
          "needs a compiler); the network's own compile is off through the config value use_jit = False"),
    # --- packages: PyPI's torchvision wheel for this torch cannot load its ops beside the CPU build of torch
    Patch("trackmania_rl/buffer_utilities.py",
          "import torchvision.transforms.v2 as transforms\n",
          "transforms = None  # rulka bench: torchvision left out (only used when apply_randomcrop_augmentation)\n",
          "the torchvision 0.28.0 wheel pip installs beside torch 2.13.0+cpu (PyPI's, not a +cpu build) fails to "
          "import ('operator torchvision::nms does not exist'); Linesight uses it only for the random-crop "
          "augmentation, off by default"),
)


def apply_patch(text: str, patch: Patch) -> str:
    """``text`` with ``patch.old`` replaced by ``patch.new``.

    Raises:
        PatchError: ``patch.old`` occurs 0 or more than 1 times (the message names the file and count).
    """
    count = text.count(patch.old)
    if count != 1:
        raise PatchError(
            f"{patch.path}: the text to replace occurs {count} times, not exactly once:\n  {patch.old!r}\n"
            "This Linesight checkout differs from the one the bench was written for (Linesight-RL/linesight "
            "at 83656d35); update bench/linesight_patches.py for it, or check out that commit.")
    return text.replace(patch.old, patch.new, 1)


def apply_patches(root: str | Path, patches: tuple[Patch, ...] = PATCHES) -> list[str]:
    """Apply ``patches`` to the files under ``root`` (the copy); all are checked before any file is
    written. Returns one line per patch (``path: why``)."""
    root = Path(root)
    texts: dict[str, str] = {}
    for patch in patches:
        file = root / patch.path
        if patch.path not in texts:
            if not file.is_file():
                raise PatchError(f"{patch.path}: no such file in {root}; is this a Linesight checkout?")
            texts[patch.path] = file.read_text(encoding="utf-8")
        texts[patch.path] = apply_patch(texts[patch.path], patch)
    for path, text in texts.items():
        (root / path).write_text(text, encoding="utf-8")
    return [f"{p.path}: {p.why}" for p in patches]


def conv_output_dim(height: int, width: int) -> int:
    """Features out of Linesight's image head (Conv k4 s2, k4 s2, k3 s2, k3 s1, 32 channels, no padding)."""
    for kernel, stride in ((4, 2), (4, 2), (3, 2), (3, 1)):
        height, width = (height - kernel) // stride + 1, (width - kernel) // stride + 1
    if height < 1 or width < 1:
        raise ValueError("frames too small for Linesight's image head")
    return 32 * height * width


def config_block(values: dict[str, str]) -> str:
    """Python assignments ``NAME = EXPRESSION`` appended to a config file (values given as source text)."""
    lines = ["", "", "# --- values set by rulka's bench/vs_linesight_training.py (after Linesight's own, so they win)"]
    lines += [f"{name} = {expression}" for name, expression in values.items()]
    return "\n".join(lines) + "\n"


def set_config_values(root: str | Path, user_values: dict[str, str], run_values: dict[str, str]) -> None:
    """Append ``user_values`` to ``config_files/user_config.py`` and ``run_values`` to ``config_files/config.py``."""
    root = Path(root)
    for name, values in (("user_config.py", user_values), ("config.py", run_values)):
        file = root / "config_files" / name
        if not file.is_file():
            raise PatchError(f"config_files/{name}: no such file in {root}; is this a Linesight checkout?")
        file.write_text(file.read_text(encoding="utf-8") + config_block(values), encoding="utf-8")


_XDO = '''"""rulka bench shim of python-libxdo: the stand-in game has no X11 window.

Each stand-in game (a process named TmForever...) is its own "window": search_windows finds them one
level below the root, as the real game's window is found, and the window id is the process id.
"""
import psutil


def _games():
    out = []
    for p in psutil.process_iter(["name"]):
        if (p.info.get("name") or "").startswith("TmForever"):
            out.append(p.pid)
    return out


class Xdo:
    def search_windows(self, winname=b"", max_depth=None, **_):
        return _games() if max_depth is None or max_depth >= 2 else []

    def get_pid_window(self, window):
        return window

    def activate_window(self, window):
        pass

    def map_window(self, window):
        pass
'''

_PYGBX = '''"""rulka bench shim of pygbx: the stand-in's maps are simulator tracks, not .Gbx files.

Gbx(PATH) reads PATH as a .npy of checkpoint world positions (N, 3) that the bench wrote for the
track (from the stand-in's own checkpoints), and shows them as checkpoint blocks of a challenge
(block coordinates: world = block * (32, 8, 32) + (16, 0, 16), as Linesight's map_loader computes).
"""
import os
from enum import IntEnum

import numpy as np


class GbxType(IntEnum):
    CHALLENGE = 0x03043000
    CHALLENGE_OLD = 0x24003000
    CTN_GHOST = 0x03092000


class _Position:
    def __init__(self, xyz):
        self.xyz = np.asarray(xyz, dtype=float)

    def as_array(self):
        return self.xyz


class _Block:
    def __init__(self, name, xyz):
        self.name = name
        self.position = _Position(xyz)


class _Challenge:
    def __init__(self, path):
        self.map_name = os.path.basename(path)
        world = np.load(path, allow_pickle=False) if os.path.isfile(path) else np.zeros((0, 3))
        blocks = (np.asarray(world, dtype=float) - np.array([16.0, 0.0, 16.0])) / np.array([32.0, 8.0, 32.0])
        self.blocks = [_Block("StadiumCheckpointRingV", b) for b in blocks]


class Gbx:
    def __init__(self, path):
        self.path = str(path)

    def get_class_by_id(self, class_id):
        return _Challenge(self.path) if class_id in (GbxType.CHALLENGE, GbxType.CHALLENGE_OLD) else None

    def get_classes_by_ids(self, class_ids):
        if GbxType.CHALLENGE in class_ids or GbxType.CHALLENGE_OLD in class_ids:
            return [_Challenge(self.path)]
        return []
'''

#: Module files written under the copy's shim folder (first on its PYTHONPATH), by relative path.
SHIMS: dict[str, str] = {"xdo.py": _XDO, "pygbx/__init__.py": _PYGBX}


def write_shims(folder: str | Path) -> Path:
    """Write :data:`SHIMS` into ``folder``; returns it (put it first on the copy's PYTHONPATH)."""
    folder = Path(folder)
    for name, text in SHIMS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder
