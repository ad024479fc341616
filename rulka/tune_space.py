"""The search space of ``rulka tune``: a YAML file of ``-cp`` keys, each with a distribution.

    training.batch_size: {choice: [32, 64, 128]}
    training.lr_schedule: {loguniform: [1.0e-4, 3.0e-3], as: "[[0, VALUE]]"}
    training.n_steps: {randint: [1, 5]}                 # both ends included
    exploration.tau_epsilon_boltzmann: {uniform: [0.0, 0.05]}

A distribution is one of ``choice`` (a list of values), ``uniform`` and ``loguniform`` ([low, high]
floats) and ``randint`` ([low, high] ints, both included). ``as`` (optional) is the ``-cp`` value
with ``VALUE`` where the sampled value goes, for a parameter that is not a plain number (a schedule).

:func:`load_space` reads and checks the file's form; :meth:`SearchSpace.check` tries the ends of
every range and every choice on the preset's configuration with the parameters' own rules (the
``-cp`` machinery of :mod:`rulka.config`), and :meth:`SearchSpace.sample` draws the trials, each
checked whole, so that a bad key or value is refused before any trial starts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rulka.config import ConfigError, apply_overrides, load_yaml_file

DISTRIBUTIONS = ("choice", "uniform", "loguniform", "randint")
PLACEHOLDER = "VALUE"


@dataclass(frozen=True)
class Dimension:
    """One key of the space: ``key`` (a ``-cp`` key path), its ``kind`` (one of :data:`DISTRIBUTIONS`),
    ``values`` (the choices, or [low, high]) and the ``template`` of its ``-cp`` value (None: the value)."""

    key: str
    kind: str
    values: tuple
    template: str | None = None

    def override(self, value: Any) -> str:
        """The ``-cp`` text that sets this key to ``value``."""
        text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
        if text.endswith("\n...") or text.endswith("..."):
            text = text.rsplit("...", 1)[0].strip()
        if self.template is not None:
            text = self.template.replace(PLACEHOLDER, text)
        return f"{self.key}={text}"

    def draw(self, rng: np.random.Generator) -> Any:
        if self.kind == "choice":
            return self.values[int(rng.integers(len(self.values)))]
        low, high = self.values
        if self.kind == "uniform":
            return float(rng.uniform(low, high))
        if self.kind == "loguniform":
            return float(math.exp(rng.uniform(math.log(low), math.log(high))))
        return int(rng.integers(low, high + 1))

    def probes(self) -> list[Any]:
        """The values :meth:`SearchSpace.check` tries: every choice, or both ends of the range."""
        return list(self.values) if self.kind == "choice" else [self.values[0], self.values[1]]


@dataclass(frozen=True)
class SearchSpace:
    dimensions: tuple[Dimension, ...]
    source: str

    @property
    def keys(self) -> list[str]:
        return [d.key for d in self.dimensions]

    def overrides(self, values: dict[str, Any]) -> list[str]:
        """The ``-cp`` texts of one trial's ``{key: value}``."""
        return [d.override(values[d.key]) for d in self.dimensions]

    def check(self, config: Any) -> None:
        """Refuse (:class:`ConfigError`) a key the configuration does not have or a value its rule refuses,
        trying each choice and both ends of each range on ``config`` (the preset's, after the sweep's own
        ``--config`` and ``-cp``), one key at a time."""
        for dimension in self.dimensions:
            for value in dimension.probes():
                try:
                    apply_overrides(config, [], [dimension.override(value)])
                except ConfigError as error:
                    raise ConfigError(f"{self.source}: {dimension.key} ({dimension.kind} {list(dimension.values)}): "
                                      f"{error}") from None

    def sample(self, count: int, seed: int, config: Any) -> list[dict[str, Any]]:
        """``count`` trials ``{key: value}`` drawn with ``seed``; each trial's whole set of overrides is
        applied to ``config`` and checked (rules across keys included) before it is returned."""
        rng = np.random.default_rng(seed)
        trials = []
        for number in range(count):
            values = {d.key: d.draw(rng) for d in self.dimensions}
            try:
                apply_overrides(config, [], self.overrides(values))
            except ConfigError as error:
                shown = ", ".join(f"{k}={v!r}" for k, v in values.items())
                raise ConfigError(f"{self.source}: trial {number} ({shown}) is refused: {error}; narrow the ranges "
                                  f"so every combination is valid") from None
            trials.append(values)
        return trials


def load_space(path: str | Path) -> SearchSpace:
    """Read a space file (see the module's docstring); :class:`ConfigError` names what is wrong."""
    path = Path(path)
    data = load_yaml_file(path)
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{path}: a search space is a mapping of -cp keys to distributions, e.g. "
                          f"'training.batch_size: {{choice: [32, 64]}}'")
    return SearchSpace(tuple(_dimension(str(key), spec, path) for key, spec in data.items()), str(path))


def _dimension(key: str, spec: Any, path: Path) -> Dimension:
    where = f"{path}: {key}"
    if isinstance(spec, dict) and isinstance(next(iter(spec.values()), None), dict) and "." not in key:
        raise ConfigError(f"{where}: write each key in full on one line (e.g. '{key}.KEY: {{choice: [...]}}'), "
                          f"as -cp takes it")
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: expected a distribution such as {{choice: [a, b]}}, {{uniform: [low, high]}}, "
                          f"{{loguniform: [low, high]}} or {{randint: [low, high]}}, got {spec!r}")
    template = spec.get("as")
    kinds = [k for k in spec if k != "as"]
    unknown = [k for k in kinds if k not in DISTRIBUTIONS]
    if unknown or len(kinds) != 1:
        raise ConfigError(f"{where}: give exactly one of {', '.join(DISTRIBUTIONS)} (and optionally 'as'), got "
                          f"{', '.join(map(str, spec)) or 'nothing'}")
    if template is not None and (not isinstance(template, str) or PLACEHOLDER not in template):
        raise ConfigError(f"{where}: 'as' is the -cp value with {PLACEHOLDER} where the sampled value goes, e.g. "
                          f"'[[0, {PLACEHOLDER}]]'; got {template!r}")
    kind = kinds[0]
    values = spec[kind]
    if kind == "choice":
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: choice takes a non-empty list of values, got {values!r}")
        return Dimension(key, kind, tuple(values), template)
    if not (isinstance(values, list) and len(values) == 2):
        raise ConfigError(f"{where}: {kind} takes [low, high], got {values!r}")
    low, high = values
    if kind == "randint":
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values) or low > high:
            raise ConfigError(f"{where}: randint takes two ints [low, high] with low <= high (both included), got {values!r}")
    else:
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values) or not low < high:
            raise ConfigError(f"{where}: {kind} takes two numbers [low, high] with low < high, got {values!r}")
        if kind == "loguniform" and low <= 0:
            raise ConfigError(f"{where}: loguniform needs 0 < low, got {values!r} (use uniform for a range through 0)")
        low, high = float(low), float(high)
    return Dimension(key, kind, (low, high), template)
