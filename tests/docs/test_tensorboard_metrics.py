"""docs/tensorboard.md lists every TensorBoard metric rulka logs, and only those.

The names come from three places: very short trainings (CartPole DQN and the TrackMania simulator
preset, learning from the 300th step) with a logger that records every name; the race log given a
finished race of each kind (a short run finishes none); and the string literals of the code that
name metrics (collector-process and Ray metrics, which in-process runs do not log). Names with placeholders (``Race_explo/<map>/progress``) are matched as
patterns, a placeholder standing for one path component or part of one.
"""
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from environments.trackmania.training.race_log import RaceLog
from rulka.presets import load_graph_manager
from rulka.schedules import Schedule

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "tensorboard.md"
CODE_DIRS = ("rulka", "agents", "environments", "memories", "exploration_policies", "filters")
#: A metric name in a string literal of the code: ``"Group/..."`` or ``f"Group/..."``.
LITERAL = re.compile(r"""f?"((?:Training|RL|Eval|Performance|Race\w*)/[^"]*)\"""")


def documented_names() -> list[str]:
    """The backticked names of the first column of the doc's tables."""
    names = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            names += re.findall(r"`([^`]+)`", line.split("|")[1])
    return names


def pattern(name: str) -> re.Pattern:
    """``Race/<map>/best_race_time_s`` -> a regex where each ``<...>`` is any text without '/'."""
    parts = re.split(r"<[^>]+>", name)
    return re.compile("[^/]+".join(re.escape(p) for p in parts))


def undocumented(names: set[str]) -> list[str]:
    patterns = [pattern(n) for n in documented_names()]
    return sorted(n for n in names if not any(p.fullmatch(n) for p in patterns))


def code_literals() -> set[str]:
    """Metric names written in the code, ``{expression}`` parts replaced by ``<x>``. Names whose whole
    last part is an expression (``Training/{k}``: the keys of an agent's stats; ``Race_{kind}/{map}``:
    a prefix) are left to the runs."""
    found = set()
    for folder in CODE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            for literal in LITERAL.findall(path.read_text(encoding="utf-8")):
                name = re.sub(r"\{[^}]*\}", "<x>", literal)
                if not name.endswith("/<x>"):
                    found.add(name)
    return found


class CapturingLogger:
    """Stands in for RunLogger: records every name logged."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def scalars(self, values: dict[str, float], env_steps: int) -> None:
        self.names.update(values)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def logged_names(preset: str, steps: int, **sections) -> set[str]:
    """Train ``preset`` for ``steps`` environment steps, learning from the 300th; the names it logged."""
    graph_manager = load_graph_manager(preset)
    config = graph_manager.config
    config.memory.memory_size_schedule = Schedule([(0, (5_000, 300))], "staircase")
    for section, values in sections.items():
        for key, value in values.items():
            setattr(getattr(config, section), key, value)
    graph_manager.create(None, "cpu", seed=0)
    graph_manager.logger = logger = CapturingLogger()
    graph_manager.improve(steps, show_progress=False)
    graph_manager.close()
    return logger.names


def finished_race_names() -> set[str]:
    """What the race log writes for a finished exploring race and a finished greedy one."""
    logger = CapturingLogger()
    race_log = RaceLog(None, lambda values: logger.scalars(values, 0), ms_per_action=50)
    for explore in (True, False):
        info = {"finished": True, "race_time_ms": 21_500, "progress_fraction": 1.0, "end_reason": "finished"}
        race = SimpleNamespace(final_info=info, spec=SimpleNamespace(tag="short", explore=explore, store=True),
                               episode_return=1.0, source=(0, 0, 0), length=430)
        race_log.record(race, env_steps=100, wall_time_s=1.0)
    return logger.names


@pytest.fixture(scope="module")
def runtime_names() -> set[str]:
    cartpole = logged_names("cartpole_dqn", 800, training={"evaluate_every_n_env_steps": 400, "evaluation_episodes": 2})
    sim = logged_names("trackmania_iqn_sim", 1200, memory={"buffer_test_ratio": 0.3,
                                                           "number_times_single_memory_is_used_before_discard": 16.0},
                       performance={"torch_num_threads": 1, "gpu_collectors_count": 0, "envs_per_collector": 1})
    return cartpole | sim | finished_race_names()


def test_code_literals_are_documented():
    """Every metric name spelt in the code (placeholders matched as patterns) is in the doc."""
    literals = code_literals()
    assert "Performance/collector_<x>_actions_per_s" in literals  # the scan sees f-strings
    missing = [n for n in sorted(literals)
               if not any(pattern(d).fullmatch(n.replace("<x>", "X")) for d in documented_names())]
    assert not missing, f"metrics in the code but not in docs/tensorboard.md: {missing}"


def test_every_logged_metric_is_documented(runtime_names):
    """A short CartPole run and a short simulator run log only names the doc lists."""
    assert {"Training/loss", "Eval/return", "Race_explo/short/progress", "Training/test_loss",
            "Race_eval/short/race_time_s"} <= runtime_names
    missing = undocumented(runtime_names)
    assert not missing, f"logged but not in docs/tensorboard.md: {missing}"


def test_every_documented_metric_is_logged_somewhere(runtime_names):
    """The doc lists no metric that neither the runs nor the code's literals produce."""
    produced = runtime_names | {n.replace("<x>", "X") for n in code_literals()}
    stale = [d for d in documented_names() if not any(pattern(d).fullmatch(n) for n in produced)]
    assert not stale, f"in docs/tensorboard.md but never logged: {stale}"


def test_an_undocumented_name_is_caught():
    """The matcher is not vacuous: a new name, or a known one in another group, is reported."""
    assert undocumented({"Training/loss", "Race_eval/any_map/progress"}) == []
    assert undocumented({"Training/new_thing", "Eval/loss", "Race/a/b/best_race_time_s"}) == [
        "Eval/loss", "Race/a/b/best_race_time_s", "Training/new_thing"]
