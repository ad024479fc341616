"""``rulka tune`` (rulka/tune.py): a sweep on Ray Tune whose trials are ordinary rulka runs, ASHA stopping the
poor ones from the evaluations each run reports, its table and ``best`` link, ``--resume``, a sweep over a
multi-node Ray cluster on 127.0.0.1, and the message without Ray. The sweeps are as short as CartPole
allows (the suite's budget): what learns well is a bench (bench/tune_cartpole.py), not a test."""
import csv
import sys

import pytest

from rulka.cli import build_parser, main

#: Every trial: CartPole DQN learning from the 300th step, an evaluation of 2 greedy episodes every 500.
SMALL = ["-cp", "memory.memory_size_schedule=[[0, [5000, 300]]]", "-cp", "performance.torch_num_threads=1",
         "-cp", "training.evaluate_every_n_env_steps=500", "-cp", "training.evaluation_episodes=2"]


def tune_or_skip():
    try:
        from ray import tune  # noqa: F401
    except ImportError as error:
        pytest.skip(f"Ray Tune is not installed ({error}): pip install 'rulka[ray]' runs these tests")


def rows(sweep):
    with open(sweep / "results.csv", newline="") as f:
        return {row["trial"]: row for row in csv.DictReader(f)}


def test_without_ray_tune_the_command_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    """Ray Tune is optional: without it ``rulka tune`` refuses before any work and names the install command."""
    (tmp_path / "space.yaml").write_text("training.batch_size: {choice: [32, 64]}\n")
    monkeypatch.setitem(sys.modules, "ray.tune", None)  # import ray.tune now fails as where it is not installed
    assert main(["tune", "cartpole_dqn", "--space", str(tmp_path / "space.yaml"), "--samples", "2",
                 "--experiments-dir", str(tmp_path)]) == 2
    assert "pip install 'rulka[ray]'" in capsys.readouterr().err
    assert not any(tmp_path.glob("tune_*"))


def test_help_explains_every_flag():
    """``rulka tune --help`` has a sentence for every flag."""
    parser = build_parser()
    tune = parser._subparsers._group_actions[0].choices["tune"]
    for action in tune._actions:
        assert action.help and len(action.help) > 10, action.option_strings or action.dest


def test_tune_tensorboard_logger_gets_no_infinite_metric(monkeypatch):
    """Before its first evaluation (a TrackMania trial before its first finished race) a trial reports +inf;
    Tune's TensorBoard logger is not given it (tensorboardX would print a warning at every report)."""
    tune_or_skip()
    from ray.tune.logger import TBXLoggerCallback

    from rulka.tune import _run_config

    logged = []
    monkeypatch.setattr(TBXLoggerCallback, "log_trial_result", lambda self, i, trial, result: logged.append(result))
    loggers = [c for c in _run_config({"dir": "/nonexistent"}).callbacks if isinstance(c, TBXLoggerCallback)]
    assert len(loggers) == 1  # Tune then adds no default TensorBoard logger of its own
    loggers[0].log_trial_result(1, None, {"evaluation": float("inf"), "last_evaluation": float("nan"), "env_steps": 7})
    assert logged == [{"env_steps": 7}]


def test_asha_stops_the_poor_trial_and_the_best_is_a_run_folder(tmp_path, capsys):
    """Two trials one after the other (seed 1 draws the learning rate 1e-3, then 1e-7): at ASHA's rung of
    1,500 steps the second trial's best evaluation (about 10: it cannot learn) is below the first's (it has
    learned), so ASHA stops it there; the first runs its 2,500 steps. The table (printed and results.csv)
    says so, ``best`` links the first trial's run folder, which ``load_policy`` and ``--init-from`` take;
    each trial is a run folder of its own with its sampled value in its config snapshot. ``--resume`` on the
    ended sweep restores it from Ray Tune's state and prints the same table."""
    tune_or_skip()
    from rulka.policy import load_policy

    (tmp_path / "space.yaml").write_text('training.lr_schedule: {choice: [1.0e-3, 1.0e-7], as: "[[0, VALUE]]"}\n')
    sweep = tmp_path / "sweep"
    assert main(["tune", "cartpole_dqn", "--space", str(tmp_path / "space.yaml"), "--samples", "2", "--seed", "1",
                 "--scheduler", "asha", "--reduction-factor", "2", "--grace-period", "1500", "--max-steps", "2500",
                 "--concurrent", "1", "--experiments-dir", str(tmp_path), "-e", "sweep", *SMALL]) == 0
    table = rows(sweep)
    assert table["trial_000"]["training.lr_schedule"] == "0.001" and table["trial_001"]["training.lr_schedule"] == "1e-07"
    assert table["trial_000"]["stopped_early"] == "no" and table["trial_000"]["env_steps"] == "2500"
    assert table["trial_001"]["stopped_early"] == "yes" and int(table["trial_001"]["env_steps"]) == 1500
    assert float(table["trial_000"]["evaluation"]) > float(table["trial_001"]["evaluation"])
    out = capsys.readouterr().out
    assert "trial_001" in out and "2 trials, 1 stopped early, 0 failed" in out
    assert (sweep / "best").resolve() == (sweep / "trials" / "trial_000").resolve()
    assert "- 1.0e-07" in (sweep / "trials" / "trial_001" / "config_snapshot.yaml").read_text()
    assert any((sweep / "trials" / "trial_001" / "tensorboard").rglob("events.*"))
    assert load_policy(sweep / "best").source["counters"]["env_steps"] == 2500
    assert main(["-p", "cartpole_dqn", "--init-from", str(sweep / "best"), "--experiments-dir", str(tmp_path),
                 "-e", "from_best", "--max-steps", "10", "--no-progress", *SMALL[:4]]) == 0
    assert main(["tune", "--resume", str(sweep)]) == 0
    assert rows(sweep) == table


@pytest.fixture
def cluster(monkeypatch):
    """A head with no CPUs (trials cannot run there) and two worker nodes of one CPU, all on 127.0.0.1
    (as tests/rulka/collection/test_multinode.py starts them)."""
    tune_or_skip()
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    monkeypatch.setenv(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR, "0")
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=0, node_ip_address="127.0.0.1", object_store_memory=100 * 2 ** 20, include_dashboard=False))
    for _ in range(2):
        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1", object_store_memory=80 * 2 ** 20)
    cluster.wait_for_nodes()
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_a_sweep_runs_its_trials_on_the_worker_nodes_of_a_cluster(cluster, tmp_path):
    """``--ray-address HOST:PORT`` (the flag collectors use) runs the trials on the cluster: the head has no
    CPU, so both trials (one CPU each) run on the two worker nodes, at the same time, to their end."""
    (tmp_path / "space.yaml").write_text("training.batch_size: {choice: [32, 64]}\n")
    assert main(["tune", "cartpole_dqn", "--space", str(tmp_path / "space.yaml"), "--samples", "2",
                 "--max-steps", "600", "--ray-address", cluster.address, "--experiments-dir", str(tmp_path),
                 "-e", "sweep", *SMALL, "-cp", "training.evaluate_every_n_env_steps=300"]) == 0
    table = rows(tmp_path / "sweep")
    assert [row["status"] for row in table.values()] == ["done", "done"]
    assert all(row["env_steps"] == "600" for row in table.values())


def test_a_sweep_stopped_by_ctrl_c_resumes_its_trial_from_the_run_checkpoint(tmp_path):
    """Ctrl-C on ``rulka tune`` mid-trial: the sweep exits 130 saying how to resume, its trial's run has
    written a checkpoint; ``rulka tune --resume DIR`` continues that trial with ``rulka --resume`` from the
    checkpoint (not from step 0) to its 3,000 steps, and the table says done."""
    tune_or_skip()
    import os
    import signal
    import subprocess
    import time
    from pathlib import Path

    (tmp_path / "space.yaml").write_text("training.batch_size: {choice: [64]}\n")
    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "rulka.cli", "tune", "cartpole_dqn", "--space", str(tmp_path / "space.yaml"),
               "--samples", "1", "--max-steps", "3000", "--experiments-dir", str(tmp_path), "-e", "sweep", *SMALL,
               "-cp", "training.checkpoint_every_n_env_steps=500"]
    sweep = tmp_path / "sweep"
    progress = sweep / "trials" / "trial_000" / "tune_progress.jsonl"
    driver = subprocess.Popen(command, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(root)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and driver.poll() is None:
            if progress.exists() and progress.read_text().count("\n") >= 2:  # evaluations at 500 and 1,000 steps
                break
            time.sleep(0.5)
        driver.send_signal(signal.SIGINT)
        output = driver.communicate(timeout=120)[0]
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 130, output[-3000:]
    assert f"rulka tune --resume {sweep}" in output
    assert main(["tune", "--resume", str(sweep)]) == 0
    log = (sweep / "trials" / "trial_000" / "trial.log").read_text()
    resumed_at = int(log.split("rulka: resumed ")[1].split(" at ")[1].split()[0])
    assert 1000 <= resumed_at < 3000, log[-2000:]
    assert rows(sweep)["trial_000"]["status"] == "done" and rows(sweep)["trial_000"]["env_steps"] == "3000"
