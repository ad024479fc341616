"""Backend registry: ``make_backend("sim" | "tmi" | ..., params, **options)``.

A backend module registers a factory with :func:`register_backend`. Names not registered yet are
looked up as a module ``environments.trackmania.<name>`` whose import is expected to register them
(so ``tmi`` plugs in from ``environments/trackmania/tmi/__init__.py`` without touching the env).
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

from environments.trackmania.backend import TrackManiaBackend

BackendFactory = Callable[..., TrackManiaBackend]


class RolloutDiscardedError(RuntimeError):
    """Raised by ``backend.step`` when the race was lost mid-rollout (the game hung or dropped the link).

    The rollout must be thrown away: :class:`TrackManiaEnv` ends the episode as truncated with
    ``info["discarded"] = True``, and the next ``start_race`` recovers (reconnects or relaunches).
    """

_REGISTRY: dict[str, BackendFactory] = {}
_DISCARDS: dict[str, bool] = {}


def register_backend(name: str, factory: BackendFactory, *, may_discard_races: bool = False) -> None:
    """Make ``factory(params, **options) -> TrackManiaBackend`` available as ``name``; ``may_discard_races``:
    its backends' :attr:`~environments.trackmania.backend.TrackManiaBackend.may_discard_races`."""
    _REGISTRY[name] = factory
    _DISCARDS[name] = may_discard_races


def backend_may_discard_races(name: str) -> bool:
    """Whether the backend called ``name`` may lose a race mid-way, known without building one (a learner
    whose collectors build the games asks)."""
    _factory(name)
    return _DISCARDS[name]


def available_backends() -> list[str]:
    """Names registered so far."""
    return sorted(_REGISTRY)


def make_backend(name: str, params: Any, **options: Any) -> TrackManiaBackend:
    """Build the backend called ``name`` for ``params`` (TrackManiaEnvironmentParameters)."""
    return _factory(name)(params, **options)


def _factory(name: str) -> BackendFactory:
    if name not in _REGISTRY:
        try:
            importlib.import_module(f"environments.trackmania.{name}")
        except ImportError as exc:
            raise KeyError(f"unknown TrackMania backend {name!r} (registered: {available_backends()}): {exc}") from exc
        if name not in _REGISTRY:
            raise KeyError(f"module environments.trackmania.{name} did not register a backend named {name!r}")
    return _REGISTRY[name]


def _make_sim(params: Any, **options: Any) -> TrackManiaBackend:
    from environments.trackmania.sim.backend import SimBackend, SimOptions

    return SimBackend(params, SimOptions(**options))


register_backend("sim", _make_sim)
