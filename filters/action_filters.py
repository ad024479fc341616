"""Action filters: from the agent's action to the environment's."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from gymnasium import spaces

from filters.filter import ActionFilter


class DiscreteToDictActionFilter(ActionFilter):
    """The agent picks an index into ``table``; the environment receives that row as a dict.

    Example: the TrackMania inputs table, where index 1 is
    ``{"accelerate": True, "brake": False, "left": True, "right": False}``.
    """

    def __init__(self, table: Sequence[Mapping[str, Any]]) -> None:
        if not table:
            raise ValueError("the action table is empty")
        self.table = [dict(row) for row in table]

    def agent_space(self, env_space: spaces.Space) -> spaces.Space:
        return spaces.Discrete(len(self.table))

    def filter(self, action: Any) -> dict[str, Any]:
        return dict(self.table[int(action)])
