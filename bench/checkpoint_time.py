"""Time of one checkpoint of the ``trackmania_iqn_sim`` preset with a full replay memory.

    python bench/checkpoint_time.py [--dir DIR] [--repeats 3]

The memory (50,000 slots of 48 x 64 frames and floats, the preset's first capacity) is filled
with random data; the graph manager's state is then written with the checkpoint format used up to
commit b3cd967 ("before": the memory pickled inside ``last.pt`` by ``torch.save``) and with
:func:`rulka.checkpoints.save_atomic` ("after": the memory's arrays as ``.npy`` files beside a
small ``last.pt``, sha256 of everything, previous checkpoint kept). Both write to ``--dir``
(default: a temporary folder) and fsync. Printed: median wall time of ``state_dict()``, of the
write and of the load (the "after" load verifies every checksum), and the bytes on disk.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from rulka import checkpoints
from rulka.presets import load_graph_manager


def save_before(state: dict, path: Path) -> None:
    """The checkpoint writer of commit b3cd967: one torch.save of everything, fsync, rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_before(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def fill_memory(memory, rng: np.random.Generator) -> None:
    """Every slot of ``memory`` holds random data, as after 50k stored actions.

    Works on the ring buffer itself or on a replay that holds one as ``storage``: every array whose
    first dimension is the capacity is filled, and the fill level is set to the capacity.
    """
    storage = getattr(memory, "storage", memory)
    arrays = list(storage.states.values()) + [v for v in vars(storage).values()
                                              if isinstance(v, np.ndarray) and v.shape[:1] == (storage.capacity,)]
    for array in arrays:
        if array.dtype == np.uint8:
            array[:] = rng.integers(0, 256, array.shape, dtype=np.uint8)
        elif array.dtype == bool:
            array[:] = True
        elif array.dtype.kind in "iu":
            array[:] = rng.integers(0, 12, array.shape)
        else:
            array[:] = rng.standard_normal(array.shape).astype(array.dtype)
    for name in ("size", "_size"):
        if hasattr(storage, name):
            setattr(storage, name, storage.capacity)
    for name in ("cursor", "_cursor"):
        if hasattr(storage, name):
            setattr(storage, name, 0)


def disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="folder to write the checkpoints in (default: a temporary folder)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    gm = load_graph_manager("trackmania_iqn_sim")
    gm.create(None, "cpu", 0)
    fill_memory(gm.agent.memory, np.random.default_rng(0))
    memory = gm.agent.memory
    storage = getattr(memory, "storage", memory)
    frame_shape = storage.states["frame"].shape if "frame" in storage.states else None
    print(f"memory: {storage.capacity} slots, frames {frame_shape}, {memory.nbytes() / 1e6:.0f} MB of arrays")
    base = Path(args.dir or tempfile.mkdtemp(prefix="rulka_ckpt_bench_"))
    results = {}
    for label, save, load in (("before", save_before, load_before),
                              ("after", checkpoints.save_atomic, checkpoints.load_checkpoint)):
        folder = base / label
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / checkpoints.LAST
        t_state, t_save, t_load = [], [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            state = gm.state_dict()
            t1 = time.perf_counter()
            save(state, path)
            t2 = time.perf_counter()
            del state
            loaded = load(path)
            t3 = time.perf_counter()
            del loaded
            t_state.append(t1 - t0)
            t_save.append(t2 - t1)
            t_load.append(t3 - t2)
        results[label] = (statistics.median(t_state), statistics.median(t_save), statistics.median(t_load),
                          path.stat().st_size, disk_bytes(folder))
    print(f"{'format':<8} {'state_dict s':>12} {'write s':>8} {'load s':>7} {'last.pt MB':>10} {'folder MB':>9}")
    for label, (ts, tw, tl, size, total) in results.items():
        print(f"{label:<8} {ts:>12.2f} {tw:>8.2f} {tl:>7.2f} {size / 1e6:>10.1f} {total / 1e6:>9.1f}")
    print(f"(median of {args.repeats}; 'after' keeps the previous checkpoint too, so its folder holds two)")


if __name__ == "__main__":
    main()
