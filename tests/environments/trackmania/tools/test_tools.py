"""GIF/PNG recording, float statistics to YAML, and the CLI subcommands."""
from __future__ import annotations

import argparse

import numpy as np
import yaml
from PIL import Image

from environments.trackmania.tools.cli import register_commands
from environments.trackmania.env import TrackManiaEnv
from environments.trackmania.training.normalization import (
    default_normalization,
    read_state_normalization_yaml,
    stats_from_samples,
    write_state_normalization_yaml,
)
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.tools.record import record_episode


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    register_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def test_record_episode_writes_gif_and_png_for_any_policy(tmp_path):
    """Any obs -> action callable can be recorded; the GIF has one frame per step (+ reset), the PNG is a map."""
    env = TrackManiaEnv(params=TrackManiaEnvironmentParameters(H_downsized=60, W_downsized=80), track="short")
    result = record_episode(env, lambda obs: 0, tmp_path, seed=0, name="ep", max_steps=25)
    gif = Image.open(result.gif_path)
    assert gif.n_frames == 26 and gif.size == (160, 120)
    png = Image.open(result.png_path)
    assert png.size[0] > 200 and png.size[1] > 200
    assert result.steps == 25


def test_cli_record_baseline_and_stats(tmp_path, capsys):
    """`record`, `baseline` and `stats` parse, run and report success."""
    parser = _parser()
    args = parser.parse_args(["record", "--track", "short", "--policy", "random", "--out", str(tmp_path),
                              "--max-steps", "10"])
    assert args.func(args) == 0
    assert list(tmp_path.glob("*.gif")) and list(tmp_path.glob("*.png"))
    args = parser.parse_args(["baseline", "--track", "short"])
    assert args.func(args) == 0
    assert "finished in" in capsys.readouterr().out
    out = tmp_path / "norm.yaml"
    args = parser.parse_args(["stats", "--track", "short", "--episodes", "1", "--out", str(out)])
    assert args.func(args) == 0
    doc = yaml.safe_load(out.read_text())
    mean = doc["state_normalization"]["float_inputs_mean"]
    std = doc["state_normalization"]["float_inputs_std"]
    assert len(mean) == len(std) == 184 and min(std) > 0
    params = TrackManiaEnvironmentParameters(float_inputs_mean=mean, float_inputs_std=std)
    assert params.float_input_dim == 184


def test_stats_measure_the_samples_and_keep_the_clock_and_constant_features_sane(tmp_path):
    """Measured mean/std match the samples; the clock keeps 70/70; constant features keep a usable std."""
    params = TrackManiaEnvironmentParameters()
    rng = np.random.default_rng(0)
    samples = rng.normal(3.0, 2.0, size=(4000, 184)).astype(np.float32)
    samples[:, 30] = 1.0  # constant
    mean, std = stats_from_samples(samples, params)
    assert mean[0] == 70 and std[0] == 70
    assert abs(mean[100] - 3.0) < 0.15 and abs(std[100] - 2.0) < 0.15
    assert std[30] == default_normalization(params)[1][30]
    path = write_state_normalization_yaml(tmp_path / "s.yaml", mean, std)
    m2, s2 = read_state_normalization_yaml(path)
    assert np.allclose(m2, mean, atol=1e-5) and np.allclose(s2, std, atol=1e-5)


def test_default_normalization_uses_the_documented_constants():
    """Clock mean 70 std 70; distance-to-finish mean 700 std 350; waypoints spread forward ~10 m apart."""
    params = TrackManiaEnvironmentParameters()
    env_layout = TrackManiaEnv(params=params, track="short", backend_options={"render": False}).layout
    mean, std = default_normalization(params)
    assert mean[env_layout.mini_race_clock][0] == 70 and std[env_layout.mini_race_clock][0] == 70
    assert mean[env_layout.distance_to_finish][0] == 700 and std[env_layout.distance_to_finish][0] == 350
    fwd = mean[env_layout.zone_centers].reshape(-1, 3)[:, 2]
    assert np.allclose(np.diff(fwd), 9.5)
