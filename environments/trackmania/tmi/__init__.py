"""The real game: TrackMania Nations Forever through TMInterface 2 and rulka's own plugin.

Rooms: :mod:`.link` (TMInterface's protocol, the client, the state blob), :mod:`.games` (settings, the
launcher, processes, the game guard, one game's race cycle), :mod:`.maps` (a map's checkpoints, replays,
input scripts), :mod:`.commands` (``rulka tmi``), and :mod:`.backend` (``TMIBackend``, which puts them
together); ``standin/`` and ``test_host/``: the stand-in game; ``plugin/``: our TMInterface plugin.
Nothing here imports the optional ``tminterface`` or ``pygbx`` packages at import time.

Importing this package registers the ``tmi`` backend: ``TrackManiaEnv(backend="tmi")``.
"""
from typing import Any

from ..backend import TrackManiaBackend
from environments.trackmania.backend_registry import register_backend
from .link.protocol import MessageType, TMInterfaceError


def _make_tmi(params: Any, **options: Any) -> TrackManiaBackend:
    from .backend import make_tmi_backend  # lazy: the CLI tools need none of the rollout machinery

    return make_tmi_backend(params, **options)


register_backend("tmi", _make_tmi, may_discard_races=True)

__all__ = ["MessageType", "TMInterfaceError"]
