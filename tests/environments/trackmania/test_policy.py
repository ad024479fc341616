"""A TrackMania policy outside its run: the exported policy drives the simulator as the run's agent does,
a trained export finishes `short` in its run's evaluation time, and ``--init-from`` carries weights to
another map and from the simulator to the real-game backend."""
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.training.trackmania_graph_manager import greedy_race_line
from environments.trackmania.training.map_cycle import cycle_entries, entry_track
from rulka.config import apply_overrides
from rulka.core_types import RunPhase
from rulka.export import ExportError, export_policy, init_networks_from
from rulka.graph_manager import EVAL_SEED_OFFSET
from rulka.level_manager import LevelManager
from rulka.policy import load_policy
from rulka.presets import load_graph_manager
from tests.environments.trackmania.helpers import straight_line

#: Races of at most 100 actions, a memory that saves nothing large, no collector process.
SMALL = ["memory.save_memory_in_checkpoint=false", "performance.gpu_collectors_count=0",
         "performance.envs_per_collector=1", "environment.cutoff_rollout_if_race_not_finished_within_duration_ms=5000"]


def sim_run(tmp_path, track="short"):
    """A trackmania_iqn_sim run folder on ``track`` with a checkpoint of its (untrained) networks."""
    graph_manager = load_graph_manager("trackmania_iqn_sim")
    graph_manager.config = apply_overrides(graph_manager.config, [], [
        *SMALL, f"map_cycle.entries=[{{short_name: {track}, map_path: {track}, is_exploration: false}}]"])
    run_dir = tmp_path / f"sim_{track}"
    graph_manager.create(run_dir, "cpu", 0)
    (run_dir / "run_info.yaml").write_text(yaml.safe_dump({"preset": "trackmania_iqn_sim", "seed": 0}))
    graph_manager.save_checkpoint()
    return graph_manager, run_dir


def race(env, choose):
    """Play one race from reset(seed=0) with ``choose(observation)``; its actions and the last info."""
    torch.manual_seed(0)  # IQN acts on sampled quantiles: both races draw the same ones
    observation, _ = env.reset(seed=0)
    actions, done, info = [], False, {}
    while not done:
        action = choose(observation)
        actions.append(action)
        observation, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    return actions, info


def test_exported_policy_drives_the_simulator_as_the_run_greedy_agent(tmp_path):
    """An exported TrackMania policy takes the simulator's raw dict observation (frame + floats) and
    returns the env's action: its race is the run's greedy agent's race, action for action, to the same
    race time and progress."""
    graph_manager, run_dir = sim_run(tmp_path)
    policy = load_policy(export_policy(run_dir, tmp_path / "exp"))
    track = entry_track(cycle_entries(graph_manager.config)[0], "sim")
    env = TrackManiaEnv(graph_manager.config.environment, track=track, backend="sim")
    level = LevelManager(graph_manager.agent, env, graph_manager.input_filter, graph_manager.output_filter)

    def agent_action(observation):
        batched = {k: np.expand_dims(v, 0) for k, v in level.input_filter.filter_observation(observation).items()}
        return int(graph_manager.agent.act(batched, RunPhase.EVALUATE).actions[0])

    run_actions, run_info = race(env, agent_action)
    policy_actions, policy_info = race(env, lambda obs: policy.predict(obs, deterministic=True, sampled_quantiles=True))
    graph_manager.close()
    assert len(run_actions) > 10 and isinstance(policy_actions[0], int)
    assert policy_actions == run_actions
    assert policy_info["race_time_ms"] == run_info["race_time_ms"]
    assert policy_info["progress_fraction"] == run_info["progress_fraction"]


#: A policy trained on `short` (trackmania_iqn_sim, smaller network), exported with ``rulka export``, with
#: its run's race log and what ``rulka --evaluate RUN_DIR`` printed: data/short_policy/README.md says how.
TRAINED = Path(__file__).parent / "data" / "short_policy"


def run_evaluation() -> tuple[str, int]:
    """The greedy race line of the run's ``rulka --evaluate`` (the fixture's evaluate.txt) and its reset seed."""
    text = (TRAINED / "evaluate.txt").read_text(encoding="utf-8")
    match = re.search(r"^evaluation: (greedy race on short \(reset seed (\d+)\): .*)$", text, re.MULTILINE)
    assert match, f"{TRAINED / 'evaluate.txt'} records no greedy race on short"
    return match[1], int(match[2])


def test_trained_export_finishes_short_as_its_run_evaluation():
    """load_policy on a trained export drives the simulator greedily to the finish of `short` exactly as
    `rulka --evaluate` raced the run folder: finished, in the same race time (ms). Conditions as the run's evaluation: its reset
    seed, and the quantiles IQN samples for each action drawn from the same generator state (--seed, then
    the agent's construction); they matter: the greedy action of a trained IQN changes with them. With the
    network's initial weights (weights not loaded) the car does not finish in as many actions."""
    line, reset_seed = run_evaluation()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the run's torch_num_threads: 2 threads on a loaded CPU act 20x slower
    try:
        torch.manual_seed(reset_seed - EVAL_SEED_OFFSET)  # as `rulka --evaluate --seed S` seeds before it builds the agent
        policy = load_policy(TRAINED)
        env = TrackManiaEnv(policy.config.environment, track="short", backend="sim")

        def greedy_race(max_actions: int = 100_000) -> tuple[dict, int]:
            observation, _ = env.reset(seed=reset_seed)
            done, info, actions = False, {}, 0
            while not done and actions < max_actions:
                observation, _, terminated, truncated, info = env.step(
                    policy.predict(observation, deterministic=True, sampled_quantiles=True))
                done, actions = terminated or truncated, actions + 1
            return info, actions

        info, actions = greedy_race()
        assert greedy_race_line(reset_seed, info) == line
        assert info["finished"]
        policy.agent.online_network.load_state_dict(policy.agent.create_networks().state_dict())  # initial weights
        assert not greedy_race(actions)[0].get("finished")
        env.close()
    finally:
        torch.set_num_threads(threads)


def test_evaluate_export_without_preset_reports_the_run_evaluation(capsys):
    """`rulka --evaluate EXPORT_DIR` (no -p: the export's preset and config snapshot) prints the same
    greedy race as `rulka --evaluate RUN_DIR` printed for the run: same reset seed, end and race time."""
    from rulka.cli import main

    line, reset_seed = run_evaluation()
    assert main(["--evaluate", str(TRAINED), "--device", "cpu", "--seed", str(reset_seed - EVAL_SEED_OFFSET),
                 "-cp", "training.evaluation_episodes=1"]) == 0
    assert f"evaluation: {line}" in capsys.readouterr().out


def test_deterministic_predict_gives_the_same_action_every_call(tmp_path):
    """predict(deterministic=True) on a TrackMania IQN policy returns the same action for the same
    observation on every call (fixed quantile fractions); with sampled fractions the values change
    from call to call."""
    _, run_dir = sim_run(tmp_path)
    policy = load_policy(export_policy(run_dir, tmp_path / "exp"))
    env = TrackManiaEnv(policy.config.environment, track="short", backend="sim")
    observations = [env.reset(seed=0)[0]]
    for action in [3, 0, 1, 2, 3, 4, 5]:
        observations.append(env.step(action)[0])
    env.close()
    batch = {k: np.stack([o[k] for o in observations]) for k in observations[0]}
    first = policy.q_values(batch)
    for _ in range(10):
        assert np.array_equal(policy.q_values(batch), first)
        assert policy.predict(batch, deterministic=True).tolist() == first.argmax(1).tolist()
    assert {policy.predict(observations[0], deterministic=True) for _ in range(10)} == {int(first[0].argmax())}
    assert not np.array_equal(policy.q_values(batch, sampled_quantiles=True),
                              policy.q_values(batch, sampled_quantiles=True))


def test_init_from_crosses_maps_and_backends(tmp_path):
    """Weights trained on the simulator's `short` start a run on `medium`, and a real-game (tmi) run whose
    network has the simulator preset's sizes; the uni preset's own sizes are refused naming the layer."""
    _, run_dir = sim_run(tmp_path)
    exported = export_policy(run_dir, tmp_path / "exp")
    expected = torch.load(exported / "policy.pt", weights_only=True)

    medium, _ = sim_run(tmp_path, "medium")
    init_networks_from(medium, exported)
    assert all(torch.equal(medium.agent.target_network.state_dict()[k], v) for k, v in expected.items())
    medium.close()

    line = tmp_path / "line.npy"
    np.save(line, straight_line(300.0))
    a_map = [f"map_cycle.entries=[{{short_name: a, map_path: a.Challenge.Gbx, reference_line_path: '{line}'}}]",
             "performance.gpu_collectors_count=1"]
    game = load_graph_manager("trackmania_iqn_uni")
    sizes = ["environment.H_downsized=48", "environment.W_downsized=64", "neural_network.float_hidden_dim=128",
             "neural_network.dense_hidden_dimension=128"]
    game.config = apply_overrides(game.config, [], sizes + a_map)
    assert game.config.environment.backend == "tmi"
    game.create(None, "cpu", 0)  # no game starts: the spaces come from the parameters
    init_networks_from(game, run_dir)
    assert all(torch.equal(game.agent.online_network.state_dict()[k], v) for k, v in expected.items())
    game.close()

    uni_sizes = load_graph_manager("trackmania_iqn_uni")
    uni_sizes.config = apply_overrides(uni_sizes.config, [], a_map)
    uni_sizes.create(None, "cpu", 0)
    with pytest.raises(ExportError, match=r"layer '\S+' has shape \(\d+(, \d+)*\) in --init-from .* and \(\d+"):
        init_networks_from(uni_sizes, exported)
    uni_sizes.close()


def test_best_greedy_race_time_is_the_fastest_finished_greedy_race(tmp_path):
    """The TrackMania graph manager's best evaluation (progress line, final summary) is the fastest
    finished greedy race so far: exploring races and unfinished ones do not count; the last evaluation
    is the last greedy race's time (None when it did not finish)."""
    from environments.trackmania.training.race_log import RaceResult

    graph_manager, _ = sim_run(tmp_path)
    races = iter([RaceResult("short", False, True, 21.5, 1.0, 0.0, 1, 1.0),
                  RaceResult("short", True, True, 15.0, 1.0, 0.0, 2, 2.0),  # exploring: not an evaluation
                  RaceResult("short", False, True, 19.8, 1.0, 0.0, 3, 3.0),
                  RaceResult("short", False, False, 30.0, 0.6, 0.0, 4, 4.0)])
    graph_manager.race_log.record = lambda *args: next(races)
    graph_manager.stop_at_evaluation = None  # as improve() sets it
    seen, reported = [], []
    graph_manager.evaluation_listeners.append(lambda gm: reported.append((gm.last_evaluation, gm.best_evaluation)))
    for _ in range(4):
        graph_manager.episode_ended(None)
        seen.append((graph_manager.last_evaluation, graph_manager.best_evaluation))
    graph_manager.close()
    assert seen == [(21.5, 21.5), (21.5, 21.5), (19.8, 19.8), (None, 19.8)]
    assert reported == [(21.5, 21.5), (19.8, 19.8), (None, 19.8)]  # each greedy race, to rulka tune's trials
    assert graph_manager.evaluation_mode == "min"  # a race time: rulka tune ranks lower first


def test_record_races_a_trained_policy(tmp_path, capsys):
    """`rulka record --policy EXPORT_DIR` drives the simulator with the exported policy (its run's frame size)."""
    from rulka.cli import main

    _, run_dir = sim_run(tmp_path)
    exported = export_policy(run_dir, tmp_path / "exp")
    assert main(["record", "--track", "short", "--policy", str(exported), "--out", str(tmp_path / "rec"),
                 "--max-steps", "20"]) == 0
    assert "20 actions" in capsys.readouterr().out
    assert (tmp_path / "rec" / "short_policy.gif").is_file()
