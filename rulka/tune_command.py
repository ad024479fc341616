"""``rulka tune PRESET --space SPACE.yaml --samples N ...`` and ``rulka tune --resume DIR`` (see :mod:`rulka.tune`)."""
from __future__ import annotations

import argparse
from typing import Any

DESCRIPTION = """\
Hyperparameter sweep on Ray Tune: N trials of a preset with values drawn from a search space, each an
ordinary rulka run (own run folder, TensorBoard logs, checkpoints), on this machine or a Ray cluster.
The metric is the run's own evaluation (the best evaluation return; for TrackMania the best greedy race
time, lower is better), reported to Tune at each evaluation so that ASHA can stop poor trials early. At
the end a table is printed and written to SWEEP/results.csv, and SWEEP/best links to the best trial's
run folder (rulka export SWEEP/best, --init-from SWEEP/best). Needs Ray Tune: pip install 'rulka[ray]'.

search space (YAML, -cp keys; every trial is checked against the parameters' rules before any starts):
  training.batch_size: {choice: [32, 64, 128]}
  training.lr_schedule: {loguniform: [1.0e-4, 3.0e-3], as: "[[0, VALUE]]"}   # 'as': the -cp value around it
  training.n_steps: {randint: [1, 5]}                                         # both ends included
  exploration.tau_epsilon_boltzmann: {uniform: [0.0, 0.05]}

examples:
  rulka tune cartpole_dqn --space space.yaml --samples 8 --scheduler asha --max-steps 30000
  rulka tune trackmania_iqn_sim --space sim.yaml --samples 8 --minutes 10 --scheduler asha
  rulka tune cartpole_dqn --space space.yaml --samples 16 --ray-address auto     # the cluster of `ray start`
  rulka tune --resume experiments/tune_cartpole_dqn_20261205-120000             # after Ctrl-C or a kill
"""


def add_tune_command(subparsers: Any) -> None:
    """Register ``rulka tune`` (a core command)."""
    parser = subparsers.add_parser("tune", help="hyperparameter sweep on Ray Tune (ASHA, one machine or a cluster)",
                                   description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("preset", nargs="?", help="preset name (rulka -l lists them) or path to a preset .py file")
    parser.add_argument("--space", metavar="SPACE.yaml", help="the search space: -cp keys with choice, uniform, "
                        "loguniform or randint (see above)")
    parser.add_argument("--samples", type=int, metavar="N", help="number of trials, drawn from the space with --seed")
    parser.add_argument("--scheduler", choices=["asha", "fifo"], default="fifo",
                        help="asha: stop trials whose metric is in the worse part at each rung (ASHA); fifo: run every "
                             "trial to its end (default)")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=float, metavar="M", help="each trial trains M minutes (then stops as after "
                        "Ctrl-C, final checkpoint written); ASHA's time is then seconds")
    budget.add_argument("--max-steps", type=int, metavar="S", help="each trial trains S environment steps; ASHA's time is "
                        "then environment steps (default without --minutes: the preset's max_env_steps)")
    parser.add_argument("--grace-period", type=float, metavar="T", help="ASHA: the first rung, in ASHA's time (steps or "
                        "seconds); default: the budget / reduction-factor^2")
    parser.add_argument("--reduction-factor", type=int, default=3, metavar="R",
                        help="ASHA: rungs R times apart; 1/R of the trials go on at each rung (default 3)")
    parser.add_argument("--concurrent", type=int, metavar="K", help="at most K trials at a time (default: as many as "
                        "the CPUs allow; a trial takes 1 + performance.gpu_collectors_count CPUs)")
    parser.add_argument("--ray-address", metavar="ADDRESS",
                        help="the Ray cluster to run trials on: auto (the cluster this machine joined with ray start) "
                             "or HOST:PORT, as for collectors; default: a local Ray instance on 127.0.0.1")
    parser.add_argument("--resume", metavar="SWEEP_DIR", help="continue a sweep stopped by Ctrl-C or killed: ended trials "
                        "stay, the others continue from their run's last checkpoint; takes no other flag but --ray-address")
    parser.add_argument("-e", "--experiment-name", metavar="NAME", help="the sweep folder under --experiments-dir "
                        "(default: tune_PRESET_TIMESTAMP)")
    parser.add_argument("--experiments-dir", default="experiments", help="where sweep folders go (default: ./experiments)")
    parser.add_argument("--config", action="append", default=[], metavar="FILE.yaml",
                        help="YAML file applied to every trial before its sampled values (repeatable)")
    parser.add_argument("-cp", "--custom-parameter", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="parameter of every trial, applied before its sampled values (repeatable)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw of the trials and of every trial's run "
                        "(the same for all, so they differ only by their values; default 0)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"],
                        help="where each trial's networks run (default cpu; with cuda give --gpus-per-trial)")
    parser.add_argument("--gpus-per-trial", type=float, default=0.0, metavar="G",
                        help="GPUs Ray reserves per trial (fractions share one GPU; default 0)")
    parser.set_defaults(func=run_tune_command, tune_parser=parser)


def run_tune_command(args: argparse.Namespace) -> int:
    from rulka.ray_address import parse_ray_address
    from rulka.tune import resume_sweep, start_sweep

    parser = args.tune_parser
    address = parse_ray_address(args.ray_address)
    if args.resume:
        if args.preset or args.space or args.samples:
            parser.error("--resume DIR continues a sweep as it was started: give no preset, --space or --samples")
        return resume_sweep(args.resume, address)
    if not (args.preset and args.space and args.samples):
        parser.error("give a preset, --space SPACE.yaml and --samples N (or --resume SWEEP_DIR)")
    return start_sweep(args.preset, args.space, args.samples, experiments_dir=args.experiments_dir,
                       name=args.experiment_name, config_files=args.config, overrides=args.custom_parameter,
                       scheduler=args.scheduler, minutes=args.minutes, max_steps=args.max_steps,
                       grace_period=args.grace_period, reduction_factor=args.reduction_factor,
                       concurrent=args.concurrent, seed=args.seed, device=args.device,
                       gpus_per_trial=args.gpus_per_trial, ray_address=address)
