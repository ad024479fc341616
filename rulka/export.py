"""A trained policy outside its run: export it, read its weights back, start a new run from them.

An export is a folder with three files, enough to rebuild the policy without the run folder:

* ``policy.pt``: the online network's ``state_dict``, a plain ``torch.save`` of tensors:
  ``torch.load("policy.pt", weights_only=True)`` reads it (a checkpoint has a header and a replay
  memory beside it; this file has neither);
* ``config_snapshot.yaml``: the run's configuration, as the run folder's;
* ``policy.yaml``: what the weights need around them: the agent and configuration classes, the
  environment's observation and action spaces (before filters), the filters with their state
  (e.g. a normalisation's mean and std), and where the weights came from (checkpoint, counters).

Sources are given as a run folder (its ``checkpoints/last.pt``), a checkpoint file (``best.pt``,
``last.pt``; its run folder is the folder above ``checkpoints/``) or an export folder.

Classes named in ``policy.yaml`` are imported only from rulka's own packages (or modules the
process has already imported, e.g. a preset loaded by path) and must be of the expected kind
(an Agent, a filter, a dataclass): the file never names arbitrary code to run.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
import yaml
from gymnasium import spaces

from rulka import checkpoints
from rulka.config import ConfigError, apply_dict, load_yaml_file

WEIGHTS_FILE = "policy.pt"
DESCRIPTION_FILE = "policy.yaml"
SNAPSHOT_FILE = "config_snapshot.yaml"
RUN_INFO_FILE = "run_info.yaml"
#: Written in a new run's folder by :func:`init_networks_from`: where its first weights came from.
INIT_FROM_FILE = "init_from.yaml"
FORMAT_VERSION = 1
#: Packages whose classes ``policy.yaml`` may name (beside modules already imported).
TRUSTED_PACKAGES = ("agents", "filters", "rulka", "environments", "memories", "exploration_policies", "presets")


class ExportError(ConfigError):
    """A source that cannot be exported or loaded: the message names the problem and the fix."""


@dataclass
class PolicySource:
    """A policy as a run folder, checkpoint or export holds it, in memory.

    ``weights``: the online network's state_dict (CPU tensors); ``description``: the contents of
    ``policy.yaml``; ``snapshot``: the config snapshot (plain data).
    """

    weights: dict[str, torch.Tensor]
    description: dict[str, Any]
    snapshot: dict[str, Any]


# ---------------------------------------------------------------------------------------------
# Finding what a path is
# ---------------------------------------------------------------------------------------------

def is_export(path: str | Path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / DESCRIPTION_FILE).is_file() and (path / WEIGHTS_FILE).is_file()


def locate(path: str | Path) -> tuple[Path | None, Path | None]:
    """``(checkpoint, run_dir)`` of a run folder or checkpoint file (``run_dir`` None for a bare
    checkpoint outside a run folder). Raises :class:`ExportError` for anything else."""
    path = Path(path)
    if path.is_dir():
        last = path / "checkpoints" / checkpoints.LAST
        if checkpoints.has_checkpoint(last):
            return last, path
        raise ExportError(f"{path} is neither a run folder with a checkpoint (checkpoints/last.pt) nor an export "
                          f"({DESCRIPTION_FILE} + {WEIGHTS_FILE}); give a run folder, a checkpoint file or an export folder")
    if checkpoints.has_checkpoint(path):
        run_dir = path.parent.parent
        in_run = path.parent.name == "checkpoints" and (run_dir / SNAPSHOT_FILE).is_file()
        return path, run_dir if in_run else None
    raise FileNotFoundError(f"no run folder, checkpoint or export at {path}")


def read_description(export_dir: str | Path) -> dict[str, Any]:
    """The ``policy.yaml`` of an export folder."""
    description = yaml.safe_load((Path(export_dir) / DESCRIPTION_FILE).read_text(encoding="utf-8")) or {}
    if int(description.get("format", 0)) > FORMAT_VERSION:
        raise ExportError(f"{export_dir} is an export of format {description.get('format')}; this rulka reads up to "
                          f"{FORMAT_VERSION}: update rulka")
    return description


def load_online_weights(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The online network's state_dict of a run folder, checkpoint or export (CPU tensors), and
    where it came from: ``{"source", "checkpoint", "counters"}``."""
    path = Path(path)
    if is_export(path):
        weights = torch.load(path / WEIGHTS_FILE, map_location="cpu", weights_only=True)
        origin = read_description(path).get("source") or {}
        return weights, {**origin, "source": str(path)}
    checkpoint, _ = locate(path)
    state = checkpoints.load_checkpoint(checkpoint, "cpu")
    agent = state.get("agent") if isinstance(state, dict) else None
    if not isinstance(agent, dict) or "online_network" not in agent:
        raise ExportError(f"{checkpoint} holds no online network (agent.online_network): not a rulka training checkpoint")
    loaded = state[checkpoints.INFO_KEY]["path"]
    return dict(agent["online_network"]), {"source": str(path), "checkpoint": loaded,
                                            "counters": dict(agent.get("counters", {}))}


# ---------------------------------------------------------------------------------------------
# Starting a new run from trained weights
# ---------------------------------------------------------------------------------------------

def check_same_shapes(network: torch.nn.Module, weights: dict[str, torch.Tensor], where: str) -> None:
    """Raise :class:`ExportError` naming every layer whose shape differs, or that one side lacks."""
    own = network.state_dict()
    problems = [f"layer '{name}' has shape {tuple(weights[name].shape)} in {where} and {tuple(t.shape)} in this "
                f"run's network" for name, t in own.items() if name in weights and weights[name].shape != t.shape]
    problems += [f"layer '{name}' is missing from {where}" for name in own if name not in weights]
    problems += [f"layer '{name}' of {where} is not in this run's network" for name in weights if name not in own]
    if problems:
        raise ExportError("the weights do not fit this run's network: " + "; ".join(problems[:6])
                          + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
                          + ". Give this run the network sizes of the source run (the neural_network section, "
                            "and the observation sizes such as environment.H_downsized / W_downsized)")


def init_networks_from(graph_manager: Any, source: str | Path) -> dict[str, Any]:
    """Start the online and target networks of a freshly created run from the weights of ``source``.

    Only the weights move: the optimizer, the replay memory, the counters and every schedule
    (learning rate, epsilon, gamma, memory size) start fresh, because each belongs to the run
    that produced them: the memory holds the old map's transitions, the optimizer's moments
    were estimated on them, and the schedules are positions in the old run's timeline. A new
    run on a new map (or in the real game after the simulator) fills its own memory, exploring
    as its schedules say, from a network that already drives. Returns where the weights came from.
    """
    agent = graph_manager.agent
    if agent is None:
        raise RuntimeError("create() the graph manager before init_networks_from")
    weights, origin = load_online_weights(source)
    check_same_shapes(agent.online_network, weights, f"--init-from {source}")
    agent.online_network.load_state_dict(weights)
    agent.target_network.load_state_dict(agent.online_network.state_dict())
    if getattr(graph_manager, "run_dir", None) is not None:
        (Path(graph_manager.run_dir) / INIT_FROM_FILE).write_text(yaml.safe_dump(origin, sort_keys=False), encoding="utf-8")
    return origin


# ---------------------------------------------------------------------------------------------
# Exporting
# ---------------------------------------------------------------------------------------------

def read_source(path: str | Path) -> PolicySource:
    """The policy of a run folder, checkpoint or export, in memory (nothing written)."""
    path = Path(path)
    if is_export(path):
        weights, _ = load_online_weights(path)
        return PolicySource(weights, read_description(path), load_yaml_file(path / SNAPSHOT_FILE))
    checkpoint, run_dir = locate(path)
    if run_dir is None:
        raise ExportError(f"{checkpoint} is not inside a run folder (RUN/checkpoints/{checkpoint.name} beside "
                          f"RUN/{SNAPSHOT_FILE}): without the run's config snapshot the network cannot be rebuilt")
    info = load_yaml_file(run_dir / RUN_INFO_FILE) if (run_dir / RUN_INFO_FILE).is_file() else {}
    if not info.get("preset"):
        raise ExportError(f"{run_dir} has no {RUN_INFO_FILE} naming its preset; runs started by `rulka -p` have one")
    snapshot = load_yaml_file(run_dir / SNAPSHOT_FILE)
    weights, origin = load_online_weights(checkpoint)
    origin["source"] = str(path)
    graph_manager = _graph_manager(str(info["preset"]), snapshot, int(info.get("seed", 0)))
    try:
        description = _describe(graph_manager, str(info["preset"]), origin)
    finally:
        graph_manager.close()
    return PolicySource(weights, description, snapshot)


def export_policy(source: str | Path, out_dir: str | Path) -> Path:
    """Write the export of ``source`` (run folder, checkpoint or export) to ``out_dir``; returns it.

    ``out_dir`` must be new, empty or an earlier export (whose files are replaced).
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not is_export(out_dir):
        raise ExportError(f"{out_dir} already holds files that are not an export; give a new or empty folder")
    policy = read_source(source)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.detach().cpu().contiguous() for k, v in policy.weights.items()}, out_dir / WEIGHTS_FILE)
    (out_dir / SNAPSHOT_FILE).write_text(yaml.safe_dump(policy.snapshot, sort_keys=False), encoding="utf-8")
    (out_dir / DESCRIPTION_FILE).write_text(yaml.safe_dump(policy.description, sort_keys=False), encoding="utf-8")
    return out_dir


def _graph_manager(preset: str, snapshot: dict[str, Any], seed: int) -> Any:
    """The run's graph manager, created without a run folder on the CPU (global RNGs left as found)."""
    from rulka.presets import load_graph_manager

    graph_manager = load_graph_manager(preset)
    graph_manager.config = apply_dict(graph_manager.config, snapshot)
    with _global_rng_kept():
        graph_manager.create(None, "cpu", seed)
    return graph_manager


@contextlib.contextmanager
def _global_rng_kept() -> Iterator[None]:
    """Creating a graph manager seeds the global generators; put them back as they were."""
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])


def _describe(graph_manager: Any, preset: str, origin: dict[str, Any]) -> dict[str, Any]:
    config = graph_manager.config
    return {
        "format": FORMAT_VERSION,
        "preset": preset,
        "agent_class": qualified_name(type(graph_manager.agent)),
        "config_class": qualified_name(type(config)),
        "config_sections": {f.name: qualified_name(type(getattr(config, f.name)))
                            for f in dataclasses.fields(config) if dataclasses.is_dataclass(getattr(config, f.name))},
        "source": origin,
        "observation_space": encode_space(graph_manager.env_observation_space),
        "action_space": encode_space(graph_manager.env_action_space),
        "input_filter": {
            "observation_filters": {name: [encode_object(f) for f in filters]
                                    for name, filters in graph_manager.input_filter.observation_filters.items()},
            "reward_filters": [encode_object(f) for f in graph_manager.input_filter.reward_filters],
        },
        "output_filter": {"action_filters": [encode_object(f) for f in graph_manager.output_filter.action_filters]},
    }


# ---------------------------------------------------------------------------------------------
# Plain-data encoding of spaces, filters and classes
# ---------------------------------------------------------------------------------------------

def qualified_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def import_class(name: str, base: type | None = None) -> type:
    """The class ``module:QualName`` from rulka's packages (or a module already imported)."""
    module_name, _, qualname = str(name).partition(":")
    trusted = module_name.split(".")[0] in TRUSTED_PACKAGES or module_name in sys.modules
    if not qualname or not trusted:
        raise ExportError(f"class {name!r}: an export may name classes of rulka's packages "
                          f"({', '.join(TRUSTED_PACKAGES)}) or of a module this process imported; import "
                          f"{module_name} first")
    try:
        value: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as error:
        raise ExportError(f"class {name!r} cannot be found ({error}); is this the rulka that made the export? "
                          "Modules that moved between releases are listed in CHANGELOG.md: export the run again "
                          "with this rulka (rulka export RUN_DIR --out DIR), or write the new module path in "
                          "the export's policy.yaml") from None
    if not isinstance(value, type) or (base is not None and not issubclass(value, base)):
        raise ExportError(f"{name!r} is not a {base.__name__ if base else 'class'}")
    return value


def encode_space(space: spaces.Space) -> dict[str, Any]:
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: encode_space(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Box):
        return {"type": "Box", "low": encode_value(space.low), "high": encode_value(space.high),
                "shape": list(space.shape), "dtype": np.dtype(space.dtype).str}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": encode_value(space.n)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": encode_value(space.nvec)}
    raise ExportError(f"spaces of type {type(space).__name__} cannot be exported (Dict, Box, Discrete, "
                      f"MultiBinary and MultiDiscrete can)")


def decode_space(data: dict[str, Any]) -> spaces.Space:
    kind = data.get("type")
    if kind == "Dict":
        return spaces.Dict({k: decode_space(v) for k, v in data["spaces"].items()})
    if kind == "Box":
        dtype = np.dtype(data["dtype"])
        return spaces.Box(decode_value(data["low"]).astype(dtype), decode_value(data["high"]).astype(dtype),
                          tuple(data["shape"]), dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
    if kind == "MultiBinary":
        return spaces.MultiBinary(decode_value(data["n"]))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(decode_value(data["nvec"]))
    raise ExportError(f"unknown space type {kind!r} in {DESCRIPTION_FILE}")


def encode_object(obj: Any) -> dict[str, Any]:
    """A filter as ``{"class": "module:Name", "state": {attribute: plain data}}``."""
    state = {}
    for key, value in vars(obj).items():
        try:
            state[key] = encode_value(value)
        except ExportError as error:
            raise ExportError(f"{type(obj).__name__}.{key}: {error}") from None
    return {"class": qualified_name(type(obj)), "state": state}


def decode_object(data: dict[str, Any], base: type) -> Any:
    cls = import_class(data["class"], base)
    obj = cls.__new__(cls)
    obj.__dict__.update({k: decode_value(v) for k, v in (data.get("state") or {}).items()})
    return obj


def encode_value(value: Any) -> Any:
    """Plain YAML data for numbers, strings, arrays, tensors, dtypes, tuples, lists and dicts."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, torch.Tensor):
        return {"tensor": encode_value(value.detach().cpu().numpy())}
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise ExportError("arrays of Python objects cannot be exported")
        flat = value.reshape(-1)
        if flat.size and np.all(flat == flat[0]):
            return {"ndarray_fill": flat[0].item(), "dtype": value.dtype.str, "shape": list(value.shape)}
        return {"ndarray": flat.tolist(), "dtype": value.dtype.str, "shape": list(value.shape)}
    if isinstance(value, np.dtype):
        return {"numpy_dtype": value.str}
    if isinstance(value, tuple):
        return {"tuple": [encode_value(v) for v in value]}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"mapping": {k: encode_value(v) for k, v in value.items()}}
    raise ExportError(f"values of type {type(value).__name__} cannot be exported (numbers, strings, arrays, "
                      f"tensors, lists, tuples and dicts can)")


def decode_value(data: Any) -> Any:
    if isinstance(data, list):
        return [decode_value(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "ndarray" in data:
        return np.asarray(data["ndarray"], dtype=np.dtype(data["dtype"])).reshape(data["shape"])
    if "ndarray_fill" in data:
        return np.full(data["shape"], data["ndarray_fill"], dtype=np.dtype(data["dtype"]))
    if "tensor" in data:
        return torch.from_numpy(np.array(decode_value(data["tensor"])))
    if "numpy_dtype" in data:
        return np.dtype(data["numpy_dtype"])
    if "tuple" in data:
        return tuple(decode_value(v) for v in data["tuple"])
    if "mapping" in data:
        return {k: decode_value(v) for k, v in data["mapping"].items()}
    raise ExportError(f"unknown value {data!r} in {DESCRIPTION_FILE}")


def rebuild_config(description: dict[str, Any], snapshot: dict[str, Any]) -> Any:
    """The run's configuration from its classes (``policy.yaml``) and values (the snapshot)."""
    config_class = import_class(description["config_class"])
    if not dataclasses.is_dataclass(config_class):
        raise ExportError(f"{description['config_class']} is not a configuration dataclass")
    sections = {name: import_class(cls)() for name, cls in (description.get("config_sections") or {}).items()}
    return apply_dict(config_class(**sections), snapshot)
