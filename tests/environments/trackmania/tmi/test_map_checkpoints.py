"""Real checkpoints of real maps: read from a .Challenge.Gbx through pygbx-shaped objects (we ship no
Gbx file and do not need pygbx), paired with the reference line as Linesight does, and used by the
environment when sync_virtual_and_real_checkpoints is on."""
from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest

from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.tmi.backend import TMIBackend
from environments.trackmania.tmi.games.game_instance_manager import GameInstanceManager
from environments.trackmania.tmi.maps.map_checkpoints import (
    MapCheckpointsError,
    check_map_checkpoints,
    checkpoint_positions_from_challenge,
    read_map_checkpoint_positions,
)
from environments.trackmania.tmi.games.settings import TMISettings
from environments.trackmania.track import track_from_map
from environments.trackmania.zones import REAL_CHECKPOINT_RADIUS_M, ZoneCenters

CHALLENGE_ID, CHALLENGE_OLD_ID = 0x03043000, 0x24003000


class Vector3:
    """As pygbx.headers.Vector3: x, y, z in block units."""

    def __init__(self, x, y, z):
        self.x, self.y, self.z = x, y, z

    def as_array(self):
        return [self.x, self.y, self.z]


def block(name: str, x: int, y: int, z: int) -> SimpleNamespace:
    """As pygbx.headers.MapBlock: name, rotation, position (block units), flags."""
    return SimpleNamespace(name=name, rotation=0, position=Vector3(x, y, z), flags=0)


# A map along +z at block x 10, height 1: start at z 2, two checkpoints, finish at z 8, some road.
BLOCKS = [
    block("StadiumRoadMainStartLine", 10, 1, 2),
    block("StadiumRoadMain", 10, 1, 3),
    block("StadiumRoadMainCheckpoint", 10, 1, 4),
    block("StadiumRoadMainCheckpointLeft", 10, 1, 5),
    block("StadiumPlatformCheckpointHigh", 10, 1, 6),
    block("StadiumGrass", 3, 1, 3),
    block("StadiumRoadMainFinishLine", 10, 1, 8),
]


def expected_position(x: int, y: int, z: int, raise_m: float = 0.0) -> list[float]:
    return [x * 32 + 16, y * 8 + raise_m, z * 32 + 16]


def fake_pygbx(blocks, opened: list[str], classes=None) -> types.ModuleType:
    """A module shaped as pygbx: Gbx(path).get_classes_by_ids([...]) and GbxType."""
    challenge = SimpleNamespace(id=CHALLENGE_ID, blocks=blocks, map_name="Test")

    class Gbx:
        def __init__(self, path):
            opened.append(path)

        def get_classes_by_ids(self, ids):
            assert CHALLENGE_ID in ids and CHALLENGE_OLD_ID in ids
            return [challenge] if classes is None else classes

    module = types.ModuleType("pygbx")
    module.Gbx = Gbx
    module.GbxType = SimpleNamespace(CHALLENGE=CHALLENGE_ID, CHALLENGE_OLD=CHALLENGE_OLD_ID)
    return module


@pytest.fixture
def user_data(tmp_path):
    """A game user folder with one map file at Tracks/Challenges/My Challenges/T.Challenge.Gbx."""
    folder = tmp_path / "TrackMania" / "Tracks" / "Challenges" / "My Challenges"
    folder.mkdir(parents=True)
    (folder / "T.Challenge.Gbx").write_bytes(b"GBX")
    return tmp_path / "TrackMania"


def test_checkpoint_blocks_become_world_positions():
    """Checkpoint, start and finish blocks (name has Checkpoint or Line) are placed at their block's
    centre (32 x 8 x 32 m blocks, +16 m in x and z); raised gates (High +7 m, MainCheckpointLeft/Right
    +5 m) as Linesight corrects them; other blocks are ignored."""
    positions = checkpoint_positions_from_challenge(SimpleNamespace(blocks=BLOCKS))
    np.testing.assert_allclose(positions, [
        expected_position(10, 1, 2),
        expected_position(10, 1, 4),
        expected_position(10, 1, 5, raise_m=5.0),
        expected_position(10, 1, 6, raise_m=7.0),
        expected_position(10, 1, 8),
    ])
    assert checkpoint_positions_from_challenge(SimpleNamespace(blocks=[])).shape == (0, 3)


def test_map_path_is_read_relative_to_tracks_challenges_with_backslashes(monkeypatch, user_data):
    """A map path as the game takes it (quoted, backslashes, relative to Tracks/Challenges of the
    user folder) opens <TMI_USER_DATA_PATH>/Tracks/Challenges/My Challenges/T.Challenge.Gbx."""
    opened: list[str] = []
    monkeypatch.setitem(sys.modules, "pygbx", fake_pygbx(BLOCKS, opened))
    positions = read_map_checkpoint_positions('"My Challenges\\T.Challenge.Gbx"', str(user_data))
    assert opened == [str(user_data / "Tracks" / "Challenges" / "My Challenges" / "T.Challenge.Gbx")]
    assert positions.shape == (5, 3)


@pytest.mark.reliability
def test_missing_pygbx_is_a_clear_error(monkeypatch, user_data):
    """Without the optional pygbx: ImportError that says how to install it or turn the option off."""
    monkeypatch.setitem(sys.modules, "pygbx", None)
    with pytest.raises(ImportError, match=r"pip install 'rulka\[tmi\]'.*sync_virtual_and_real_checkpoints: false"):
        read_map_checkpoint_positions("My Challenges/T.Challenge.Gbx", str(user_data))
    problem = check_map_checkpoints("My Challenges/T.Challenge.Gbx", str(user_data))
    assert problem is not None and "pygbx" in problem
    assert check_map_checkpoints("short", None) is None  # not a map file: nothing to read


@pytest.mark.reliability
def test_unreadable_map_paths_name_the_fix(monkeypatch, user_data):
    """A relative map path without TMI_USER_DATA_PATH, a map file that is not there, and a file that
    holds no map each raise MapCheckpointsError naming what to set or check."""
    monkeypatch.setitem(sys.modules, "pygbx", fake_pygbx(BLOCKS, []))
    with pytest.raises(MapCheckpointsError, match="TMI_USER_DATA_PATH"):
        read_map_checkpoint_positions("My Challenges/T.Challenge.Gbx", None)
    with pytest.raises(MapCheckpointsError, match=r"not found: .*Tracks/Challenges/Nope.Challenge.Gbx"):
        read_map_checkpoint_positions("Nope.Challenge.Gbx", str(user_data))
    monkeypatch.setitem(sys.modules, "pygbx", fake_pygbx(BLOCKS, [], classes=[]))
    with pytest.raises(MapCheckpointsError, match="holds no map"):
        read_map_checkpoint_positions("My Challenges/T.Challenge.Gbx", str(user_data))


def test_map_checkpoints_pair_within_12_m_once_per_lap():
    """Map checkpoints are paired as Linesight does: with every line point within 12 m (one per lap,
    100 m apart at least); a checkpoint block farther than 12 m from the line pairs with nothing."""
    z = np.arange(0.0, 300.0, 0.5)
    lap = np.stack([np.zeros_like(z), np.zeros_like(z), z], axis=1)
    back = np.stack([np.full_like(z, 8.0), np.zeros_like(z), z[::-1]], axis=1)  # the second lap, 8 m aside
    line = np.concatenate([lap, back])
    on_both_laps = [4.0, 0.0, 150.0]
    far = [60.0, 0.0, 100.0]
    zones = ZoneCenters.from_raw_line(line, 20, 20, real_checkpoints=np.array([on_both_laps, far]),
                                      pair_radius_m=REAL_CHECKPOINT_RADIUS_M)
    paired = np.flatnonzero(np.isfinite(zones.checkpoint_radius))
    assert len(paired) == 2, "one pairing per lap, none for the far block"
    assert all(np.allclose(zones.checkpoint_position[j], on_both_laps) for j in paired)
    nearest = ZoneCenters.from_raw_line(line, 20, 20, real_checkpoints=np.array([on_both_laps, far]))
    assert np.isfinite(nearest.checkpoint_radius).sum() == 2, "without a radius: each paired once, far or not"


def test_environment_uses_the_maps_checkpoints(monkeypatch, user_data):
    """TrackManiaEnv(backend=tmi) with sync_virtual_and_real_checkpoints pairs the checkpoints read
    from the map (no game is started to build the zones); with the option off, none are paired."""
    monkeypatch.setitem(sys.modules, "pygbx", fake_pygbx(BLOCKS, []))
    z = np.arange(2 * 32 + 16, 8 * 32 + 17, 0.5)
    line = np.stack([np.full_like(z, 336.0), np.full_like(z, 9.0), z], axis=1)
    line_path = user_data / "line.npy"
    np.save(line_path, line)
    track = track_from_map("My Challenges/T.Challenge.Gbx", line_path, road_width=24.0)

    def backend() -> TMIBackend:
        manager = GameInstanceManager(settings=TMISettings(user_data_path=str(user_data)),
                                      launcher=lambda port: pytest.fail("no game may start"))
        return TMIBackend(manager=manager)

    env = TrackManiaEnv(TrackManiaEnvironmentParameters(), track=track, backend=backend())
    paired = env.zones.checkpoint_position[np.isfinite(env.zones.checkpoint_radius)]
    # start line, 3 checkpoints, finish line: all within 12 m of the line (the raised ones 4 and 6 m above it)
    np.testing.assert_allclose(paired[:, 2], [80, 144, 176, 208, 272])
    off = TrackManiaEnv(TrackManiaEnvironmentParameters(sync_virtual_and_real_checkpoints=False), track=track,
                        backend=backend())
    assert not np.isfinite(off.zones.checkpoint_radius).any()


@pytest.mark.reliability
def test_preflight_refuses_a_real_game_run_whose_map_checkpoints_cannot_be_read(tmp_path, monkeypatch):
    """A real-game run with sync_virtual_and_real_checkpoints on and pygbx missing is refused before
    any game starts, naming the map-cycle entry and the fix."""
    from rulka.config import ConfigError, apply_overrides
    from rulka.presets import load_graph_manager

    line = tmp_path / "line.npy"
    z = np.arange(0.0, 100.0, 0.5)
    np.save(line, np.stack([np.zeros_like(z), np.zeros_like(z), z], axis=1))
    monkeypatch.chdir(tmp_path)  # no .env here
    for key in ("TMI_USER_DATA_PATH", "TMI_TMLOADER_PATH", "TMI_TMLOADER_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("TMI_ACCOUNT_NAME", "bot")
    monkeypatch.setenv("TMI_LINUX_LAUNCH_SCRIPT", "/bin/true")
    monkeypatch.setitem(sys.modules, "pygbx", None)
    graph_manager = load_graph_manager("trackmania_iqn_uni")
    graph_manager.config = apply_overrides(graph_manager.config, overrides=[
        f"map_cycle.entries=[{{short_name: a, map_path: 'My Challenges/A.Challenge.Gbx', reference_line_path: {line}}}]"])
    assert graph_manager.config.environment.sync_virtual_and_real_checkpoints
    with pytest.raises(ConfigError, match=r"map_cycle entry 'a': .*pygbx"):
        graph_manager.preflight()
