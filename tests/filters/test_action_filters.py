"""The discrete-index-to-dict action filter."""
import pytest
from gymnasium import spaces

from filters.action_filters import DiscreteToDictActionFilter


def test_empty_table_is_refused():
    """An empty action table is refused when the filter is made, with a message that says so."""
    with pytest.raises(ValueError, match="the action table is empty"):
        DiscreteToDictActionFilter([])


def test_rows_are_copies():
    """The environment gets a copy of the row: changing it does not change the table."""
    f = DiscreteToDictActionFilter([{"left": True}])
    assert f.agent_space(spaces.Discrete(9)) == spaces.Discrete(1)
    row = f.filter(0)
    row["left"] = False
    assert f.filter(0) == {"left": True}
