"""``rulka tune``: hyperparameter sweeps on Ray Tune, each trial an ordinary rulka run.

A sweep folder (``--experiments-dir``/``-e``) holds:

* ``sweep.yaml``: what the sweep runs (preset, flags, every trial's values), read by ``--resume``;
* ``trials/trial_NNN/``: each trial's run folder (checkpoints, TensorBoard logs, ``config_snapshot.yaml``,
  ``trial.log`` with its output, ``tune_progress.jsonl`` with its evaluations);
* ``tune/``: Ray Tune's own state (what ``--resume`` restores);
* ``results.csv`` and ``best`` (a link to the best trial's run folder) when the sweep ends.

The trials are drawn before any starts (:mod:`rulka.tune_space`) and each trial's whole configuration
is checked. A trial is a ``rulka -p PRESET ...`` process (:mod:`rulka.tune_trial`) whose evaluations
(the run's ``best_evaluation``: the best evaluation return, or for TrackMania the best greedy race
time, lower better, as the preset's graph manager says in ``evaluation_mode``) are reported to Tune
as they come, so that ASHA can stop the poor ones. A trial takes ``1 + gpu_collectors_count`` CPUs
of Ray's (its learner and its collector processes), so trials share the machines by CPU count.
"""
from __future__ import annotations

import csv
import datetime as dt
import importlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from rulka import checkpoints
from rulka.config import ConfigError, apply_overrides, load_yaml_file
from rulka.presets import load_graph_manager
from rulka.tune_space import load_space

SWEEP_FILE = "sweep.yaml"
TRIALS_DIR = "trials"
TUNE_DIR = "tune"
RESULTS_FILE = "results.csv"
BEST_LINK = "best"
PROGRESS_FILE = "tune_progress.jsonl"
#: The sweep indices of the trials ASHA stopped, one a line.
STOPPED_FILE = "stopped_by_asha.txt"
LOG_FILE = "trial.log"
#: The metric reported to Tune: the run's best evaluation so far.
METRIC = "evaluation"
#: Reported once by a trial whose run ended by itself (its budget), not stopped by the scheduler.
FINISHED = "run_finished"
#: Seconds between two reads of a trial's evaluations.
POLL_S = 1.0
#: Seconds a stopped trial's run gets to write its final checkpoint before it is killed.
STOP_WAIT_S = 60.0
INSTALL_HINT = "pip install 'rulka[ray]' (Ray Tune and what it needs: pandas, pyarrow)"


def import_tune() -> Any:
    """``ray.tune``, or a ConfigError that says how to install it."""
    try:  # import_module consults sys.modules even when ``ray.tune`` is already an attribute of ``ray``
        tune = importlib.import_module("ray.tune")
    except ImportError as error:
        raise ConfigError(f"rulka tune needs Ray Tune, which is not installed ({error}); install it with "
                          f"{INSTALL_HINT}") from None
    return tune


def trial_name(index: int) -> str:
    return f"trial_{index:03d}"


# --------------------------------------------------------------------------------------------- the sweep
def start_sweep(preset: str, space_file: str, samples: int, *, experiments_dir: str = "experiments",
                name: str | None = None, config_files: list[str] = (), overrides: list[str] = (),
                scheduler: str = "fifo", minutes: float | None = None, max_steps: int | None = None,
                grace_period: float | None = None, reduction_factor: int = 3, concurrent: int | None = None,
                seed: int = 0, device: str = "cpu", gpus_per_trial: float = 0.0,
                ray_address: str | None = None) -> int:
    """Draw ``samples`` trials from the space, check them all, run them on Ray Tune, print and write the
    table; 0 when at least one trial ran to its end or was stopped by the scheduler without an error."""
    if samples < 1:
        raise ConfigError(f"--samples {samples}: give at least 1")
    if minutes is not None and minutes <= 0 or max_steps is not None and max_steps <= 0:
        raise ConfigError("--minutes and --max-steps take a positive number")
    if scheduler not in ("fifo", "asha"):
        raise ConfigError(f"--scheduler {scheduler}: give asha or fifo")
    if reduction_factor < 2:
        raise ConfigError(f"--reduction-factor {reduction_factor}: give 2 or more")
    import_tune()
    if preset.endswith(".py"):
        preset = str(Path(preset).resolve())
    graph_manager = load_graph_manager(preset)
    overrides = list(overrides)
    if graph_manager.config.performance.collector_backend != "processes":
        overrides.append("performance.collector_backend=processes")  # a trial's collectors stay in processes
    config = apply_overrides(graph_manager.config, list(config_files), overrides)
    graph_manager.config = config
    graph_manager.preflight()
    space = load_space(space_file)
    space.check(config)
    drawn = space.sample(samples, seed, config)
    trials = []
    for index, values in enumerate(drawn):
        trial_config = apply_overrides(config, [], space.overrides(values))
        trials.append({"index": index, "values": values, "overrides": space.overrides(values),
                       "cpus": 1 + int(trial_config.performance.gpu_collectors_count)})
    sweep_dir = Path(experiments_dir) / (name or f"tune_{Path(preset).stem}_{dt.datetime.now():%Y%m%d-%H%M%S}")
    if (sweep_dir / SWEEP_FILE).exists():
        raise ConfigError(f"{sweep_dir} already holds a sweep; continue it with rulka tune --resume {sweep_dir} "
                          f"or pick another -e")
    if max_steps is None and minutes is None:
        max_steps = int(config.training.max_env_steps)
    budget = max_steps if max_steps else minutes * 60
    if grace_period is not None and not 0 < grace_period < budget - 1:
        raise ConfigError(f"--grace-period {grace_period:g}: give a number between 0 and the trial's budget ({budget:g} "
                          f"{'env steps' if max_steps else 'seconds'})")
    sweep_dir.mkdir(parents=True, exist_ok=True)
    sweep = {
        "dir": str(sweep_dir.resolve()), "preset": preset, "space_file": str(Path(space_file).resolve()),
        "config_files": [str(Path(c).resolve()) for c in config_files], "overrides": overrides,
        "keys": space.keys, "trials": trials, "scheduler": scheduler, "minutes": minutes, "max_steps": max_steps,
        "grace_period": grace_period, "reduction_factor": reduction_factor, "concurrent": concurrent,
        "seed": seed, "device": device, "gpus_per_trial": gpus_per_trial,
        "mode": graph_manager.evaluation_mode, "metric_name": graph_manager.evaluation_name,
    }
    (sweep_dir / SWEEP_FILE).write_text(yaml.safe_dump(sweep, sort_keys=False), encoding="utf-8")
    shutil.copyfile(space_file, sweep_dir / "space.yaml")
    _print_plan(sweep)
    _connect(ray_address)
    tune = import_tune()
    tuner = tune.Tuner(_trainable(sweep), param_space={"trial": tune.grid_search(trials)},
                       tune_config=_tune_config(sweep), run_config=_run_config(sweep))
    return finish(tuner.fit(), sweep)


def resume_sweep(sweep_dir: str, ray_address: str | None = None) -> int:
    """Continue a sweep stopped by Ctrl-C or killed: trials that ended stay ended, the others continue
    (from their run's last checkpoint) or start."""
    path = Path(sweep_dir)
    if not (path / SWEEP_FILE).is_file():
        raise ConfigError(f"{path} is not a rulka tune sweep folder (no {SWEEP_FILE})")
    sweep = load_yaml_file(path / SWEEP_FILE)
    tune = import_tune()
    if not tune.Tuner.can_restore(str(Path(sweep["dir"]) / TUNE_DIR)):
        raise ConfigError(f"{path / TUNE_DIR} holds no Ray Tune state to resume (the sweep stopped before its first "
                          f"trial started); start it again in a new folder")
    _connect(ray_address)
    print(f"rulka tune: resuming {path}", file=sys.stderr)
    tuner = tune.Tuner.restore(str(Path(sweep["dir"]) / TUNE_DIR), trainable=_trainable(sweep),
                               resume_unfinished=True, resume_errored=True)
    return finish(tuner.fit(), sweep)


def _connect(ray_address: str | None) -> None:
    from rulka.collection.ray_collection import connect

    connect(ray_address)


def _trainable(sweep: dict[str, Any]) -> Any:
    tune = import_tune()
    from ray.tune.execution.placement_groups import PlacementGroupFactory

    gpus = float(sweep.get("gpus_per_trial") or 0.0)

    def resources(config: dict[str, Any]) -> Any:
        return PlacementGroupFactory([{"CPU": float(config["trial"]["cpus"]), "GPU": gpus}])

    return tune.with_resources(tune.with_parameters(run_trial, sweep=sweep), resources)


def _tune_config(sweep: dict[str, Any]) -> Any:
    tune = import_tune()
    scheduler = None
    if sweep["scheduler"] == "asha":
        from rulka.tune_scheduler import RecordingASHAScheduler

        time_attr, budget = _time_axis(sweep)
        rf = int(sweep["reduction_factor"])
        grace = sweep["grace_period"] or max(1, int(budget / rf ** 2))
        # Rungs strictly below the budget, and no stop at it: a trial that reaches its budget ends by itself
        # (final checkpoint written) instead of being ended by Ray at its last evaluation.
        scheduler = RecordingASHAScheduler(str(Path(sweep["dir"]) / STOPPED_FILE), time_attr=time_attr,
                                           max_t=budget - 1, grace_period=grace, reduction_factor=rf,
                                           stop_last_trials=False)
    return tune.TuneConfig(metric=METRIC, mode=sweep["mode"], scheduler=scheduler, num_samples=1,
                           max_concurrent_trials=sweep.get("concurrent") or None,
                           trial_dirname_creator=lambda trial: trial_name(trial.config["trial"]["index"]),
                           trial_name_creator=lambda trial: trial_name(trial.config["trial"]["index"]))


def _time_axis(sweep: dict[str, Any]) -> tuple[str, float]:
    """ASHA's time: environment steps with --max-steps, else the trial's seconds (--minutes)."""
    if sweep.get("max_steps"):
        return "env_steps", int(sweep["max_steps"])
    return "time_total_s", float(sweep["minutes"]) * 60.0


def _run_config(sweep: dict[str, Any]) -> Any:
    tune = import_tune()
    return tune.RunConfig(name=TUNE_DIR, storage_path=sweep["dir"], verbose=0, callbacks=[_finite_tensorboard_logger()],
                          failure_config=tune.FailureConfig(max_failures=0))


def _finite_tensorboard_logger() -> Any:
    """Tune's TensorBoard logger without the +inf metric of a trial that has no evaluation yet (tensorboardX
    prints "NaN or Inf found in input tensor." for each, every report, and the value draws nothing)."""
    from ray.tune.logger import TBXLoggerCallback

    class FiniteTBXLoggerCallback(TBXLoggerCallback):
        def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
            finite = {k: v for k, v in result.items() if not isinstance(v, float) or math.isfinite(v)}
            super().log_trial_result(iteration, trial, finite)

    return FiniteTBXLoggerCallback()


def _print_plan(sweep: dict[str, Any]) -> None:
    budget = f"{sweep['max_steps']} env steps" if sweep.get("max_steps") else ""
    if sweep.get("minutes"):
        budget += (" or " if budget else "") + f"{sweep['minutes']:g} minutes"
    print(f"rulka tune: {len(sweep['trials'])} trials of {sweep['preset']} ({budget} each, {sweep['scheduler']}) in "
          f"{sweep['dir']}; metric: {sweep['metric_name']}, {'lower' if sweep['mode'] == 'min' else 'higher'} is "
          f"better", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------- one trial
def run_trial(config: dict[str, Any], sweep: dict[str, Any]) -> None:
    """Tune's function for one trial: run ``rulka`` in a process, report each evaluation to Tune.

    A trial whose run folder holds a checkpoint (a resumed sweep) continues with ``--resume``. When Tune
    stops the trial (ASHA), Ray ends the trial's worker and the run's process with it (the run folder keeps
    the checkpoints written so far: ``checkpoint_every_n_env_steps`` and ``best.pt``); should the run outlive
    its parent, it stops itself (:mod:`rulka.tune_trial`). With ``--minutes`` the run gets Ctrl-C at the
    deadline, writes its final checkpoint and ends as a finished trial."""
    from ray import tune

    trial = config["trial"]
    run_dir = Path(sweep["dir"]) / TRIALS_DIR / trial_name(trial["index"])
    progress = run_dir / PROGRESS_FILE
    resuming = checkpoints.has_checkpoint(run_dir / "checkpoints" / checkpoints.LAST)
    if resuming:
        args = ["--resume", str(run_dir)]
        offset = progress.stat().st_size if progress.exists() else 0
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        progress.unlink(missing_ok=True)  # a start killed before its first checkpoint begins again
        offset = 0
        args = ["-p", sweep["preset"], "-e", run_dir.name, "--experiments-dir", str(run_dir.parent),
                "--seed", str(sweep["seed"])]
        args += [a for c in sweep["config_files"] for a in ("--config", c)]
        args += [a for o in [*sweep["overrides"], *trial["overrides"]] for a in ("-cp", o)]
    args += ["--device", sweep["device"], "--no-progress"]
    if sweep.get("max_steps"):
        args += ["--max-steps", str(sweep["max_steps"])]
    package_root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    deadline = time.monotonic() + float(sweep["minutes"]) * 60 if sweep.get("minutes") else None
    with open(run_dir / LOG_FILE, "ab") as log:
        process = subprocess.Popen([sys.executable, "-m", "rulka.tune_trial", str(progress), *args],
                                   stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(run_dir.parent))
        interrupted = False
        last = {"env_steps": 0, "last_evaluation": None, "best_evaluation": None}
        try:
            while True:
                ended = process.poll() is not None
                lines, offset = _new_lines(progress, offset)
                for line in lines:
                    tune.report(_metrics(line, sweep["mode"]))
                    last = line
                if ended:
                    break
                if deadline is not None and not interrupted and time.monotonic() >= deadline:
                    process.send_signal(signal.SIGINT)
                    interrupted = True
                time.sleep(POLL_S)
        finally:
            _stop(process)
    if not (process.returncode == 0 or interrupted and process.returncode == 128 + signal.SIGINT):
        tail = (run_dir / LOG_FILE).read_text(encoding="utf-8", errors="replace")[-2000:]
        raise RuntimeError(f"{trial_name(trial['index'])}: rulka exited with status {process.returncode}; "
                           f"its log ({run_dir / LOG_FILE}) ends with:\n{tail}")
    tune.report({**_metrics(last, sweep["mode"]), FINISHED: True})  # not stopped by the scheduler


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)  # the run's final checkpoint
    try:
        process.wait(STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _new_lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete JSON lines of ``path`` after byte ``offset``, and the offset after them."""
    if not path.exists():
        return [], offset
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    return [json.loads(line) for line in data[:end].splitlines() if line.strip()], offset + end


def _metrics(line: dict[str, Any], mode: str) -> dict[str, Any]:
    """What Tune gets for one evaluation; before any (e.g. no finished greedy race) the metric is the worst
    possible (+inf when lower is better), so ASHA ranks such a trial last."""
    best = line.get("best_evaluation")
    last = line.get("last_evaluation")
    worst = math.inf if mode == "min" else -math.inf
    return {METRIC: float(best) if best is not None else worst,
            "last_evaluation": float(last) if last is not None else math.nan,
            "env_steps": int(line["env_steps"]), "run_wall_time_s": float(line.get("wall_time_s", 0.0))}


# --------------------------------------------------------------------------------------------- the table
def finish(results: Any, sweep: dict[str, Any]) -> int:
    """Print the table, write results.csv, link ``best`` to the best trial's run folder."""
    by_index: dict[int, Any] = {}
    for result in results:
        config = result.config or {}
        if "trial" in config:
            by_index[int(config["trial"]["index"])] = result
    sweep_dir = Path(sweep["dir"])
    stopped_file = sweep_dir / STOPPED_FILE
    stopped = {int(i) for i in stopped_file.read_text().split()} if stopped_file.exists() else set()
    rows = [_row(trial, by_index.get(trial["index"]), sweep, trial["index"] in stopped) for trial in sweep["trials"]]
    interrupted = any(r["status"] in ("interrupted", "not run") for r in rows)  # Ctrl-C: Tune saved its state
    columns = ["trial", *sweep["keys"], METRIC, "last_evaluation", "env_steps", "stopped_early", "status", "run_dir"]
    with open(sweep_dir / RESULTS_FILE, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    print(_table(rows, columns[:-1]))
    best = _best(rows, sweep["mode"])
    link = sweep_dir / BEST_LINK
    if link.is_symlink() or link.exists():
        link.unlink()
    if best is not None:
        link.symlink_to(Path(TRIALS_DIR) / best["trial"], target_is_directory=True)
        print(f"best: {best['trial']} ({sweep['metric_name']} {best[METRIC]}), run folder {link} -> "
              f"{TRIALS_DIR}/{best['trial']}; rulka export {link} --out DIR, or rulka -p PRESET --init-from {link}")
    else:
        print("best: none (no trial reported an evaluation)")
    print(f"table written to {sweep_dir / RESULTS_FILE}")
    print(f"{len(rows)} trials, {sum(1 for r in rows if r['stopped_early'] == 'yes')} stopped early, "
          f"{sum(1 for r in rows if r['status'] == 'error')} failed")
    if interrupted:
        print(f"rulka tune: the sweep was interrupted; rulka tune --resume {sweep_dir} continues it", file=sys.stderr)
        return 128 + signal.SIGINT
    return 0 if any(r["status"] != "error" for r in rows) else 1


def _row(trial: dict[str, Any], result: Any, sweep: dict[str, Any], stopped: bool) -> dict[str, Any]:
    run_dir = Path(sweep["dir"]) / TRIALS_DIR / trial_name(trial["index"])
    row: dict[str, Any] = {"trial": trial_name(trial["index"]), **{k: trial["values"][k] for k in sweep["keys"]}}
    metrics = dict(result.metrics or {}) if result is not None else {}
    if not metrics:  # nothing reached Tune: the run's own record, if any
        lines, _ = _new_lines(run_dir / PROGRESS_FILE, 0)
        metrics = _metrics(lines[-1], sweep["mode"]) if lines else {}
    value = metrics.get(METRIC)
    row[METRIC] = _number(value)
    row["last_evaluation"] = _number(metrics.get("last_evaluation"))
    row["env_steps"] = metrics.get("env_steps", "")
    error = result is not None and result.error is not None
    finished = bool(metrics.get(FINISHED))
    if error or finished:
        status = "error" if error else "done"
    elif stopped:
        status = "stopped"
    else:
        status = "interrupted" if metrics or (run_dir / LOG_FILE).exists() else "not run"
    row["stopped_early"] = "yes" if status == "stopped" else "no"
    row["status"] = status
    row["run_dir"] = str(run_dir)
    return row


def _number(value: Any) -> Any:
    if value is None or isinstance(value, float) and not math.isfinite(value):
        return ""
    return round(float(value), 4)


def _best(rows: list[dict[str, Any]], mode: str) -> dict[str, Any] | None:
    scored = [r for r in rows if r[METRIC] != "" and r["status"] != "error"]
    if not scored:
        return None
    return (min if mode == "min" else max)(scored, key=lambda r: r[METRIC])


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    cells = [[str(c) for c in columns]] + [[_show(r[c]) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in cells)


def _show(value: Any) -> str:
    if value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
