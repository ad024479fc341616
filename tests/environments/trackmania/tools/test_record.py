"""`rulka record --best-run`: a saved best run is replayed and drawn (trajectory, map, speed chart,
first-person | map animation at the asked camera size)."""
from __future__ import annotations

import argparse
import math

import numpy as np
import pytest
from PIL import Image

from environments.trackmania.tools.cli import register_commands
from environments.trackmania.tools.race_pictures import ANIM_MAP_PX, ANIM_STRIP_PX
from environments.trackmania.tools.race_replay import load_best_run, replay_best_run, run_environment
from environments.trackmania.tools.record import camera_renderer, record_best_run
from environments.trackmania.tools.trajectory import Trajectory
from tests.environments.trackmania.best_run_helpers import RUN_SEED, logged_best_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return logged_best_run(tmp_path_factory.mktemp("record") / "run", pictures=False)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    register_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def test_record_best_run_replays_the_race_and_writes_its_pictures(run, tmp_path):
    """The replay is the saved race (same time, same actions); the animation has one frame per stride
    of samples at camera size + map panel; the speed chart compares with the driver."""
    result = record_best_run(run.run_dir / "best_runs" / "short", tmp_path, run_seed=RUN_SEED,
                             animation_suffix=".gif", stride=8, camera_size=(96, 72))
    assert result.reset_seed == run.seed and result.race_time_s * 1000 == run.race_time_ms
    assert result.driver_time_s is not None and f"{result.driver_time_s:.2f} s" in result.driver_label
    trajectory = Trajectory.load(result.trajectory_npz)
    assert trajectory.actions.tolist() == run.actions and int(trajectory.race_time_ms[-1]) == run.race_time_ms
    animation = Image.open(result.pictures.animation)
    assert animation.size == (96 + ANIM_MAP_PX, 72 + ANIM_STRIP_PX)
    assert animation.n_frames == math.ceil((len(run.actions) + 1) / 8)
    assert Image.open(result.pictures.speed_png).size == (1000, 460)
    assert result.pictures.map_png.is_file()
    sectors = result.sectors  # against the driver, 100 m each, start to finish: they add up to both races
    assert sectors[0].start_m == 0 and all(g.end_m - g.start_m == pytest.approx(100) for g in sectors[:-1])
    assert sum(g.time_s for g in sectors) == pytest.approx(result.race_time_s, abs=0.1)
    assert sum(g.gap_s for g in sectors) == pytest.approx(result.race_time_s - result.driver_time_s, abs=0.1)


def test_the_first_person_view_is_rendered_at_the_asked_size_from_the_replayed_car(run):
    """The replay renders every sample at 200 x 150 (the network's frames are 64 x 48), from the
    car's own position and heading: frame k is the camera's view at trajectory sample k."""
    best = load_best_run(run.run_dir / "best_runs" / "short")
    params, track = run_environment(best)
    renderer = camera_renderer(track, params.game_camera_number, 200, 150)
    trajectory, frames, _ = replay_best_run(best, params, track, RUN_SEED, renderer)
    assert len(frames) == trajectory.steps + 1 and frames[0].shape == (150, 200)
    check = camera_renderer(track, params.game_camera_number, 200, 150)
    for k in (0, 100, trajectory.steps):
        x, _, z = trajectory.positions[k].astype(float)
        assert np.array_equal(frames[k], check.render(x, z, float(trajectory.headings[k])))
    assert not np.array_equal(frames[100], frames[200])


def test_cli_record_best_run_prints_what_it_wrote_and_refuses_bad_input(run, tmp_path, capsys):
    """`record --best-run` runs and names its files; no --out nor --best-run, or an empty folder, exit 2."""
    parser = _parser()
    args = parser.parse_args(["record", "--best-run", str(run.run_dir / "best_runs" / "short"), "--out",
                              str(tmp_path), "--run-seed", str(RUN_SEED), "--driver", "none", "--format", "gif",
                              "--camera-size", "64x48", "--stride", "40"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "as saved" in out and "_race.gif" in out and "_map.png" in out
    assert "sectors:" not in out  # no driver, nothing to compare with
    args = parser.parse_args(["record", "--best-run", str(run.run_dir / "best_runs" / "short"), "--out",
                              str(tmp_path), "--run-seed", str(RUN_SEED), "--format", "gif", "--camera-size",
                              "64x48", "--stride", "40", "--sector-m", "200"])
    assert args.func(args) == 0
    table = capsys.readouterr().out.split("sectors: agent against driver")[1].splitlines()
    assert table[2].split()[0] == "0-200" and table[3].split()[0] == "200-400"
    args = parser.parse_args(["record"])
    assert args.func(args) == 2 and "--out" in capsys.readouterr().out
    args = parser.parse_args(["record", "--best-run", str(tmp_path / "empty")])
    (tmp_path / "empty").mkdir()
    assert args.func(args) == 2 and "no best run" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        parser.parse_args(["record", "--best-run", "x", "--camera-size", "480"])
    with pytest.raises(SystemExit):
        parser.parse_args(["record", "--best-run", "x", "--sector-m", "0"])
