"""Checkpoints: previous one kept, checksums, fallback on damage, memory arrays as .npy, full disk."""
from __future__ import annotations

import errno
import logging
import sys

import numpy as np
import pytest
import torch

from rulka import checkpoints
from rulka.checkpoints import (CheckpointError, CheckpointWriteError, load_checkpoint, previous_path, save_atomic,
                               verify_checkpoint)

pytestmark = pytest.mark.reliability

FRAMES = (200, 1, 48, 64)  # 600 kB of uint8: above ARRAY_MIN_BYTES


def make_state(seed: int) -> dict:
    """A state laid out as GraphManager.state_dict(): network tensors, scalars, and a memory of
    torch tensors (ExperienceReplay.state_dict), plus a numpy-based test memory."""
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, FRAMES, dtype=np.uint8)
    return {
        "agent": {
            "online_network": {"w": torch.full((4, 4), float(seed))},
            "counters": {"env_steps": 1000 * seed},
            "memory": {
                "capacity": 300, "cursor": 7, "size": 200, "pending": [5, 6],
                "states": {"frame": torch.from_numpy(frames), "float": torch.from_numpy(rng.random((200, 3), dtype=np.float32))},
                "actions": torch.from_numpy(rng.integers(0, 12, 20_000)),
                "rewards": torch.zeros(10, dtype=torch.float32),
            },
            "test_memory": {"frames": frames[:150].copy(), "size": np.int64(150), "pairs": (frames[:120].copy(), 3)},
        },
        "graph_manager": {"seed": seed, "best_evaluation": None},
    }


def assert_same(a, b):
    if isinstance(a, dict):
        assert set(a) == set(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    else:
        assert a == b


def mapped_file(address: int) -> str:
    """The file mapped at ``address`` in this process ("" when anonymous memory), from /proc/self/maps."""
    for line in open("/proc/self/maps", encoding="utf-8"):
        fields = line.split()
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if start <= address < end:
            return fields[5] if len(fields) > 5 else ""
    return ""


def strip_info(state: dict) -> dict:
    return {k: v for k, v in state.items() if k != checkpoints.INFO_KEY}


def test_round_trip_stores_memory_arrays_as_memory_mapped_npy(tmp_path):
    """The memories' large arrays leave the .pt for .npy files, come back memory-mapped and equal;
    small values and the network stay in the payload; tuples and nested dicts keep their shape."""
    state = make_state(1)
    path = tmp_path / checkpoints.LAST
    save_atomic(state, path)
    arrays_dirs = list(tmp_path.glob("last.pt.arrays.*"))
    assert len(arrays_dirs) == 1
    names = sorted(p.name for p in arrays_dirs[0].iterdir())
    assert names == ["memory.actions.npy", "memory.states.frame.npy",  # states.float: 2.4 kB, stays in the .pt
                     "test_memory.frames.npy", "test_memory.pairs.0.npy"]
    assert path.stat().st_size < 20_000  # the frames are not pickled inside
    loaded = load_checkpoint(path)
    assert_same(state, strip_info(loaded))
    frame = loaded["agent"]["memory"]["states"]["frame"]
    if sys.platform.startswith("linux"):
        assert mapped_file(frame.data_ptr()).endswith("memory.states.frame.npy")
    assert isinstance(loaded["agent"]["test_memory"]["frames"], np.memmap)
    assert loaded[checkpoints.INFO_KEY] == {"path": str(path), "fell_back": False, "problems": [], "verified": True}


def test_previous_checkpoint_is_kept_and_old_arrays_removed(tmp_path):
    """Each save keeps the previous complete checkpoint as last.prev.pt; only two arrays folders remain."""
    path = tmp_path / checkpoints.LAST
    for seed in (1, 2, 3):
        save_atomic(make_state(seed), path)
    assert load_checkpoint(path)["graph_manager"]["seed"] == 3
    assert load_checkpoint(previous_path(path))["graph_manager"]["seed"] == 2
    assert len(list(tmp_path.glob("last.pt.arrays.*"))) == 2
    assert not list(tmp_path.glob(".*"))  # no temporary file or folder left


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "empty", "delete_npy", "truncate_npy", "flip_npy", "missing"])
def test_damaged_newest_checkpoint_falls_back_to_previous(tmp_path, caplog, damage):
    """A truncated, corrupted, empty or missing newest checkpoint (or one of its memory arrays) is
    detected; the previous checkpoint is loaded with a warning and the info says why."""
    path = tmp_path / checkpoints.LAST
    save_atomic(make_state(1), path)
    save_atomic(make_state(2), path)
    arrays = tmp_path / checkpoints._header_arrays_name(path)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip_byte":
        path.write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "missing":
        path.unlink()
    else:
        npy = arrays / "memory.states.frame.npy"
        if damage == "delete_npy":
            npy.unlink()
        elif damage == "truncate_npy":
            npy.write_bytes(npy.read_bytes()[:1000])
        else:
            raw = bytearray(npy.read_bytes())
            raw[-1] ^= 0x01
            npy.write_bytes(bytes(raw))
    assert verify_checkpoint(path) is not None
    with caplog.at_level(logging.WARNING, logger="rulka.checkpoints"):
        loaded = load_checkpoint(path)
    assert loaded["graph_manager"]["seed"] == 1
    assert_same(make_state(1), strip_info(loaded))
    info = loaded[checkpoints.INFO_KEY]
    assert info["fell_back"] and info["path"] == str(previous_path(path)) and info["problems"]
    assert "previous checkpoint" in caplog.text


def test_both_damaged_is_a_clear_error(tmp_path):
    """When the newest and the previous checkpoint are both damaged, the error names both problems."""
    path = tmp_path / checkpoints.LAST
    save_atomic(make_state(1), path)
    save_atomic(make_state(2), path)
    path.write_bytes(path.read_bytes()[:50])
    previous_path(path).write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match=r"last\.pt: .*last\.prev\.pt: not a checkpoint"):
        load_checkpoint(path)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "none.pt")


@pytest.mark.parametrize("where", ["array", "payload"])
def test_full_disk_during_write_leaves_previous_checkpoint_intact(tmp_path, monkeypatch, where):
    """ENOSPC while writing the memory arrays or the payload: a CheckpointWriteError (an OSError) that
    says the disk is full, no temporary file left, and the previous checkpoint still loads as newest."""
    path = tmp_path / checkpoints.LAST
    save_atomic(make_state(1), path)
    save_atomic(make_state(2), path)
    before = sorted(p.name for p in tmp_path.iterdir())

    if where == "array":
        real = checkpoints._write_array
        calls = []

        def failing(file, array):
            calls.append(file)
            if len(calls) == 2:  # after one array is on disk
                with open(file, "wb") as f:
                    f.write(b"\x93NUMPY partial")
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(file, array)

        monkeypatch.setattr(checkpoints, "_write_array", failing)
    else:
        real = checkpoints._write_file_durably

        def failing(target, header, payload):
            tmp = real(target, header, payload[: len(payload) // 2])
            tmp.unlink()
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(checkpoints, "_write_file_durably", failing)
    with pytest.raises(CheckpointWriteError, match="disk is full.*previous checkpoint is intact") as caught:
        save_atomic(make_state(3), path)
    assert isinstance(caught.value, OSError) and caught.value.errno == errno.ENOSPC
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    loaded = load_checkpoint(path)
    assert not loaded[checkpoints.INFO_KEY]["fell_back"]
    assert_same(make_state(2), strip_info(loaded))
    assert_same(make_state(1), strip_info(load_checkpoint(previous_path(path))))


def test_crash_between_rotation_and_replace_keeps_a_loadable_checkpoint(tmp_path, monkeypatch):
    """If the process dies after the previous checkpoint is rotated but before the new file replaces
    last.pt, last.pt is still the old complete checkpoint (hard link), and it loads."""
    path = tmp_path / checkpoints.LAST
    save_atomic(make_state(1), path)
    real_replace = checkpoints.os.replace

    def dying_replace(src, dst):
        if str(dst) == str(path):
            raise KeyboardInterrupt  # stands for a kill at this instant
        return real_replace(src, dst)

    monkeypatch.setattr(checkpoints.os, "replace", dying_replace)
    with pytest.raises(KeyboardInterrupt):
        save_atomic(make_state(2), path)
    monkeypatch.undo()
    assert load_checkpoint(path)["graph_manager"]["seed"] == 1
    assert load_checkpoint(previous_path(path))["graph_manager"]["seed"] == 1


def test_leftovers_of_a_killed_writer_are_removed_by_the_next_save(tmp_path):
    """Temporary files and folders and an unreferenced arrays folder (a writer killed mid-way) are
    deleted by the next successful save; the checkpoints themselves are untouched."""
    path = tmp_path / checkpoints.LAST
    save_atomic(make_state(1), path)
    leftovers = [tmp_path / ".last.pt.abc123.tmp", tmp_path / ".last.prev.pt.1234.tmp"]
    for file in leftovers:
        file.write_bytes(b"partial")
    (tmp_path / ".last.pt.arrays.0123456789ab.xyz.tmp").mkdir()
    (tmp_path / "last.pt.arrays.deadbeef0000").mkdir()
    save_atomic(make_state(2), path)
    assert sorted(p.name for p in tmp_path.iterdir() if "arrays" not in p.name) == ["last.prev.pt", "last.pt"]
    assert len(list(tmp_path.glob("*arrays*"))) == 2
    assert load_checkpoint(previous_path(path))["graph_manager"]["seed"] == 1


def test_damaged_newest_is_not_rotated_over_a_good_previous(tmp_path):
    """Saving over a damaged last.pt keeps the good last.prev.pt instead of replacing it with the damage."""
    path = tmp_path / checkpoints.LAST
    save_atomic(make_state(1), path)
    save_atomic(make_state(2), path)
    path.write_bytes(path.read_bytes()[:100])
    save_atomic(make_state(3), path)
    assert load_checkpoint(path)["graph_manager"]["seed"] == 3
    assert load_checkpoint(previous_path(path))["graph_manager"]["seed"] == 1


def test_legacy_checkpoint_without_header_still_loads(tmp_path):
    """A bare torch.save file (written before checksums) loads, marked as not verified."""
    path = tmp_path / checkpoints.LAST
    torch.save({"agent": {"w": torch.ones(2)}, "graph_manager": {"seed": 4}}, path)
    loaded = load_checkpoint(path)
    assert loaded["graph_manager"]["seed"] == 4 and loaded[checkpoints.INFO_KEY]["verified"] is False


def test_state_without_memory_has_no_arrays_folder(tmp_path):
    """A checkpoint without a replay memory is a single file."""
    path = tmp_path / checkpoints.BEST
    save_atomic({"agent": {"online_network": {"w": torch.ones(3)}}, "graph_manager": {}}, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [checkpoints.BEST]
    assert torch.equal(load_checkpoint(path)["agent"]["online_network"]["w"], torch.ones(3))


def test_resume_with_a_truncated_newest_checkpoint_uses_the_previous_one(tmp_path, caplog, capsys):
    """`rulka --resume` on a run whose last.pt was cut short: a warning, the previous checkpoint is
    loaded (the run resumes at its step count), and the run continues to the requested step."""
    from rulka.cli import main

    fast = ["--device", "cpu", "--no-progress"]
    small = ["-cp", "memory.memory_size_schedule=[[0, [2000, 100]]]", "-cp", "training.checkpoint_every_n_env_steps=200",
             "-cp", "training.evaluate_every_n_env_steps=0", "-cp", "training.batch_size=16",
             "-cp", "memory.number_times_single_memory_is_used_before_discard=1", "-cp", "performance.torch_num_threads=1"]
    assert main(["-p", "cartpole_iqn", "--max-steps", "300", "-e", "r", "--experiments-dir", str(tmp_path), *fast, *small]) == 0
    last = tmp_path / "r" / "checkpoints" / checkpoints.LAST
    assert load_checkpoint(last)["agent"]["counters"]["env_steps"] == 300
    previous_steps = load_checkpoint(previous_path(last))["agent"]["counters"]["env_steps"]
    assert 200 <= previous_steps < 300  # the periodic checkpoint (written at an episode boundary)
    last.write_bytes(last.read_bytes()[:1000])
    capsys.readouterr()
    with caplog.at_level(logging.WARNING, logger="rulka.checkpoints"):
        assert main(["--resume", str(tmp_path / "r"), "--max-steps", "400", *fast]) == 0
    assert "loaded the previous checkpoint" in caplog.text and "truncated" in caplog.text
    assert f"at {previous_steps} environment steps" in capsys.readouterr().err
    final = load_checkpoint(last)
    assert final["agent"]["counters"]["env_steps"] == 400 and not final[checkpoints.INFO_KEY]["fell_back"]
