"""``rulka tune``'s search space (rulka/tune_space.py): a space file is refused before any trial starts when
a key does not exist, a value breaks the parameter's own rule, or a distribution is malformed; trials are
drawn reproducibly inside their ranges and each lands in the configuration as its -cp would."""
import math

import pytest

from rulka.config import ConfigError, apply_overrides
from rulka.presets import load_graph_manager
from rulka.tune_space import load_space


@pytest.fixture(scope="module")
def config():
    return load_graph_manager("cartpole_dqn").config


def space(tmp_path, text):
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return load_space(path)


def test_trials_are_drawn_in_their_ranges_and_applied_as_cp(tmp_path, config):
    """Every distribution draws inside its range (randint with both ends, loguniform on a log scale), the
    same seed draws the same trials, and 'as' wraps a value into the -cp text of a schedule."""
    s = space(tmp_path, "training.batch_size: {choice: [32, 64]}\n"
                        "training.n_steps: {randint: [1, 3]}\n"
                        "training.lr_schedule: {loguniform: [1.0e-4, 1.0e-2], as: '[[0, VALUE]]'}\n"
                        "exploration.tau_epsilon_boltzmann: {uniform: [0.0, 0.5]}\n")
    s.check(config)
    trials = s.sample(40, 0, config)
    assert trials == s.sample(40, 0, config)
    assert {t["training.batch_size"] for t in trials} == {32, 64}
    assert {t["training.n_steps"] for t in trials} == {1, 2, 3}
    assert all(1e-4 <= t["training.lr_schedule"] <= 1e-2 for t in trials)
    assert min(math.log10(t["training.lr_schedule"]) for t in trials) < -3.3  # log scale: small values drawn
    assert all(0.0 <= t["exploration.tau_epsilon_boltzmann"] <= 0.5 for t in trials)
    applied = apply_overrides(config, [], s.overrides(trials[0]))
    assert applied.training.batch_size == trials[0]["training.batch_size"]
    assert applied.training.lr_schedule.points[0][1] == pytest.approx(trials[0]["training.lr_schedule"])


@pytest.mark.parametrize("text, message", [
    ("training.batch_sise: {choice: [32]}", r"training.batch_sise.*unknown key 'batch_sise'.*did you mean 'batch_size'"),
    ("training.batch_size: {randint: [-4, 64]}", r"(?s)training.batch_size \(randint \[-4, 64\]\).*training.batch_size: must be a positive int, got -4"),
    ("training.batch_size: {uniform: [16.5, 64.0]}", r"training.batch_size.*expected int"),
    ("training.lr_schedule: {uniform: [-1.0, 1.0], as: '[[0, VALUE]]'}", r"(?s)training.lr_schedule \(uniform.*must be a positive number, got -1.0"),
    ("training.batch_size: {choice: []}", r"choice takes a non-empty list"),
    ("training.batch_size: {normal: [1, 2]}", r"give exactly one of choice, uniform, loguniform, randint"),
    ("training.lr_schedule: {loguniform: [0.0, 1.0e-3]}", r"loguniform needs 0 < low"),
    ("training.lr_schedule: {uniform: [1.0e-4, 1.0e-3], as: '[[0, 1]]'}", r"'as' is the -cp value with VALUE"),
    ("training:\n  batch_size: {choice: [32]}", r"write each key in full"),
    ("[1, 2]", r"must be a mapping"),
])
def test_a_bad_space_is_refused_with_the_usual_message(tmp_path, config, text, message):
    """Each mistake is refused by load_space or check (before any trial), naming the file, the key and the
    rule, with the -cp loader's own message (e.g. its 'did you mean')."""
    with pytest.raises(ConfigError, match=message):
        space(tmp_path, text).check(config)


def test_a_combination_the_config_refuses_is_refused_before_the_sweep(tmp_path, config):
    """Rules across keys are checked on every drawn trial: a memory that starts learning beyond its own
    capacity is refused, naming the trial and its values."""
    s = space(tmp_path, "memory.memory_size_schedule: {choice: [[[0, [1000, 2000]]]]}\n")
    with pytest.raises(ConfigError, match=r"memory"):
        s.check(config)
        s.sample(1, 0, config)
