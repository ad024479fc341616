"""The stand-in game through the whole link: launch.sh -> AngelScript host with rulka_link.as -> TCP ->
client -> TMIBackend -> TrackManiaEnv, compared with the simulator backend (tests named test_standin*)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from environments.trackmania.tools.baseline import BaselineDriver
from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.layout import FloatLayout
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.track import track_from_map
from environments.trackmania.tmi.standin.tracks import LINES_DIR, write_track_files
from environments.trackmania.tracks import get_track

from .standin_helpers import (TraceReplayBackend, action_points, drive, processes_mentioning, read_trace,
                              standin_available, standin_environ, standin_settings)

ACCELERATE, BRAKE_ONLY = 0, None  # filled below from the actions table
from environments.trackmania.actions import inputs_to_action  # noqa: E402

ACCELERATE = inputs_to_action(True, False, False, False)
BRAKE_ONLY = inputs_to_action(False, True, False, False)
PARAMS = TrackManiaEnvironmentParameters(H_downsized=48, W_downsized=64)


@pytest.fixture(scope="module")
def standin_races(tmp_path_factory):
    """Three races on `short` through one stand-in game (classical driver, full throttle straight on,
    brakes only) and one on `medium` (the same game loads a second map), traced; and the same
    drivers on the simulator backend (no start jitter)."""
    standin_available()
    tmp = tmp_path_factory.mktemp("standin")
    mp = pytest.MonkeyPatch()
    for key, value in standin_environ(tmp).items():
        mp.setenv(key, value)
    settings = standin_settings(1)
    track = track_from_map("short", LINES_DIR / "short.npy", road_width=24.0, name="short")
    env = TrackManiaEnv(PARAMS, track=track, backend="tmi", backend_options={"settings": settings, "running_speed": 100})
    drivers = {"classical": None, "throttle": lambda e: ACCELERATE, "brake": lambda e: BRAKE_ONLY,
               "medium": lambda e: ACCELERATE}
    tracks = {name: "short" for name in drivers} | {"medium": "medium"}
    races = {}
    trace_path = tmp / f"trace_{settings.base_port}.jsonl"
    try:
        for name in drivers:
            policy = drivers[name]
            if policy is None:
                baseline = BaselineDriver(get_track("short"))
                policy = lambda e, d=baseline: d.act(e.state)  # noqa: E731
            skip = len(read_trace(trace_path)) if trace_path.exists() else 0
            if tracks[name] != env.track.name:
                env.reset(options={"track": track_from_map(tracks[name], LINES_DIR / f"{tracks[name]}.npy",
                                                           road_width=24.0, name=tracks[name])})
                env.backend.end_race()
                skip = len(read_trace(trace_path))
            race = drive(env, policy)
            race["trace"] = read_trace(trace_path)[skip:]
            races[name] = race
    finally:
        env.close()
        mp.undo()
    sim_races = {}
    sim_env = TrackManiaEnv(PARAMS, track=get_track("short"), backend="sim",
                            backend_options={"start_lateral_jitter_m": 0.0, "start_heading_jitter_rad": 0.0})
    for name in drivers:
        if tracks[name] != sim_env.track.name:
            sim_env.reset(options={"track": get_track(tracks[name])})
        policy = drivers[name]
        if policy is None:
            baseline = BaselineDriver(get_track("short"))
            policy = lambda e, d=baseline: d.act(e.state)  # noqa: E731
        sim_races[name] = drive(sim_env, policy)
    sim_env.close()
    return {"link": races, "sim": sim_races, "tmp": tmp, "tracks": tracks}


def test_standin_classical_driver_finishes_short_as_on_the_simulator(standin_races):
    """The classical driver through a stand-in finishes `short` in its simulator-backend time, to the
    50 ms step (the game's finish is timed to the 10 ms tick, the simulator backend's to the action)."""
    link = standin_races["link"]["classical"]["infos"][-1]
    sim = standin_races["sim"]["classical"]["infos"][-1]
    assert link["finished"] and sim["finished"], (link["end_reason"], sim["end_reason"])
    assert link["end_reason"] == sim["end_reason"] == "finished"
    assert abs(link["race_time_ms"] - sim["race_time_ms"]) <= 50, (link["race_time_ms"], sim["race_time_ms"])
    # the game reports every checkpoint, the finish last; the simulator its gates
    assert len(link["checkpoint_times_ms"]) == len(sim["checkpoint_times_ms"]) + 1 == 3
    for a, b in zip(link["checkpoint_times_ms"], sim["checkpoint_times_ms"]):
        assert abs(a - b) <= 50


@pytest.mark.parametrize("driver", ["classical", "throttle", "brake", "medium"])
def test_standin_races_end_with_the_simulator_backends_reasons(standin_races, driver):
    """A finish, a held car and a car driven into the first turn (of `short`, and of `medium` after a
    map change) end with the same reason (finish, checkpoint, cut-off) through the link as on the
    simulator backend."""
    link = standin_races["link"][driver]
    sim = standin_races["sim"][driver]
    assert link["infos"][-1]["end_reason"] == sim["infos"][-1]["end_reason"]
    assert (link["terminated"], link["truncated"]) == (sim["terminated"], sim["truncated"])
    assert not any(info.get("discarded") for info in link["infos"])
    assert abs(len(link["actions"]) - len(sim["actions"])) <= 1


@pytest.mark.parametrize("driver", ["classical", "throttle", "brake", "medium"])
def test_standin_observations_equal_the_simulator_backends_for_the_same_car_state(standin_races, driver):
    """Every frame and float vector the collectors got through the link equals what the simulator
    backend gives for the same car state (replayed from the stand-in's trace on the built-in `short`),
    and so do rewards and the episode end. The frame is the car 10 ms after the state, as in TMNF.

    Not compared: the gear-change counter (the tmi backend counts actions while the gearbox shifts,
    as Linesight; the simulator reports seconds since the last shift)."""
    race = standin_races["link"][driver]
    steps = action_points(race["trace"], race["infos"])
    assert len(steps) == len(race["obs"])
    replay_env = TrackManiaEnv(PARAMS, track=get_track(standin_races["tracks"][driver]),
                               backend=TraceReplayBackend(PARAMS, steps))
    layout = FloatLayout.from_parameters(PARAMS)
    keep = np.ones(layout.size, dtype=bool)
    keep[layout.gear_change_counter] = False
    obs, info = replay_env.reset(seed=0)
    replay = [(obs, 0.0, info)]
    for action in race["actions"]:
        obs, reward, terminated, truncated, info = replay_env.step(action)
        replay.append((obs, reward, info))
    for k, (link_obs, (sim_obs, sim_reward, sim_info)) in enumerate(zip(race["obs"], replay)):
        assert np.array_equal(link_obs["frame"], sim_obs["frame"]), f"frame {k} differs"
        np.testing.assert_allclose(link_obs["floats"][keep], sim_obs["floats"][keep], rtol=1e-5, atol=2e-4,
                                   err_msg=f"floats of step {k}")
        if k:
            assert race["rewards"][k - 1] == pytest.approx(sim_reward, abs=1e-5)
    assert race["infos"][-1]["end_reason"] == replay[-1][2]["end_reason"]
    assert (terminated, truncated) == (race["terminated"], race["truncated"])


def test_standin_leaves_no_process_behind(standin_races):
    """Closing the environment ends the stand-in game and its physics process."""
    deadline = time.monotonic() + 10
    while processes_mentioning(str(standin_races["tmp"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(str(standin_races["tmp"])) == []


def test_standin_command_answers_tmi_check(tmp_path):
    """`rulka tmi standin --port N` starts a game that `rulka tmi check --port N` diagnoses as working."""
    standin_available()
    from .standin_helpers import free_port_block

    port = free_port_block(1)
    rulka = [str(Path(sys.executable).with_name("rulka"))]
    game = subprocess.Popen([*rulka, "tmi", "standin", "--port", str(port), "--trace", str(tmp_path / "t.jsonl")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        check = None
        while time.monotonic() < deadline:
            check = subprocess.run([*rulka, "tmi", "check", "--port", str(port), "--timeout", "5"],
                                   capture_output=True, text=True, timeout=30)
            if check.returncode == 0:
                break
            time.sleep(0.5)
        assert check is not None and check.returncode == 0, (check.stdout if check else "", check.stderr if check else "")
        assert "ok" in check.stdout
    finally:
        game.kill()
        game.wait(timeout=10)
    deadline = time.monotonic() + 10
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(str(tmp_path)) == []


def test_standin_track_files_match_the_builtin_tracks(tmp_path):
    """The shipped line files are the built-in tracks' lines and checkpoints (regenerate them with
    `rulka tmi standin --write-line NAME --out environments/trackmania/tmi/standin/lines`)."""
    for name in ("short", "medium"):
        line, cps = write_track_files(name, tmp_path)
        assert np.array_equal(np.load(line), np.load(LINES_DIR / line.name))
        assert np.array_equal(np.load(cps), np.load(LINES_DIR / cps.name))
        track = track_from_map(name, LINES_DIR / line.name, name=name)
        assert track.checkpoint_s == get_track(name).checkpoint_s

