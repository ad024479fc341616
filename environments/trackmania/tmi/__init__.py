"""The real game: TrackMania Nations Forever through TMInterface 2 and rulka's own plugin.

Modules: :mod:`.protocol` (ids, framing), :mod:`.client` (the wire client), :mod:`.state` (state
blob decoding), :mod:`.materials`, :mod:`.game_instance_manager` (the rollout cycle),
:mod:`.backend` (``TMIBackend``), :mod:`.launcher` (with :mod:`.launch_lock` and :mod:`.processes`),
:mod:`.map_checkpoints` (a map's real checkpoints), :mod:`.settings`, and tools: :mod:`.check`,
:mod:`.install`, :mod:`.inputs_export`, :mod:`.replay_to_line`, :mod:`.cli`.
Nothing here imports the optional ``tminterface`` or ``pygbx`` packages at import time.

Importing this package registers the ``tmi`` backend: ``TrackManiaEnv(backend="tmi")``.
"""
from typing import Any

from ..backend import TrackManiaBackend
from environments.trackmania.backend_registry import register_backend
from .protocol import MessageType, TMInterfaceError


def _make_tmi(params: Any, **options: Any) -> TrackManiaBackend:
    from .backend import make_tmi_backend  # lazy: the CLI tools need none of the rollout machinery

    return make_tmi_backend(params, **options)


register_backend("tmi", _make_tmi, may_discard_races=True)

__all__ = ["MessageType", "TMInterfaceError"]
