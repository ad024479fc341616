"""The stand-in game: TMNF as rulka sees it, without the game.

The AngelScript host (``environments/trackmania/tmi/test_host``) runs the real ``rulka_link.as``
plugin; with ``--physics`` its car, tracks, checkpoints and frames come from the built-in simulator
(:mod:`.physics`, run in an interpreter embedded in the host, or in a child process where this Python
cannot be embedded). :func:`standin_command` builds the host (once per source version) and gives its
command line; ``launch.sh`` starts it under the ``TMI_LINUX_LAUNCH_SCRIPT`` contract
(``launch.sh <port>``), ``rulka tmi standin --port N`` by hand. Another TMInterface 2 plugin
(``RULKA_STANDIN_PLUGIN`` / ``--plugin``) and a detached launch that returns once the game listens
(``RULKA_STANDIN_DETACH=1`` / ``--detach``, :mod:`.detach`) serve other clients, e.g. Linesight's.
"""
from __future__ import annotations

from .build import HOST_DIR, PLUGIN, LAUNCH_SCRIPT, StandinBuildError, host_binary, standin_command

__all__ = ["HOST_DIR", "PLUGIN", "LAUNCH_SCRIPT", "StandinBuildError", "host_binary", "standin_command"]
