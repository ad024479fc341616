"""The real game: TrackMania Nations Forever through TMInterface 2 and rulka's own plugin.

Modules: :mod:`.protocol` (ids, framing), :mod:`.client` (the wire client), :mod:`.state` (state
blob decoding), :mod:`.materials`, :mod:`.game_instance_manager` (the rollout cycle),
:mod:`.backend` (``TMIBackend``), :mod:`.launcher`, :mod:`.settings`, and tools: :mod:`.check`,
:mod:`.install`, :mod:`.inputs_export`, :mod:`.replay_to_line`, :mod:`.cli`.
Nothing here imports the optional ``tminterface`` or ``pygbx`` packages at import time.
"""
from .protocol import MessageType, TMInterfaceError

__all__ = ["MessageType", "TMInterfaceError"]
