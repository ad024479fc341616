"""Whole rollouts through GameInstanceManager and TMIBackend against the fake game server."""
from __future__ import annotations

import time

import numpy as np
import pytest

from environments.trackmania.backend import InputState
from environments.trackmania.tmi.backend import TMIBackend, map_path_of
from environments.trackmania.tmi.games.game_instance_manager import CONSOLE_SETTINGS, GameInstanceManager, RolloutDiscarded
from environments.trackmania.tmi.link.protocol import bgra_to_gray
from environments.trackmania.tmi.games.settings import TMISettings
from environments.trackmania.tmi.link.state import decode_state
from rulka.phased_steps import run_phases

MAP = "Campaign/A01-Race.Challenge.Gbx"
ACCEL = dict(accelerate=True, brake=False, left=False, right=False)


def drive_to_finish(manager: GameInstanceManager, max_steps: int = 200):
    results = []
    for _ in range(max_steps):
        r = manager.step(**ACCEL)
        results.append(r)
        if r.finished:
            return results
    raise AssertionError("the car did not finish")


def make_manager(launcher, config, account: str | None = "rulka_bot") -> GameInstanceManager:
    return GameInstanceManager(0, settings=TMISettings(account_name=account), config=config, launcher=launcher)


def test_race_to_finish_then_rewound_second_race(fake_launcher, fast_config):
    """A race runs to the finish on 50 ms steps; the second race rewinds to the saved start state."""
    launcher = fake_launcher()
    m = make_manager(launcher, fast_config)
    try:
        first = m.start_race(MAP)
        assert first.race_time_ms == 0 and first.frame.shape == (120, 160) and first.frame.dtype == np.uint8
        steps = drive_to_finish(m)
        times = [r.race_time_ms for r in steps[:-1]]
        assert times == list(range(50, 50 * len(times) + 1, 50))
        final = steps[-1]
        assert final.finished and len(final.checkpoint_times_ms) == 2
        assert decode_state(final.state).position[2] >= 25.0
        server = launcher.servers[0]
        assert server.give_ups == 1 and server.start_rewinds == 0 and server.map == MAP

        second = m.start_race(MAP)
        assert second.race_time_ms == 0 and decode_state(second.state).position[2] == 0.0
        steps2 = drive_to_finish(m)
        assert server.start_rewinds == 1 and server.give_ups == 1, "the second race must rewind, not give up"
        assert steps2[-1].race_time_ms == final.race_time_ms, "same inputs, same race: deterministic"
        assert len(launcher.servers) == 1
    finally:
        m.close()


def test_two_games_raced_in_phases_in_one_thread_give_the_races_of_plain_steps(fake_launcher, fast_config):
    """Phased steps (a collector interleaves its games in one thread): each step of a game yields twice
    (after the inputs go out, after the state and frame are requested); two games stepped together in
    rounds finish the same race, step for step, as a game stepped with plain ``step``."""
    plain = make_manager(fake_launcher(), fast_config)
    games = [make_manager(fake_launcher(), fast_config) for _ in range(2)]
    try:
        plain.start_race(MAP)
        expected = drive_to_finish(plain)
        for m in games:
            m.start_race(MAP)
        got: list[list] = [[], []]
        for _ in range(len(expected)):
            results = [None, None]
            run_phases([m.step_phases(**ACCEL) for m in games], results)
            for k in range(2):
                got[k].append(results[k])
        for k in range(2):
            assert [r.race_time_ms for r in got[k]] == [r.race_time_ms for r in expected]
            assert got[k][-1].finished and got[k][-1].checkpoint_times_ms == expected[-1].checkpoint_times_ms
            assert all(np.array_equal(a.frame, b.frame) and a.state == b.state for a, b in zip(got[k], expected))
        games[0].start_race(MAP)
        steps = games[0].step_phases(**ACCEL)
        assert next(steps) is None and next(steps) is None  # inputs sent; state and frame requested
        with pytest.raises(StopIteration) as ended:
            next(steps)
        assert ended.value.value.race_time_ms == 50
    finally:
        plain.close()
        for m in games:
            m.close()


def test_a_hang_in_a_phased_step_discards_that_race_only(fake_launcher, fast_config):
    """A game that hangs while stepped in phases beside another: its race is discarded
    (:class:`RolloutDiscarded`, raised after the other game's step of that round ended and was returned)."""
    healthy = make_manager(fake_launcher(), fast_config)
    hanging = make_manager(fake_launcher(per_launch=[{"hang_at_ms": 200}]), fast_config)
    try:
        healthy.start_race(MAP)
        hanging.start_race(MAP)
        results = [None, None]
        with pytest.raises(RolloutDiscarded, match="timed out"):
            for _ in range(20):
                run_phases([healthy.step_phases(**ACCEL), hanging.step_phases(**ACCEL)], results)
        assert results[0].race_time_ms == healthy.last_action_time_ms > 0
        assert not hanging.race_active and healthy.race_active
    finally:
        healthy.close()
        hanging.close()


def test_connect_sends_console_settings_and_loads_map(fake_launcher, fast_config):
    """On connect the manager sends the console settings, autologin and loads the map from the menus."""
    launcher = fake_launcher()
    m = make_manager(launcher, fast_config)
    try:
        m.start_race(MAP)
        commands = launcher.servers[0].commands
        for expected in CONSOLE_SETTINGS + ("set autologin rulka_bot", "set countdown_speed 1", f"map {MAP}"):
            assert expected in commands
        assert launcher.servers[0].step_period == 50
    finally:
        m.close()


def test_frame_is_grayscale_of_the_games_bgra(fake_launcher, fast_config):
    """The frame returned is the ITU-R 601 grayscale of the BGRA screenshot the game sent."""
    launcher = fake_launcher()
    m = make_manager(launcher, fast_config)
    try:
        r = m.start_race(MAP)
        expected = bgra_to_gray(launcher.servers[0].frame_bgra(160, 120), 160, 120)
        np.testing.assert_array_equal(r.frame, expected)
    finally:
        m.close()


def race_a_little(m) -> None:
    """Start a race and play 5 actions of it."""
    m.start_race(MAP)
    for _ in range(5):
        m.step(**ACCEL)


def launcher_with_stranger(fake_launcher):
    """A launcher that refuses (PortHeldError, naming pid 4242) while ``stranger["there"]``, else launches a
    fake game: (launcher, the fake launcher with its servers, the stranger flag)."""
    from environments.trackmania.tmi.games.launcher import PortHeldError

    fakes = fake_launcher()
    stranger = {"there": False}

    def launcher(port):
        if stranger["there"]:
            raise PortHeldError(f"port {port} is held by a process that rulka did not launch (pid 4242: sleep)")
        return fakes(port)

    return launcher, fakes, stranger


def test_cut_off_then_new_race(fake_launcher, fast_config):
    """end_race() mid-race leaves the game blocked; the next race rewinds to race time 0 and finishes."""
    launcher = fake_launcher()
    m = make_manager(launcher, fast_config)
    try:
        race_a_little(m)
        m.end_race()
        with pytest.raises(RuntimeError):
            m.step(**ACCEL)
        r = m.start_race(MAP)
        assert r.race_time_ms == 0
        assert drive_to_finish(m)[-1].finished
        assert launcher.servers[0].start_rewinds == 1
    finally:
        m.close()


def test_game_hang_is_detected_and_instance_relaunched(fake_launcher, fast_config):
    """A game that stops answering mid-race makes step() raise RolloutDiscarded; the next race relaunches."""
    launcher = fake_launcher(per_launch=[{"hang_at_ms": 400}])
    m = make_manager(launcher, fast_config)
    try:
        m.start_race(MAP)
        with pytest.raises(RolloutDiscarded) as err:
            for _ in range(100):
                m.step(**ACCEL)
        assert err.value.message_id is None or err.value.message_id >= 1
        assert "timed out" in str(err.value)
        assert not launcher.servers[0].is_alive(), "the hung instance must be killed"
        m.start_race(MAP)
        assert m.launch_count == 2 and len(launcher.servers) == 2
        assert drive_to_finish(m)[-1].finished
    finally:
        m.close()


@pytest.mark.reliability
def test_game_hung_between_races_is_relaunched_within_the_in_race_timeout(fake_launcher, fast_config):
    """A game that stops (as by SIGSTOP) while it waits between races is found hung within the in-race
    timeout, as mid-race, not the start timeout (600 s by default, for menus and map loads): a race on the
    loaded map starts by a rewind, as quick as an action. start_race kills it and races on a new game."""
    fast_config.start_timeout_s = 30.0
    launcher = fake_launcher()
    m = make_manager(launcher, fast_config)
    try:
        race_a_little(m)
        m.end_race()
        launcher.servers[0].freeze()
        started = time.monotonic()
        r = m.start_race(MAP)
        took = time.monotonic() - started
        assert r.race_time_ms == 0 and m.launch_count == 2 and len(launcher.servers) == 2
        assert not launcher.servers[0].is_alive(), "the hung instance must be killed"
        assert took < 15.0, f"found hung after {took:.1f} s; the in-race timeout is 1 s, the start timeout 30 s"
        assert drive_to_finish(m)[-1].finished
    finally:
        m.close()


def test_a_healthy_game_waiting_between_races_is_left_alone_by_the_check(fake_launcher, fast_config):
    """check_between_races asks a game that waits between races one question: a game that answers keeps
    its connection and its place, and the next race starts by the usual rewind."""
    launcher = fake_launcher()
    m = make_manager(launcher, fast_config)
    try:
        m.start_race(MAP)
        drive_to_finish(m)
        for _ in range(3):
            m.check_between_races()
        assert m.launch_count == 1 and launcher.servers[0].connections == 1
        rewinds = launcher.servers[0].start_rewinds
        assert m.start_race(MAP).race_time_ms == 0 and launcher.servers[0].start_rewinds == rewinds + 1
        assert drive_to_finish(m)[-1].finished
    finally:
        m.close()


@pytest.mark.reliability
def test_a_game_that_dies_between_races_is_relaunched_by_the_check(fake_launcher, fast_config):
    """A game that dies while its collector waits between races is found by check_between_races, not at
    the next race: a new game is launched at once, and the next race runs on it without another launch."""
    launcher = fake_launcher()
    m = make_manager(launcher, fast_config)
    try:
        race_a_little(m)
        m.end_race()
        launcher.servers[0].terminate()
        m.check_between_races()
        assert m.launch_count == 2 and launcher.servers[1].is_alive()
        m.check_between_races()  # the new game, not yet connected, is left to start
        assert m.launch_count == 2
        assert m.start_race(MAP).race_time_ms == 0 and m.launch_count == 2
        assert drive_to_finish(m)[-1].finished
    finally:
        m.close()


@pytest.mark.reliability
def test_a_game_killed_when_its_race_failed_is_relaunched_by_the_next_check(fake_launcher, fast_config, caplog):
    """A game dies mid-race (the race is discarded, the game killed) and its collector then waits for the
    learner: the next check_between_races relaunches it at once, not the next race, so a stranger that took
    its port is named now (the soak of 2026-12-06 23:44 named two such strangers 5.9 and 10.7 s after the
    game died, at the next race). The check tries once: the refusal is logged, not repeated every second,
    and the next race raises it. Without a stranger the check's game is the one the next race uses."""
    from environments.trackmania.tmi.games.launcher import PortHeldError

    launcher, fakes, stranger = launcher_with_stranger(fake_launcher)
    m = make_manager(launcher, fast_config)
    try:
        race_a_little(m)
        fakes.servers[0].terminate()
        with pytest.raises(RolloutDiscarded):
            for _ in range(100):
                m.step(**ACCEL)
        assert m.process is None and m.launch_count == 1
        stranger["there"] = True
        m.check_between_races()
        assert caplog.text.count("held by a process that rulka did not launch (pid 4242") == 1, caplog.text
        m.check_between_races()
        assert caplog.text.count("held by a process that rulka did not launch (pid 4242") == 1, "tried again"
        with pytest.raises(PortHeldError):
            m.start_race(MAP)
        stranger["there"] = False
        race_a_little(m)  # a new game on the port: launch 2
        fakes.servers[1].terminate()
        with pytest.raises(RolloutDiscarded):
            for _ in range(100):
                m.step(**ACCEL)
        m.check_between_races()
        assert m.launch_count == 3 and fakes.servers[2].is_alive()
        assert m.start_race(MAP).race_time_ms == 0 and m.launch_count == 3
        assert drive_to_finish(m)[-1].finished
    finally:
        m.close()


@pytest.mark.reliability
def test_a_relaunch_refused_between_races_is_logged_then_raised_at_the_next_race(fake_launcher, fast_config, caplog):
    """A stranger's program took the port of a game that died between races: the check's relaunch is refused
    (PortHeldError). The check logs the refusal at once but does not raise (its collector may hold finished
    races not yet sent, which an error would lose); the next race launches again and raises it, and once the
    stranger is gone a race starts."""
    from environments.trackmania.tmi.games.launcher import PortHeldError

    launcher, fakes, stranger = launcher_with_stranger(fake_launcher)
    m = make_manager(launcher, fast_config)
    try:
        race_a_little(m)
        m.end_race()
        fakes.servers[0].terminate()
        stranger["there"] = True
        m.check_between_races()
        assert m.process is None and "held by a process that rulka did not launch (pid 4242" in caplog.text
        with pytest.raises(PortHeldError):
            m.start_race(MAP)
        stranger["there"] = False
        assert m.start_race(MAP).race_time_ms == 0 and len(fakes.servers) == 2
    finally:
        m.close()


@pytest.mark.reliability
def test_a_game_that_hangs_between_races_is_killed_by_the_check_within_the_in_race_timeout(fake_launcher,
                                                                                          fast_config):
    """A game stopped (as by SIGSTOP) while it waits between races does not answer the check's question
    within the in-race timeout (1 s here): it is killed and a new game launched at once."""
    launcher = fake_launcher()
    m = make_manager(launcher, fast_config)
    try:
        m.start_race(MAP)
        drive_to_finish(m)
        launcher.servers[0].freeze()
        started = time.monotonic()
        m.check_between_races()
        took = time.monotonic() - started
        assert 0.9 <= took < 5.0, f"found hung after {took:.1f} s; the in-race timeout is 1 s"
        assert not launcher.servers[0].is_alive() and m.launch_count == 2 and launcher.servers[1].is_alive()
        assert m.start_race(MAP).race_time_ms == 0 and drive_to_finish(m)[-1].finished
    finally:
        m.close()


@pytest.mark.reliability
def test_reconnection_waits_the_start_timeout_for_the_games_hello(fake_launcher, fast_config):
    """After a dropped connection the next race starts by a rewind, but the game's first message on the
    new connection (SC_ON_CONNECT_SYNC) comes only once the plugin has given up the old client, after
    its own timeout: that wait gets the start timeout, not the in-race one, and the game is kept."""
    launcher = fake_launcher()
    m = make_manager(launcher, fast_config)
    try:
        race_a_little(m)
        m._drop_client()  # the connection drops mid-race; the game keeps running
        launcher.servers[0].reconnect_delay_s = 2 * fast_config.timeout_during_run_ms / 1000
        assert launcher.servers[0].reconnect_delay_s < fast_config.start_timeout_s
        r = m.start_race(MAP)
        assert r.race_time_ms == 0
        assert m.launch_count == 1 and len(launcher.servers) == 1, "a game slow to say hello is not hung"
        assert launcher.servers[0].connections == 2
        assert drive_to_finish(m)[-1].finished
    finally:
        m.close()


def test_dropped_connection_mid_race_reconnects(fake_launcher, fast_config):
    """A connection dropped mid-race discards the rollout; the manager reconnects to the same game."""
    launcher = fake_launcher(per_launch=[{"drop_at_ms": 300}])
    m = make_manager(launcher, fast_config)
    try:
        m.start_race(MAP)
        with pytest.raises(RolloutDiscarded, match="closed"):
            for _ in range(100):
                m.step(**ACCEL)
        r = m.start_race(MAP)
        assert r.race_time_ms == 0
        assert drive_to_finish(m)[-1].finished
        server = launcher.servers[0]
        assert m.launch_count == 1 and server.connections == 2 and server.start_rewinds == 1
    finally:
        m.close()


def test_hang_during_start_recovers_within_start_race(fake_launcher, fast_config):
    """A game that hangs before race time 0 is relaunched by start_race itself (bounded retries)."""
    launcher = fake_launcher(per_launch=[{"hang_at_ms": -100}])
    fast_config.start_timeout_s = 1.0
    m = make_manager(launcher, fast_config)
    try:
        r = m.start_race(MAP)
        assert r.race_time_ms == 0 and m.launch_count == 2
    finally:
        m.close()


def test_reboot_interval_relaunches_between_races(fake_launcher, fast_config):
    """Past game_reboot_interval_s the instance is closed and relaunched before the next race."""
    launcher = fake_launcher()
    fast_config.game_reboot_interval_s = 0.0
    m = make_manager(launcher, fast_config)
    try:
        m.start_race(MAP)
        drive_to_finish(m)
        m.start_race(MAP)
        assert m.launch_count == 2 and not launcher.servers[0].is_alive()
        assert launcher.servers[1].map == MAP
    finally:
        m.close()


def test_backend_returns_car_states_and_frames(fake_launcher, fast_config):
    """TMIBackend turns the manager's results into CarState + (H, W) frames, finished at the line."""
    launcher = fake_launcher()
    backend = TMIBackend(settings=TMISettings(), launcher=launcher, config=fast_config)
    try:
        car, frame = backend.start_race(MAP, seed=123)
        assert car.race_time_ms == 0 and frame.shape == (120, 160)
        z = [car.position[2]]
        for _ in range(200):
            car, frame = backend.step(InputState(accelerate=True, brake=False, left=False, right=False))
            z.append(car.position[2])
            if car.finished:
                break
        assert car.finished and len(car.checkpoint_times_ms) == 2
        assert car.race_time_ms == car.checkpoint_times_ms[-1]
        assert np.all(np.diff(z) >= 0) and car.speed_kmh > 0
        assert car.wheel_surface_group.tolist() == [0, 0, 0, 0]
        car, _ = backend.start_race(type("Track", (), {"map_path": MAP})(), seed=None)
        assert car.race_time_ms == 0 and car.gear_change_counter == 0
    finally:
        backend.close()


def test_map_path_of_rejects_tracks_without_a_map():
    """The tmi backend explains which attribute a track needs when it has no map path."""
    assert map_path_of("a/b.Gbx") == "a/b.Gbx"
    with pytest.raises(TypeError, match="map_path"):
        map_path_of(object())


@pytest.mark.parametrize("raw", [b"\x05\x00\x00\x00\x63\x00\x00\x00", b"garbage!", b"\x01\x00"])
def test_game_sending_garbage_fails_cleanly(fake_launcher, fast_config, raw):
    """A 'game' that sends malformed bytes makes start_race raise TMInterfaceError after bounded retries."""
    import time

    from environments.trackmania.tmi.link.protocol import TMInterfaceError

    launcher = fake_launcher(behaviour="raw", raw_bytes=raw)
    m = make_manager(launcher, fast_config)
    t0 = time.monotonic()
    try:
        with pytest.raises(TMInterfaceError) as err:
            m.start_race(MAP)
        assert "expected" in str(err.value)
        # each attempt either reconnects (connection closed) or relaunches (protocol error)
        assert sum(s.connections for s in launcher.servers) == fast_config.max_start_attempts
        assert time.monotonic() - t0 < 10
    finally:
        m.close()


def test_inputs_are_sent_at_every_action(fake_launcher, fast_config):
    """Point 2: the same action held for a whole race still sends the inputs at every action."""
    launcher = fake_launcher()
    m = make_manager(launcher, fast_config)
    try:
        m.start_race(MAP)
        steps = drive_to_finish(m)
        # one release at race time 0, then one per action (the last step ends at the finish)
        assert launcher.servers[0].input_commands == 1 + len(steps)
    finally:
        m.close()


def test_finish_is_undone_by_rewinding_without_checkpoint_time(fake_launcher, fast_config):
    """Point 3: at the finish the manager rewinds to the state with the finish time set to -1, so the
    game (whose PreventSimulationFinish does nothing in a race) never shows its end screen."""
    launcher = fake_launcher()
    m = make_manager(launcher, fast_config)
    try:
        for _ in range(2):
            m.start_race(MAP)
            assert drive_to_finish(m)[-1].finished
        server = launcher.servers[0]
        assert server.races_ended == 0 and server.start_rewinds == 1 and server.rewinds >= 3
    finally:
        m.close()


def test_personal_record_ghost_is_hidden_before_the_map_loads(fake_launcher, fast_config, tmp_path):
    """Point 4: with TMI_USER_DATA_PATH set, the map's autosaved personal record is renamed *.bak
    before the map loads (the game then shows no ghost); other maps' records stay."""
    autosaves = tmp_path / "Tracks" / "Replays" / "Autosaves"
    autosaves.mkdir(parents=True)
    (autosaves / "rulka_bot_A01-Race.Replay.Gbx").write_bytes(b"ghost")
    (autosaves / "rulka_bot_A02-Race.Replay.Gbx").write_bytes(b"other")
    settings = TMISettings(account_name="rulka_bot", user_data_path=str(tmp_path))
    m = GameInstanceManager(0, settings=settings, config=fast_config, launcher=fake_launcher())
    try:
        m.start_race(MAP)
        assert sorted(p.name for p in autosaves.iterdir()) == [
            "rulka_bot_A01-Race.Replay.Gbx.bak", "rulka_bot_A02-Race.Replay.Gbx"]
    finally:
        m.close()


def test_console_toggled_once_per_launch_and_window_focused(fake_launcher, fast_config):
    """Point 4: the first connection after a launch closes TMInterface's console and the first race
    focuses the window; a relaunch does both again."""
    launcher = fake_launcher()
    m = make_manager(launcher, fast_config)
    try:
        m.start_race(MAP)
        m.end_race()
        m.start_race(MAP)
        first = launcher.servers[0].commands
        assert first.count("toggle_console") == 1 and first.count("rulka_focus_window") == 1
        m._kill()
        m.start_race(MAP)
        second = launcher.servers[1].commands
        assert second.count("toggle_console") == 1 and second.count("rulka_focus_window") == 1
    finally:
        m.close()
