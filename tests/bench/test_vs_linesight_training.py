"""bench/vs_linesight_training.py without Linesight: the patcher's exactly-once rule, the config values
and shims it writes, and the table it prints from synthetic logs of both sides."""
from __future__ import annotations

import runpy
import struct
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import linesight_logs as logs  # noqa: E402
import linesight_patches as patches  # noqa: E402


def _checkout(tmp_path: Path, text: str) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(text)
    return tmp_path


def test_patch_applies_when_the_text_occurs_exactly_once(tmp_path):
    """A substitution whose text occurs once is applied, and only there."""
    root = _checkout(tmp_path, 'a = torch.zeros(3).to("cuda")\nb = 1\n')
    patch = patches.Patch("pkg/mod.py", '.to("cuda")', '.to("cpu")', "no GPU")
    assert patches.apply_patches(root, (patch,)) == ["pkg/mod.py: no GPU"]
    assert (root / "pkg" / "mod.py").read_text() == 'a = torch.zeros(3).to("cpu")\nb = 1\n'


@pytest.mark.parametrize("text, count", [("nothing to see\n", 0), ('x.to("cuda")\ny.to("cuda")\n', 2)])
def test_patch_refuses_zero_or_two_matches_and_writes_nothing(tmp_path, text, count):
    """A changed Linesight fails loudly: 0 or 2 matches raise PatchError naming the file and the count,
    and no file is written (not even by the patches checked before the failing one)."""
    root = _checkout(tmp_path, text)
    (root / "pkg" / "ok.py").write_text("pin_memory=True\n")
    good = patches.Patch("pkg/ok.py", "pin_memory=True", "pin_memory=False", "no CUDA driver")
    bad = patches.Patch("pkg/mod.py", '.to("cuda")', '.to("cpu")', "no GPU")
    with pytest.raises(patches.PatchError, match=rf"pkg/mod.py: the text to replace occurs {count} times"):
        patches.apply_patches(root, (good, bad))
    assert (root / "pkg" / "mod.py").read_text() == text
    assert (root / "pkg" / "ok.py").read_text() == "pin_memory=True\n"


def test_patch_list_is_well_formed():
    """Every patch changes something, says why, and no two patches of a file have the same text."""
    seen = set()
    for p in patches.PATCHES:
        assert p.old != p.new and p.why.strip()
        assert (p.path, p.old) not in seen
        seen.add((p.path, p.old))


def test_conv_output_dim_matches_linesight_default_and_the_cpu_size():
    """Linesight's default 120 x 160 gives its hard-coded 5632; the stand-in's 48 x 64 gives 256."""
    assert patches.conv_output_dim(120, 160) == 5632
    assert patches.conv_output_dim(48, 64) == 256


def test_config_values_are_appended_after_linesight_own(tmp_path):
    """Values are set as assignments after Linesight's own, so the module ends with the bench's values."""
    (tmp_path / "config_files").mkdir()
    (tmp_path / "config_files" / "user_config.py").write_text("base_tmi_port = 8478\n")
    (tmp_path / "config_files" / "config.py").write_text("gpu_collectors_count = 2\nW_downsized = 160\n")
    patches.set_config_values(tmp_path, {"base_tmi_port": "9000"}, {"gpu_collectors_count": "4", "W_downsized": "64"})
    user = runpy.run_path(str(tmp_path / "config_files" / "user_config.py"))
    run = runpy.run_path(str(tmp_path / "config_files" / "config.py"))
    assert user["base_tmi_port"] == 9000
    assert run["gpu_collectors_count"] == 4 and run["W_downsized"] == 64


def test_gbx_shim_gives_checkpoint_blocks_at_the_written_world_positions(tmp_path):
    """The pygbx shim turns the bench's checkpoint file into blocks that Linesight's map_loader formula
    (block * (32, 8, 32) + (16, 0, 16)) maps back to the same world positions; the xdo shim loads."""
    import numpy as np

    shims = patches.write_shims(tmp_path / "shims")
    world = np.array([[100.0, 9.0, 50.0], [300.5, 17.0, -20.0]])
    with open(tmp_path / "short", "wb") as f:
        np.save(f, world)
    sys.path.insert(0, str(shims))
    try:
        import pygbx
        import xdo  # noqa: F401

        challenge = pygbx.Gbx(str(tmp_path / "short")).get_classes_by_ids([pygbx.GbxType.CHALLENGE])[0]
        back = np.array([b.position.as_array() for b in challenge.blocks]) * [32, 8, 32] + [16, 0, 16]
        assert all("Checkpoint" in b.name for b in challenge.blocks)
        np.testing.assert_allclose(back, world)
        assert pygbx.Gbx(str(tmp_path / "short")).get_class_by_id(pygbx.GbxType.CHALLENGE).map_name == "short"
    finally:
        sys.path.remove(str(shims))
        sys.modules.pop("pygbx", None)
        sys.modules.pop("xdo", None)


def _event_file(path: Path, scalars: list[tuple[str, int, float, float]]) -> None:
    """A TensorBoard event file as torch's SummaryWriter writes it (CRCs are not checked by the reader)."""
    from tensorboardX.proto import event_pb2, summary_pb2

    with open(path, "wb") as f:
        for tag, step, wall, value in scalars:
            event = event_pb2.Event(wall_time=wall, step=step,
                                    summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]))
            data = event.SerializeToString()
            f.write(struct.pack("<Q", len(data)) + b"\0" * 4 + data + b"\0" * 4)


def test_table_from_synthetic_logs_of_both_sides(tmp_path):
    """Linesight's races come from its TensorBoard tags (time and finished paired by step), its updates
    from its 'B    loss=' lines; rulka's from races.csv rows; the table gives actions/s, updates/s, the first
    finish and the best race by minutes 15 and 30, and '-' at minute 60 for a 40-minute run."""
    t0 = 1_000_000.0
    _event_file(tmp_path / "events.out.tfevents.1", [
        ("explo_race_time_trained_short", 1000, t0 + 60 * 5, 30.0), ("explo_race_finished_trained_short", 1000, t0 + 60 * 5, 0.0),
        ("explo_race_time_trained_short", 5000, t0 + 60 * 10, 24.5), ("explo_race_finished_trained_short", 5000, t0 + 60 * 10, 1.0),
        ("eval_race_time_trained_short", 9000, t0 + 60 * 20, 21.0), ("eval_race_finished_trained_short", 9000, t0 + 60 * 20, 1.0),
        ("eval_race_time_trained_hock", 9500, t0 + 60 * 21, 5.0), ("eval_race_finished_trained_hock", 9500, t0 + 60 * 21, 1.0),
        ("loss", 9000, t0 + 60 * 20, 0.5),
    ])
    scalars = [s for f in logs.event_files(tmp_path) for s in logs.read_scalars(f)]
    races = logs.linesight_races(scalars, t0, "short")
    assert [(r.actions, r.exploration, r.finished, r.race_time_s) for r in races] == [
        (1000, True, False, 30.0), (5000, True, True, 24.5), (9000, False, True, 21.0)]
    updates = logs.linesight_updates("B    loss=1.0e-01 grad_norm=3\nBT   loss=2\nB    loss=9e-2 grad_norm=1\n")
    assert updates == 2
    ls = logs.summarize("linesight", "short", 0, 40.0, races, 9000, 1200, alive_after=0, left_by_it=2)

    rows = [{"env_steps": "800", "exploration": "1", "finished": "1", "race_time_s": "26.00"},
            {"env_steps": "4000", "exploration": "0", "finished": "1", "race_time_s": "19.50"},
            {"env_steps": "7000", "exploration": "1", "finished": "0", "race_time_s": "3.10"}]
    rulka = [logs.rulka_race(row, minute) for row, minute in zip(rows, (2.0, 16.0, 35.0))]
    rk = logs.summarize("rulka", "short", 0, 40.0, rulka, 7200, 2400, alive_after=0, left_by_it=0)

    assert (ls.first_finish_min, ls.best_at, ls.best_s) == (10.0, {15: 24.5, 30: 21.0, 60: None}, 21.0)
    assert (rk.first_finish_min, rk.best_at, rk.races, rk.eval_races, rk.finished) == (2.0, {15: 26.0, 30: 19.5, 60: None}, 3, 1, 2)
    assert rk.actions == 7200 and rk.actions_per_s == pytest.approx(7200 / 2400)
    assert ls.updates_per_s == pytest.approx(1200 / 2400)
    text = logs.table([ls, rk]).splitlines()
    assert text[0].startswith("| track | rep | side | minutes | actions | gradient updates | actions/s")
    assert text[2] == ("| short | 0 | linesight | 40.0 | 9000 | 1200 | 3.8 | 0.50 | 3 (1) | 2 | 10.0 | 24.50 | 21.00 | - "
                       "| 21.00 | 0 (2 left by it) |")
    assert text[3] == ("| short | 0 | rulka | 40.0 | 7200 | 2400 | 3.0 | 1.00 | 3 (1) | 2 | 2.0 | 26.00 | 19.50 | - "
                       "| 19.50 | 0 (0 left by it) |")


def test_torn_last_record_is_ignored(tmp_path):
    """An event file still being written (a torn last record) gives the whole records before it."""
    _event_file(tmp_path / "events.out.tfevents.2", [("RL/gradient_updates", 10, 1.0, 5.0), ("RL/gradient_updates", 20, 2.0, 9.0)])
    data = (tmp_path / "events.out.tfevents.2").read_bytes()
    (tmp_path / "events.out.tfevents.2").write_bytes(data[:-7])
    scalars = list(logs.read_scalars(tmp_path / "events.out.tfevents.2"))
    assert scalars == [("RL/gradient_updates", 10, 1.0, 5.0)]
    assert logs.last_scalar(scalars, "RL/gradient_updates") == 5.0


def test_plot_draws_best_race_curves(tmp_path):
    """The plot is written for finished races of both sides, and for a run without any finish."""
    pytest.importorskip("matplotlib")
    races = [logs.Race(1.0, 100, True, True, 30.0), logs.Race(2.0, 300, False, True, 25.0)]
    logs.plot({"rulka short r0": races, "linesight short r0": races[:1]}, tmp_path / "a.png", "test")
    logs.plot({"rulka short r0": [logs.Race(1.0, 100, True, False, 3.0)]}, tmp_path / "b.png", "test")
    assert (tmp_path / "a.png").stat().st_size > 0 and (tmp_path / "b.png").stat().st_size > 0


def test_linesight_values_are_literals_only():
    """--linesight-value writes Python literals only: an expression that would run code is refused."""
    import vs_linesight_training as bench

    assert bench.parse_values(["memory_size_schedule=[(0, (50000, 2000))]", "batch_size=64"]) == {
        "memory_size_schedule": "[(0, (50000, 2000))]", "batch_size": "64"}
    for bad in ("x=__import__('os').system('true')", "no_equals", "1x=3"):
        with pytest.raises(bench.BenchError, match="NAME=LITERAL"):
            bench.parse_values([bad])


def test_goal_lines_measure_the_three_goals_at_minute_60():
    """The goal lines compare the best races at minute 60, give the minute rulka first matched
    Linesight's minute-60 best, and the actions/s ratio; a shorter run says where it was measured."""
    ls_races = [logs.Race(10.0, 1000, True, True, 30.0), logs.Race(50.0, 9000, False, True, 25.0),
                logs.Race(61.0, 9900, False, True, 20.0)]
    rk_races = [logs.Race(5.0, 900, True, True, 28.0), logs.Race(24.0, 5000, False, True, 24.0)]
    ls = logs.summarize("linesight", "short", 0, 62.0, ls_races, 9900, 10, 0, 0)
    rk = logs.summarize("rulka", "short", 0, 62.0, rk_races, 18600, 10, 0, 0)
    lines = logs.goal_lines("short", 0, ls, ls_races, rk, rk_races)
    assert lines == ["short r0: best race at minute 60: rulka 24.00 s, Linesight 25.00 s (rulka faster: True)",
                     "short r0: rulka reached Linesight's best (25.00 s) at minute 24.0 (goal: by minute 30)",
                     "short r0: actions/s rulka / Linesight = 1.88 (goal: >= 1.5)"]
    short = logs.goal_lines("short", 0, logs.summarize("linesight", "short", 0, 3.0, [], 300, 0, 0, 0), [],
                            logs.summarize("rulka", "short", 0, 3.0, [], 600, 0, 0, 0), [])
    assert short == ["short r0: best race at minute 3 (the runs ended before minute 60): rulka - s, Linesight - s",
                     "short r0: actions/s rulka / Linesight = 2.00 (goal: >= 1.5)"]


def test_prepare_linesight_on_a_stand_in_checkout(tmp_path):
    """The whole preparation without Linesight: a checkout holding exactly the texts the patches replace
    is copied (the original untouched), patched, given the row's values (map cycle, games, the CPU
    network, ports, the stand-in's own launch.sh), the shims, the reference line and the checkpoint file the pygbx
    shim reads."""
    import itertools

    import numpy as np
    import vs_linesight_training as bench

    fake = tmp_path / "linesight"
    for p in patches.PATCHES:
        (fake / p.path).parent.mkdir(parents=True, exist_ok=True)
        with open(fake / p.path, "a") as f:
            f.write(p.old + "\n")
    (fake / "config_files").mkdir()
    (fake / "config_files" / "user_config.py").write_text("from pathlib import Path\nbase_tmi_port = 8478\n")
    (fake / "config_files" / "config.py").write_text("from itertools import repeat\ngpu_collectors_count = 2\n")
    (fake / "maps").mkdir()
    before = {p.path: (fake / p.path).read_text() for p in patches.PATCHES}

    work = tmp_path / "work"
    work.mkdir()
    copy = bench.prepare_linesight(fake, work, "short", 3, 9000, "vs_rulka_short_r0", {"batch_size": "64"})
    assert {p.path: (fake / p.path).read_text() for p in patches.PATCHES} == before
    for p in patches.PATCHES:
        assert p.new in (copy / p.path).read_text()
    user = runpy.run_path(str(copy / "config_files" / "user_config.py"))
    run = runpy.run_path(str(copy / "config_files" / "config.py"))
    assert user["base_tmi_port"] == 9000 and user["username"] == "standin"
    assert (run["gpu_collectors_count"], run["W_downsized"], run["H_downsized"], run["conv_head_output_dim"],
            run["iqn_k"], run["use_jit"], run["batch_size"]) == (3, 64, 48, 256, 8, False, 64)
    cycle = list(itertools.chain(*run["map_cycle"]))
    assert [c[3] for c in cycle] == [True] * 4 + [False]
    assert {c[:3] for c in cycle} == {("short", "short", "short.npy")} and (copy / "maps" / "short.npy").is_file()
    from environments.trackmania.tmi.standin.build import LAUNCH_SCRIPT

    assert Path(user["linux_launch_game_path"]) == Path(LAUNCH_SCRIPT)  # the stand-in's own, not a wrapper
    assert (work / "TMInterface" / "Plugins").is_dir()  # where train.py copies Python_Link.as
    checkpoints = np.load(work / "TrackMania" / "Tracks" / "Challenges" / "short")
    assert checkpoints.ndim == 2 and checkpoints.shape[1] == 3 and len(checkpoints) >= 2
    assert (work / "shims" / "xdo.py").is_file() and (work / "shims" / "pygbx" / "__init__.py").is_file()


def test_linesight_games_launch_detached_with_its_plugin_and_rulka_games_in_place(tmp_path, monkeypatch):
    """Linesight's side gets the stand-in's official launch variables (its copied Python_Link.as, detached,
    this Python, a log per port) and rulka's side gets none of them, even when the caller's environment
    has them (rulka's launcher needs the game in place of launch.sh, with rulka_link.as)."""
    import vs_linesight_training as bench
    from environments.trackmania.tmi.standin import detach

    env = bench.linesight_game_environment(tmp_path)
    assert env["RULKA_STANDIN_PLUGIN"] == str(tmp_path / "TMInterface" / "Plugins" / "Python_Link.as")
    assert detach.detach_requested(env) and env["RULKA_STANDIN_PYTHON"] == sys.executable
    assert detach.log_path(8478, env) == tmp_path / "game_8478.log"
    assert detach.start_timeout_s(env) == bench.GAME_START_TIMEOUT_S and env["RULKA_STANDIN_OPTIONS"] == ""
    assert set(env) == set(bench.STANDIN_LAUNCH_VARIABLES)

    seen = {}

    class Stop(Exception):
        pass

    def popen(command, env, **kwargs):
        seen.update(env)
        raise Stop

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(bench.subprocess, "Popen", popen)
    with pytest.raises(Stop):
        bench.run_rulka(tmp_path, "short", 1, 0.01, 0, [])
    assert seen["RULKA_STANDIN_PYTHON"] == sys.executable
    assert not set(seen) & (set(bench.STANDIN_LAUNCH_VARIABLES) - {"RULKA_STANDIN_PYTHON"})
