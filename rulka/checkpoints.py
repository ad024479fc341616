"""Checkpoints that survive crashes, full disks and bit rot.

A checkpoint named ``last.pt`` is three things in the checkpoint folder:

* ``last.pt``: a one-line header (magic + JSON with the sha256 and size of the payload) followed by
  the payload, a ``torch.save`` of the state (read back with ``weights_only=True``);
* ``last.pt.arrays.<id>/``: the replay memory's large arrays as plain ``.npy`` files (one per
  array, each with its sha256 in the payload), memory-mapped on load instead of unpickled;
* ``last.prev.pt`` (+ its arrays folder): the previous complete checkpoint.

Writing is ordered so that a crash or an ``OSError`` (a full disk) at any moment leaves a complete,
verified ``last.pt`` or ``last.prev.pt``: the arrays go to a temporary folder that is fsynced and
renamed, the payload to a temporary file that is fsynced; only then does the current ``last.pt``
become ``last.prev.pt`` (a hard link, so ``last.pt`` never disappears) and the new file replace
``last.pt``. Arrays folders that neither file references are deleted afterwards.

:func:`load_checkpoint` verifies the newest checkpoint (size, sha256 of the payload and of every
array file); if it is missing, truncated or corrupt, it warns (``logging.warning``) and loads the
previous one, and says so in ``state["checkpoint_info"]``. Checkpoints written before this format
(a bare ``torch.save`` file) still load, without a checksum to verify.
"""
from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import os
import shutil
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

LAST = "last.pt"
BEST = "best.pt"

#: First bytes of a checkpoint file in this format; the JSON header follows on the same line.
MAGIC = b"RULKA-CHECKPOINT 2 "
#: Arrays of the replay memories at least this large (bytes) are stored as ``.npy`` files.
ARRAY_MIN_BYTES = 64 * 1024
#: Keys of ``state["agent"]`` whose arrays go to ``.npy`` files (the replay memories).
MEMORY_KEYS = ("memory", "test_memory")
#: Key of a placeholder dict that stands for an array stored in a ``.npy`` file.
ARRAY_REF = "__rulka_array__"
#: Key of a placeholder dict that holds a small numpy array or scalar inline (as uint8 bytes).
INLINE_REF = "__rulka_ndarray__"
#: Key added to a loaded state: which file was loaded and what was wrong with newer ones.
INFO_KEY = "checkpoint_info"
_CHUNK = 1 << 20

log = logging.getLogger(__name__)


class CheckpointError(RuntimeError):
    """No readable checkpoint: every candidate is missing, truncated or corrupt (the message lists why)."""


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (e.g. the disk is full); the previous one is left intact."""


class _Corrupt(Exception):
    """One checkpoint file (or one of its arrays) fails verification."""


@dataclass
class CheckpointInfo:
    """What :func:`load_checkpoint` loaded: the file, whether it fell back to the previous one and why."""

    path: Path
    fell_back: bool = False
    problems: list[str] = field(default_factory=list)
    verified: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "fell_back": self.fell_back, "problems": list(self.problems),
                "verified": self.verified}


def previous_path(path: str | Path) -> Path:
    """The previous complete checkpoint kept beside ``path``: ``last.pt`` -> ``last.prev.pt``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def has_checkpoint(path: str | Path) -> bool:
    """Whether ``path`` or its previous checkpoint exists (a resume can try them)."""
    return Path(path).is_file() or previous_path(path).is_file()


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

def save_atomic(state: dict[str, Any], path: str | Path) -> None:
    """Write ``state`` as the checkpoint ``path``, keeping the previous one as ``<stem>.prev<suffix>``.

    At every moment ``path`` holds either the old or the new complete checkpoint. Raises
    :class:`CheckpointWriteError` (an ``OSError``) when writing fails, e.g. on a full disk; the
    previous checkpoint is then untouched and the temporary files are removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays_dir: Path | None = None
    tmp_file: Path | None = None
    try:
        arrays = _memory_arrays(state)
        refs = {}
        if arrays:
            arrays_dir = path.with_name(f"{path.name}.arrays.{uuid.uuid4().hex[:12]}")
            refs = _write_arrays_dir(arrays, arrays_dir)
        payload_state = _encode(state, arrays, refs)
        buffer = io.BytesIO()
        torch.save(payload_state, buffer)
        payload = buffer.getbuffer()
        header = {"sha256": hashlib.sha256(payload).hexdigest(), "size": len(payload),
                  "arrays": arrays_dir.name if arrays_dir else None}
        tmp_file = _write_file_durably(path, MAGIC + json.dumps(header).encode() + b"\n", payload)
        _keep_previous(path)
        os.replace(tmp_file, path)
        tmp_file = None
        _fsync_dir(path.parent)
    except OSError as error:
        _cleanup(tmp_file, arrays_dir)
        reason = "the disk is full" if error.errno == errno.ENOSPC else str(error)
        raise CheckpointWriteError(error.errno, f"checkpoint {path} not written ({reason}); the previous "
                                                f"checkpoint is intact. Free space or fix the folder and retry") from error
    except BaseException:
        _cleanup(tmp_file, arrays_dir)
        raise
    _remove_unreferenced_arrays(path)


def _memory_arrays(state: dict[str, Any]) -> dict[str, np.ndarray | torch.Tensor]:
    """The memories' large arrays of ``state`` by ``.npy`` file name."""
    arrays: dict[str, np.ndarray | torch.Tensor] = {}
    agent = state.get("agent") if isinstance(state, dict) else None
    if isinstance(agent, dict):
        for key in MEMORY_KEYS:
            if key in agent:
                _collect_arrays(agent[key], key, arrays)
    return arrays


def _collect_arrays(value: Any, name: str, arrays: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _collect_arrays(v, f"{name}.{k}", arrays)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _collect_arrays(v, f"{name}.{i}", arrays)
    elif _is_large_array(value):
        base = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
        file_name, n = f"{base}.npy", 1
        while file_name in arrays:
            n += 1
            file_name = f"{base}~{n}.npy"
        arrays[file_name] = value


def _encode(value: Any, arrays: dict[str, Any], refs: dict[str, dict[str, Any]]) -> Any:
    """A copy of ``value`` that ``torch.load(weights_only=True)`` can read back.

    The memories' large arrays become placeholders (``refs``, their ``.npy`` files); other numpy
    arrays and numpy scalars become inline placeholders holding their bytes in a uint8 tensor.
    """
    by_id = {id(v): refs[name] for name, v in arrays.items()}

    def encode(item: Any) -> Any:
        if id(item) in by_id and _is_large_array(item):
            return by_id[id(item)]
        if isinstance(item, dict):
            return {k: encode(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return type(item)(encode(v) for v in item)
        if isinstance(item, (np.ndarray, np.generic)) and item.dtype != object:
            array = np.ascontiguousarray(item)
            return {INLINE_REF: torch.frombuffer(bytearray(array.tobytes()), dtype=torch.uint8),
                    "dtype": array.dtype.str, "shape": list(array.shape), "scalar": isinstance(item, np.generic)}
        return item

    return encode(value)


def _decode_inline(ref: dict[str, Any]) -> np.ndarray | np.generic:
    array = np.frombuffer(ref[INLINE_REF].numpy().tobytes(), dtype=np.dtype(ref["dtype"])).reshape(ref["shape"])
    return array[()] if ref.get("scalar") else array.copy()


def _is_large_array(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.dtype != object and value.nbytes >= ARRAY_MIN_BYTES
    if isinstance(value, torch.Tensor):
        return (value.device.type == "cpu" and value.layout == torch.strided and not value.requires_grad
                and value.element_size() * value.numel() >= ARRAY_MIN_BYTES and _numpy_dtype_of(value) is not None)
    return False


def _numpy_dtype_of(tensor: torch.Tensor) -> np.dtype | None:
    try:
        return torch.empty(0, dtype=tensor.dtype).numpy().dtype
    except TypeError:  # bfloat16 and other types numpy lacks stay in the payload
        return None


def _write_arrays_dir(arrays: dict[str, Any], final_dir: Path) -> dict[str, dict[str, Any]]:
    """Write each array as ``.npy`` in a temporary folder, fsync, rename to ``final_dir``; their refs."""
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".{final_dir.name}.", suffix=".tmp", dir=final_dir.parent))
    try:
        refs = {}
        for file_name, value in arrays.items():
            kind = "torch" if isinstance(value, torch.Tensor) else "numpy"
            array = value.numpy() if kind == "torch" else value
            digest, size = _write_array(tmp_dir / file_name, array)
            refs[file_name] = {ARRAY_REF: file_name, "kind": kind, "sha256": digest, "size": size,
                               "shape": list(array.shape), "dtype": array.dtype.str}
        _fsync_dir(tmp_dir)
        os.replace(tmp_dir, final_dir)
        _fsync_dir(final_dir.parent)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    return refs


def _write_array(path: Path, array: np.ndarray) -> tuple[str, int]:
    """Write one ``.npy`` file and fsync it; its sha256 and size in bytes.

    The array's bytes are written straight from its buffer while another thread hashes them
    (``hashlib`` releases the GIL), so the checksum costs little beyond the write itself.
    """
    array = np.ascontiguousarray(array)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(array))
    head = header.getvalue()
    data = memoryview(array.reshape(-1).view(np.uint8))
    digest = hashlib.sha256(head)
    hasher = threading.Thread(target=digest.update, args=(data,))
    hasher.start()
    try:
        with open(path, "wb") as f:
            f.write(head)
            for start in range(0, len(data), _CHUNK * 16):
                f.write(data[start:start + _CHUNK * 16])
            f.flush()
            os.fsync(f.fileno())
    finally:
        hasher.join()
    return digest.hexdigest(), len(head) + len(data)


def _map_refs(value: Any, fn: Any) -> Any:
    """``value`` with every array placeholder replaced by ``fn(placeholder)`` (containers rebuilt)."""
    if isinstance(value, dict):
        if ARRAY_REF in value:
            return fn(value)
        if INLINE_REF in value:
            return _decode_inline(value)
        return {k: _map_refs(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_map_refs(v, fn) for v in value)
    return value


def write_file_atomic(path: str | Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` whole or not at all (temporary file, fsync, rename): a write cut
    short leaves the old file and no temporary one."""
    path = Path(path)
    tmp = _write_file_durably(path, data, memoryview(b""))
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _write_file_durably(path: Path, header: bytes, payload: memoryview) -> Path:
    """Write ``header + payload`` to a temporary file beside ``path`` and fsync it; its path."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header)
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def _keep_previous(path: Path) -> None:
    """Make the current ``path`` the previous checkpoint, if it verifies; ``path`` stays in place."""
    if not path.is_file():
        return
    try:
        _verify_file(path, check_arrays=False)
    except _Corrupt as problem:
        log.warning("checkpoint %s is damaged (%s); keeping %s as the previous checkpoint", path, problem,
                    previous_path(path).name)
        return
    prev = previous_path(path)
    tmp = prev.with_name(f".{prev.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        os.link(path, tmp)
    except OSError:  # a file system without hard links
        shutil.copy2(path, tmp)
    os.replace(tmp, prev)


def _remove_unreferenced_arrays(path: Path) -> None:
    """Delete arrays folders (and leftover temporary ones) that neither ``path`` nor its previous use."""
    keep = {_header_arrays_name(p) for p in (path, previous_path(path))}
    tmp_prefixes = (f".{path.name}.", f".{previous_path(path).name}.")
    for candidate in path.parent.iterdir():
        name = candidate.name
        stale_tmp = name.startswith(tmp_prefixes) and name.endswith(".tmp")  # left by a killed writer
        if (name.startswith(f"{path.name}.arrays.") and name not in keep) or stale_tmp:
            if candidate.is_dir():
                shutil.rmtree(candidate, ignore_errors=True)
            else:
                candidate.unlink(missing_ok=True)


def _header_arrays_name(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return _parse_header(f.readline(4096)).get("arrays")
    except (OSError, _Corrupt):
        return None


def _cleanup(tmp_file: Path | None, arrays_dir: Path | None) -> None:
    if tmp_file is not None:
        tmp_file.unlink(missing_ok=True)
    if arrays_dir is not None:
        shutil.rmtree(arrays_dir, ignore_errors=True)


def _fsync_dir(directory: Path) -> None:
    if os.name == "nt":  # directories cannot be opened for fsync on Windows
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------

def load_checkpoint(path: str | Path, device: str | torch.device | None = None) -> dict[str, Any]:
    """The state saved at ``path``, or at its previous checkpoint when ``path`` is missing or damaged.

    Tensors of the payload go to ``device`` (default CPU); the memories' arrays are memory-mapped
    from their ``.npy`` files (CPU, copy-on-write). ``state["checkpoint_info"]`` says which file was
    loaded and what was wrong with the newer one. Raises ``FileNotFoundError`` when neither file
    exists and :class:`CheckpointError` when none is readable.
    """
    state, info = read_checkpoint(path, device)
    state[INFO_KEY] = info.to_dict()
    return state


def read_checkpoint(path: str | Path, device: str | torch.device | None = None) -> tuple[dict[str, Any], CheckpointInfo]:
    """As :func:`load_checkpoint`, returning the state and the :class:`CheckpointInfo` separately."""
    path = Path(path)
    candidates = [path, previous_path(path)]
    if not any(p.is_file() for p in candidates):
        raise FileNotFoundError(f"checkpoint not found: {path}")
    problems: list[str] = []
    for index, candidate in enumerate(candidates):
        if not candidate.is_file():
            problems.append(f"{candidate}: missing")
            continue
        try:
            state, verified = _load_one(candidate, device)
        except _Corrupt as problem:
            problems.append(f"{candidate}: {problem}")
            continue
        if index > 0:
            log.warning("checkpoint %s is unusable (%s); loaded the previous checkpoint %s instead",
                        path, "; ".join(problems), candidate)
        return state, CheckpointInfo(candidate, index > 0, problems, verified)
    raise CheckpointError(f"no readable checkpoint at {path}: " + "; ".join(problems)
                          + ". Start a new run, or restore the checkpoint folder from a backup")


def verify_checkpoint(path: str | Path) -> str | None:
    """What is wrong with the checkpoint file ``path`` and its arrays (None: it verifies)."""
    try:
        _verify_file(Path(path), check_arrays=True)
    except _Corrupt as problem:
        return str(problem)
    return None


def _parse_header(line: bytes) -> dict[str, Any]:
    if not line.startswith(MAGIC):
        raise _Corrupt("not a rulka checkpoint header")
    try:
        header = json.loads(line[len(MAGIC):])
        if not isinstance(header, dict) or not isinstance(header.get("sha256"), str) or not isinstance(header.get("size"), int):
            raise ValueError
    except ValueError:
        raise _Corrupt("damaged header") from None
    return header


def _read_payload(path: Path) -> tuple[bytes | None, dict[str, Any] | None]:
    """The verified payload and header of ``path``; (None, None) for a legacy file without a header."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise _Corrupt(f"cannot be read ({error})") from None
    if not data.startswith(MAGIC):
        if data[:2] == b"PK":  # a bare torch.save zip, written before checksums
            return None, None
        raise _Corrupt("not a checkpoint (unknown format or damaged first bytes)")
    end = data.find(b"\n", 0, 4096)
    if end < 0:
        raise _Corrupt("damaged header")
    header = _parse_header(data[: end + 1])
    payload = data[end + 1:]
    if len(payload) != header["size"]:
        raise _Corrupt(f"truncated or padded: payload of {len(payload)} bytes, expected {header['size']}")
    if hashlib.sha256(payload).hexdigest() != header["sha256"]:
        raise _Corrupt("checksum mismatch (the file is damaged)")
    return payload, header


def _verify_file(path: Path, check_arrays: bool) -> None:
    payload, header = _read_payload(path)
    if payload is None or not check_arrays:
        return
    state = _torch_load(io.BytesIO(payload), "cpu", path)
    _map_refs(state, lambda ref: _check_array_file(path, header, ref))


def _load_one(path: Path, device: str | torch.device | None) -> tuple[dict[str, Any], bool]:
    payload, header = _read_payload(path)
    map_location = device if device is not None else "cpu"
    if payload is None:
        return _torch_load(path, map_location, path), False
    state = _torch_load(io.BytesIO(payload), map_location, path)
    return _map_refs(state, lambda ref: _open_array(path, header, ref)), True


def _torch_load(source: Any, map_location: Any, path: Path) -> Any:
    try:
        return torch.load(source, map_location=map_location, weights_only=True)
    except Exception as error:  # a damaged zip or pickle: several exception types
        raise _Corrupt(f"unreadable by torch.load ({type(error).__name__}: {str(error)[:120]})") from None


def _check_array_file(checkpoint: Path, header: dict[str, Any], ref: dict[str, Any]) -> Path:
    """The verified (size and sha256) ``.npy`` file of one placeholder."""
    if not header.get("arrays"):
        raise _Corrupt("refers to memory arrays but its header names no arrays folder")
    file = checkpoint.parent / str(header["arrays"]) / str(ref[ARRAY_REF])
    if not file.is_file():
        raise _Corrupt(f"memory array {file.parent.name}/{file.name} is missing")
    size = file.stat().st_size
    if size != ref.get("size"):
        raise _Corrupt(f"memory array {file.name} is truncated or padded ({size} bytes, expected {ref.get('size')})")
    digest = hashlib.sha256()
    with open(file, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != ref.get("sha256"):
        raise _Corrupt(f"memory array {file.name}: checksum mismatch (the file is damaged)")
    return file


def _open_array(checkpoint: Path, header: dict[str, Any], ref: dict[str, Any]) -> np.ndarray | torch.Tensor:
    """The array of one placeholder, verified and memory-mapped (a tensor for ``kind == "torch"``)."""
    file = _check_array_file(checkpoint, header, ref)
    as_tensor = ref.get("kind") == "torch"
    try:
        # Copy-on-write for tensors: torch.from_numpy needs a writable array; the file is never changed.
        array = np.load(file, mmap_mode="c" if as_tensor else "r", allow_pickle=False)
    except (OSError, ValueError) as error:
        raise _Corrupt(f"memory array {file.name} is unreadable ({error})") from None
    if list(array.shape) != list(ref.get("shape", [])) or array.dtype.str != ref.get("dtype"):
        raise _Corrupt(f"memory array {file.name} has shape {array.shape} {array.dtype}, expected "
                       f"{tuple(ref.get('shape', []))} {ref.get('dtype')}")
    return torch.from_numpy(array) if as_tensor else array
