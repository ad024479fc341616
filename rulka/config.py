"""Loading YAML files and ``-cp`` overrides into the typed parameters, and the active config.

Nothing here runs user text as code: YAML goes through ``yaml.safe_load`` and each value is
checked against the type hint of the dataclass field it lands in. Every problem raises
:class:`ConfigError` naming the key path (``training.batch_size``) and, for a misspelled key,
the closest valid name, before any work starts.
"""
from __future__ import annotations

import copy
import dataclasses
import difflib
import re
import types
import typing
from pathlib import Path
from typing import Any, Union

import yaml

from rulka.schedules import Schedule, ScheduleError
from rulka.validation import ConfigError, validate_config  # ConfigError is the loader's error too: import it from either

_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


# ---------------------------------------------------------------------------------------------
# Applying plain data (from YAML or overrides) onto dataclass instances
# ---------------------------------------------------------------------------------------------

def apply_dict(target: Any, data: Any, path: str = "") -> Any:
    """Return a copy of dataclass instance ``target`` with the values of mapping ``data`` applied."""
    where = path or "the top level"
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping of keys to values, got {_describe(data)}")
    result = copy.deepcopy(target)
    if not path:
        data = _route_sections(type(result), data)
    hints = typing.get_type_hints(type(result))
    names = [f.name for f in dataclasses.fields(result) if f.init and not f.name.startswith("_")]
    for key, value in data.items():
        key_path = f"{path}.{key}" if path else str(key)
        if key not in names:
            raise ConfigError(_unknown_key_message(str(key), names, where))
        current = getattr(result, key)
        setattr(result, key, _coerce(value, hints[key], key_path, current))
    return result


def _route_sections(config_type: type, data: dict) -> dict:
    """Move YAML sections or keys to the field that owns them (a config class's ``yaml_routes``).

    ``{"rewards": "environment"}`` merges the ``rewards`` section into ``environment``;
    ``{"neural_network.W_downsized": "environment.W_downsized"}`` moves one key. This lets a file
    laid out as the configuration guide lays it out fill parameters that live in one place.
    """
    routes: dict[str, str] = getattr(config_type, "yaml_routes", {})
    if not routes:
        return data
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for source, destination in routes.items():
        src_section, _, src_key = source.partition(".")
        dst_section, _, dst_key = destination.partition(".")
        section = data.get(src_section)
        if not isinstance(section, dict):
            continue
        moved = {src_key: section.pop(src_key)} if src_key and src_key in section else ({} if src_key else section)
        if not moved:
            continue
        if not src_key:
            del data[src_section]
        if dst_key:
            moved = {dst_key: next(iter(moved.values()))}
        target = data.setdefault(dst_section, {})
        if not isinstance(target, dict):
            raise ConfigError(f"{dst_section}: expected a mapping of keys to values, got {_describe(target)}")
        for key in moved:
            if key in target:
                raise ConfigError(f"'{key}' is set both in {source.split('.')[0]} and in {dst_section}; keep one")
        target.update(moved)
    return data


def _unknown_key_message(key: str, names: list[str], where: str) -> str:
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else f"; valid keys: {', '.join(sorted(names))}"
    return f"unknown key '{key}' in {where}{hint}"


def _coerce(value: Any, hint: Any, path: str, current: Any) -> Any:
    origin = typing.get_origin(hint) or (hint if hint in (list, tuple, dict) else None)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _coerce(value, options[0], path, current)
        errors = []
        for option in options:
            try:
                return _coerce(value, option, path, current)
            except ConfigError as error:
                errors.append(str(error))
        raise ConfigError(errors[0])
    if hint is Schedule:
        return _coerce_schedule(value, path, current)
    if dataclasses.is_dataclass(hint):
        base = current if dataclasses.is_dataclass(current) else hint()
        return apply_dict(base, value, path)
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected a list, got {_describe(value)}")
        (item_hint,) = args or (Any,)
        return [_coerce(v, item_hint, f"{path}[{i}]", None) for i, v in enumerate(value)]
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected a list, got {_describe(value)}")
        return tuple(value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {_describe(value)}")
        return dict(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected bool (true or false), got {_describe(value)}")
        return value
    if hint is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected int, got {_describe(value)}")
        return value
    if hint is float:
        if isinstance(value, str) and _NUMBER.match(value.strip()):
            return float(value)  # YAML 1.1 reads 1e-3 as a string
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: expected float, got {_describe(value)}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected str, got {_describe(value)}")
        return value
    raise ConfigError(f"{path}: fields of type {hint!r} cannot be set from configuration")


def _coerce_schedule(value: Any, path: str, current: Any) -> Schedule:
    base = current if isinstance(current, Schedule) else Schedule([(0, 0.0)])
    if isinstance(value, Schedule):
        return value
    if isinstance(value, (list, tuple)):
        points, interpolation, counter = value, base.interpolation, base.counter
    elif isinstance(value, dict):
        unknown = set(value) - {"points", "interpolation", "counter"}
        if unknown:
            raise ConfigError(_unknown_key_message(sorted(unknown)[0], ["points", "interpolation", "counter"], path))
        points = value.get("points", base.points)
        interpolation = value.get("interpolation", base.interpolation)
        counter = value.get("counter", base.counter)
    else:
        raise ConfigError(f"{path}: expected a schedule, a list of [step, value] pairs, got {_describe(value)}")
    points = [_number_strings_to_float(p) for p in points]
    try:
        return Schedule(list(points), interpolation, counter)
    except ScheduleError as error:
        raise ConfigError(f"{path}: invalid schedule: {error}") from None


def _number_strings_to_float(point: Any) -> Any:
    if isinstance(point, (list, tuple)) and len(point) == 2 and isinstance(point[1], str):
        if _NUMBER.match(point[1].strip()):
            return [point[0], float(point[1])]
    return point


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) < 60 else text[:57] + '...'}"


# ---------------------------------------------------------------------------------------------
# Files and overrides
# ---------------------------------------------------------------------------------------------

def load_yaml_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping with ``yaml.safe_load``; a clear error for a missing or broken file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {_describe(data)}")
    return _resolve_paths(data, path.resolve().parent)


def _resolve_paths(data: Any, folder: Path) -> Any:
    """``data`` with each relative file path of a key ending in ``_path`` that names no file from the
    working directory but names one from ``folder`` (the YAML file's) made absolute: a configuration
    file can name files beside it and work from any working directory. A path that names a file from
    the working directory, or from neither place, is left as written."""
    if isinstance(data, dict):
        return {key: (_resolve_path(value, folder) if isinstance(key, str) and key.endswith("_path")
                      else _resolve_paths(value, folder)) for key, value in data.items()}
    if isinstance(data, list):
        return [_resolve_paths(item, folder) for item in data]
    return data


def _resolve_path(value: Any, folder: Path) -> Any:
    if not isinstance(value, str) or not value or Path(value).is_absolute() or Path(value).exists():
        return value
    beside = folder / value
    return str(beside.resolve()) if beside.exists() else value


def parse_override(text: str) -> dict[str, Any]:
    """Turn ``section.key=value`` into ``{"section": {"key": value}}``; the value is YAML."""
    if "=" not in text:
        raise ConfigError(f"override '{text}' must look like section.key=value")
    key_path, raw = text.split("=", 1)
    keys = [k for k in key_path.strip().split(".") if k]
    if not keys:
        raise ConfigError(f"override '{text}' has no key before '='")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    nested: Any = value
    for key in reversed(keys):
        nested = {key: nested}
    return nested


def apply_overrides(config: Any, yaml_files: list[str] = (), overrides: list[str] = ()) -> Any:
    """Apply YAML files then ``-cp`` overrides, in order, to a copy of ``config``; then check every
    value's range (:func:`rulka.validation.validate_config`), the preset's own values included."""
    for path in yaml_files:
        config = apply_dict(config, load_yaml_file(path))
    for text in overrides:
        config = apply_dict(config, parse_override(text))
    return validate_config(config)


def config_to_dict(value: Any) -> Any:
    """Plain data (dicts, lists, numbers, strings) for YAML: the config snapshot.

    Sections that a config class routes elsewhere (``yaml_routes``) are left out: their keys are
    written where they live.
    """
    if isinstance(value, Schedule):
        return value.to_dict()
    if dataclasses.is_dataclass(value):
        routed_away = {src for src in getattr(type(value), "yaml_routes", {}) if "." not in src}
        return {
            f.name: config_to_dict(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.init and not f.name.startswith("_") and f.name not in routed_away
        }
    if isinstance(value, (list, tuple)):
        return [config_to_dict(v) for v in value]
    if isinstance(value, dict):
        return {k: config_to_dict(v) for k, v in value.items()}
    return value


def write_config_snapshot(config: Any, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False), encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# The active run's configuration
# ---------------------------------------------------------------------------------------------

class FlatConfig:
    """Read-only view of an experiment config where ``cfg.batch_size`` finds ``training.batch_size``.

    Sections stay reachable as attributes too (``cfg.training.batch_size``). A name present in
    two sections must be asked through its section.
    """

    def __init__(self, config: Any) -> None:
        object.__setattr__(self, "_config", config)

    def __getattr__(self, name: str) -> Any:
        config = object.__getattribute__(self, "_config")
        if hasattr(config, name):
            return getattr(config, name)
        owners = [f.name for f in dataclasses.fields(config) if hasattr(getattr(config, f.name), name)]
        if len(owners) == 1:
            return getattr(getattr(config, owners[0]), name)
        if len(owners) > 1:
            raise AttributeError(f"'{name}' is in several sections ({', '.join(owners)}); ask cfg.<section>.{name}")
        raise AttributeError(f"no configuration key named '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("the active configuration is read-only; change it with --config or -cp")


_active_config: Any = None


def set_active_config(config: Any) -> None:
    global _active_config
    _active_config = config


def get_config() -> FlatConfig:
    """The configuration of the run in progress, with flat attribute access."""
    if _active_config is None:
        raise RuntimeError("no run is active: get_config() works inside a run started by a GraphManager")
    return FlatConfig(_active_config)
