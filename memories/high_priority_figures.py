"""PNG figures of the transitions with the highest priority in a prioritized replay.

Linesight's ``make_highest_prio_figures``: at checkpoint time, for each of the ``top`` slots of
highest priority ``i``, the slots ``i - 4 .. i + 5`` are saved as one image each: the state frame
and the (n-step) next-state frame side by side, upscaled 4x, named
``{high_error_idx}_{idx}_{n_steps}_{priority:.2f}.png`` where ``n_steps`` is the number of steps
the transition of slot ``idx`` spans and ``priority`` is its priority.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from memories.assemblers import NStepAssembler
from memories.replay import Replay

#: Slots saved around each high-priority slot: ``i + offset`` for each offset.
WINDOW_OFFSETS = np.arange(-4, 6)
UPSCALE = 4


def write_highest_priority_figures(
    memory: Replay,
    out_dir: str | Path,
    top: int = 20,
    frame_key: str = "frame",
    clear: bool = True,
) -> list[Path]:
    """Save the frames around the ``top`` highest-priority slots of ``memory`` as PNG files.

    Args:
        memory: the prioritized replay.
        out_dir: folder of the images (created); the agent passes ``run_dir / "high_prio_figures"``.
        top: number of highest-priority slots.
        frame_key: the observation holding the image, of shape (H, W), (1, H, W), (3, H, W)
            (RGB, channels first) or (K, H, W) (a stack: the last frame is drawn).
        clear: delete the ``*.png`` files already in ``out_dir`` first (names carry priorities,
            so a previous call's files would otherwise stay mixed with the new ones).

    Returns:
        The paths written, in order of decreasing priority of their ``high_error_idx``. Empty
        (and nothing touched on disk) when the memory has no ``frame_key`` observation, is not
        prioritized, or has no slot that can be sampled. Slots of a window that are not ready
        (no action, open n-step window, empty) are skipped.
    """
    if frame_key not in memory.states or not memory.prioritized:
        return []
    priorities = memory.priorities
    candidates = np.flatnonzero(priorities > 0.0)
    if candidates.size == 0:
        return []
    best = candidates[np.argsort(priorities[candidates], kind="stable")[::-1][:top]]  # (T,) highest first

    # (T, W) slots around each high-priority slot; wrap around the ring only once it is full
    window = best[:, None] + WINDOW_OFFSETS[None, :]
    if memory.num_slots_used >= memory.capacity:
        window %= memory.capacity
        valid = np.ones(window.shape, dtype=bool)
    else:
        valid = (window >= 0) & (window < memory.num_slots_used)
    valid &= memory.ready[np.where(valid, window, 0)]
    owners = np.broadcast_to(best[:, None], window.shape)[valid]  # (M,) high_error_idx of each image
    slots = window[valid]  # (M,)
    if slots.size == 0:
        return []

    # the plain n-step transitions: the memory's own assembler may draw random numbers (mini-race
    # clocks) and rewrite the states, which would perturb training and the checkpointed generator
    plain = NStepAssembler(memory.storage.n_steps, memory.assembler.discard_non_greedy)
    sampled = plain.assemble(memory.storage, slots, None, 1.0, memory.rng, torch.device("cpu"))
    states = _as_image(sampled.states[frame_key].numpy())  # (M, H, W[, 3]) uint8
    next_states = _as_image(sampled.next_states[frame_key].numpy())
    pairs = np.concatenate([states, next_states], axis=2)  # side by side: (M, H, 2W[, 3])
    pairs = pairs.repeat(UPSCALE, axis=1).repeat(UPSCALE, axis=2)

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if clear:
        for old in out_dir.glob("*.png"):
            old.unlink()
    written = []
    for owner, slot, n_steps, priority, image in zip(owners, slots, sampled.steps_used, priorities[slots], pairs):
        path = out_dir / f"{owner}_{slot}_{n_steps}_{priority:.2f}.png"
        Image.fromarray(image).save(path)
        written.append(path)
    return written


def _as_image(frames: np.ndarray) -> np.ndarray:
    """(M, H, W) or (M, H, W, 3) uint8 images of (M, ...) frames (see ``frame_key``); non-uint8 frames are
    rescaled from their [min, max] over the batch to [0, 255]."""
    if frames.ndim == 4:  # (M, C, H, W)
        frames = frames.transpose(0, 2, 3, 1) if frames.shape[1] == 3 else frames[:, -1]
    elif frames.ndim != 3:
        raise ValueError(f"cannot draw frames of shape {frames.shape[1:]}: expected (H, W) or (C, H, W)")
    if frames.dtype == np.uint8:
        return np.ascontiguousarray(frames)
    frames = frames.astype(np.float64)
    low, high = frames.min(), frames.max()
    scaled = (frames - low) / (high - low) * 255.0 if high > low else np.zeros_like(frames)
    return np.ascontiguousarray(scaled.round().astype(np.uint8))
