"""The assemblers' arguments and windows beyond the n-step / mini-race tests."""
import numpy as np
import pytest
from gymnasium import spaces

from memories.assemblers import MiniRaceAssembler, NStepAssembler
from memories.replay import make_replay

SPACE = spaces.Dict({"floats": spaces.Box(-np.inf, np.inf, (2,), np.float32)})


def test_n_step_assembler_defaults_and_refusal():
    """NStepAssembler(): 1 step, no discarding; n_steps 0 is refused with the value."""
    a = NStepAssembler()
    assert a.n_steps == 1 and a.discard_non_greedy is False
    assert NStepAssembler(1).n_steps == 1
    with pytest.raises(ValueError, match="n_steps must be at least 1, got 0"):
        NStepAssembler(0)


def test_mini_race_assembler_defaults_and_refusal():
    """Defaults: clock in floats[0], no discarding; the horizon must exceed n_steps (equal is refused)."""
    a = MiniRaceAssembler(3, horizon=10)
    assert (a.clock_key, a.clock_index, a.discard_non_greedy) == ("floats", 0, False)
    assert MiniRaceAssembler(3, True, horizon=10).discard_non_greedy is True
    with pytest.raises(ValueError, match=r"mini-race horizon \(3 actions\) must exceed n_steps \(3\)"):
        MiniRaceAssembler(3, horizon=3)


def test_clocks_stay_below_the_horizon():
    """Clocks lie in [0, horizon - 1] even when the draw range reaches past the horizon."""
    a = MiniRaceAssembler(2, horizon=10, oversample_long_term_steps=4, oversample_maximum_term_steps=1)
    clocks = a.sample_clocks(np.random.default_rng(0), 5000)
    assert clocks.min() == 0 and clocks.max() == 9


def test_discarding_still_stops_at_the_episode_end():
    """With discard_non_greedy_actions_in_nsteps and greedy actions only, a window still ends with its episode."""
    memory = make_replay(SPACE, 50, 3, discard_non_greedy_actions_in_nsteps=True)
    for episode in range(2):
        for t in range(2):
            s = {"floats": np.array([0.0, t], np.float32)}
            memory.add(s, 0, 1.0, s, t == 1, False)
    batch = memory.gather(np.array([0, 1]), 1.0)
    assert batch.steps_used.tolist() == [2, 1] and batch.returns.tolist() == [2.0, 1.0]
    assert batch.discounts.tolist() == [0.0, 0.0]


def test_mini_race_weights_reach_the_batch():
    """The sampler's importance weights are the batch's weights in a mini-race replay too."""
    memory = make_replay(SPACE, 64, 1, prio_alpha=1.0, prio_epsilon=1e-9, seed=0,
                         mini_race=dict(horizon=10, oversample_long_term_steps=4, oversample_maximum_term_steps=1))
    for t in range(8):
        memory.add({"floats": np.zeros(2, np.float32)}, 0, 0.0, {"floats": np.zeros(2, np.float32)}, t == 7, False)
    memory.sampler.update(memory.storage, np.arange(8), np.arange(8) + 1.0)
    batch = memory.sample(64, 1.0)
    assert batch.weights.max().item() == 1.0 and batch.weights.min().item() < 0.5
