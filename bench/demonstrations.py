"""Learning from demonstrations (issue 44) on the simulator: how fast pretraining updates are, which
supervised loss to pretrain with, and the goal table (runs with and without demonstrations).

    python bench/demonstrations.py speed [--updates 200] [--rounds 3] [--threads 1]
    python bench/demonstrations.py loss [--track short] [--updates 500] [--seeds 0,1]
    python bench/demonstrations.py table [--rows procedural:11:0,procedural:12:0] [--minutes 30] [--sides both|with|without] [--out DIR]
    python bench/demonstrations.py standin [--games 4] [--minutes 30] [--repeats 1] [--out DIR]

``speed``: ``trackmania_iqn_sim``'s agent (its network, batch 64, mini-race replay, the run's
precision) on demonstrations of the classical driver on ``short``: ``--updates`` pretraining updates
against as many learner updates (the body of ``agent.train()``: sample from the replay holding the
same races, loss, backward, step, priorities), alternating, ``--rounds`` times; updates/s of each.

``loss``: for each supervised loss, a fresh agent pretrains ``--updates`` updates on 5 races of the
classical driver on ``--track``, then races it greedily (the policy alone, no learning) from reset
seed 0: progress, race time, and the share of the demonstrations' states where the greedy action is
the demonstrated one. One row per loss and torch seed.

``table``: per row (TRACK:SEED), the tuned classical driver's 5 races as demonstrations, then
``trackmania_iqn_sim`` for ``--minutes`` with and without them (``bench/trackmania_vs_baseline.py``'s
rows: first finish, first race faster than the shipped and the tuned driver, best greedy race). The
minutes count from the run's creation (races.csv's wall time), pretraining included; tuning the
driver and recording its races are not counted.

``standin``: the real-game path. The tuned classical driver's race on ``--track`` (simulator, no start
jitter) is exported as a TMInterface inputs script and played back through a stand-in game with
``rulka demos from-inputs --launch`` (the demonstration set a user records from a replay's inputs);
then ``rulka -p trackmania_iqn_uni --config presets/trackmania_iqn_uni_standin.yaml`` through
``--games`` stand-in games for ``--minutes``, without and with that one race as
``demonstrations.folders`` (``bench/vs_linesight_training.py``'s rulka side; the order alternates
between repeats). Per run: the minute and actions of the first finished race (exploring or greedy),
races, finished races and the best race; the goal is the first finish at least 3 times sooner with the
replayed race. Minutes count from the start of the run's process (pretraining included).
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agents.demonstrations import demonstration_replay, pretrain  # noqa: E402
from environments.trackmania.env import TrackManiaEnv, trackmania_spaces  # noqa: E402
from environments.trackmania.tools.demos import record_demonstrations  # noqa: E402
from memories.demonstrations import fill_replay, load_demonstrations  # noqa: E402
from rulka.machine import describe_machine  # noqa: E402
from rulka.presets import load_graph_manager  # noqa: E402

PRESET = "trackmania_iqn_sim"


def build_agent(seed: int = 0, loss: str = "large_margin"):
    """The preset's agent and input filter, on the CPU."""
    graph_manager = load_graph_manager(PRESET)
    config = graph_manager.config
    config.demonstrations.pretrain_loss = loss
    observation_space, action_space = trackmania_spaces(config.environment)
    input_filter = graph_manager.input_filter or graph_manager.default_input_filter()
    torch.manual_seed(seed)
    agent = graph_manager.agent_class(config, input_filter.filter_space(observation_space), action_space, "cpu", seed)
    return agent, input_filter


def record(track: str, races: int, out: Path, margins=None) -> Path:
    if not (out / "demonstrations.yaml").is_file():
        config = load_graph_manager(PRESET).config
        record_demonstrations(out, track, races, params=config.environment, margins=margins)
    return out


def cmd_speed(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    folder = record("short", 5, Path(args.demos or tempfile.mkdtemp()) / "short_driver")
    episodes = load_demonstrations(folder).episodes
    agent, input_filter = build_agent()
    demos = demonstration_replay(agent, episodes, input_filter.filter_observation, input_filter.filter_reward, 1)
    fill_replay(agent.memory, episodes * 4, input_filter.filter_observation, input_filter.filter_reward)
    batch_size = agent.config.training.batch_size

    def learner(updates: int) -> float:
        start = time.perf_counter()
        for _ in range(updates):
            batch = agent.sample_batch()
            agent.learn_from_batch(batch)
            agent.counters.transitions_sampled += batch.size
            agent.update_target_network_if_due()
        return updates / (time.perf_counter() - start)

    pretrain(agent, demos, 10)  # warm-up of both paths
    learner(10)
    rows = []
    for _ in range(args.rounds):
        pre = pretrain(agent, demos, args.updates).updates_per_s
        learn = learner(args.updates)
        rows.append((pre, learn))
        print(f"pretraining {pre:.1f} updates/s, learner {learn:.1f} updates/s, ratio {pre / learn:.2f}", flush=True)
    ratios = [p / l for p, l in rows]
    print(f"\n{describe_machine()}; {args.threads} thread(s), batch {batch_size}, {agent.precision.describe()}")
    print(f"median ratio pretraining / learner updates per s: {statistics.median(ratios):.2f} "
          f"[{min(ratios):.2f}-{max(ratios):.2f}] over {args.rounds} rounds of {args.updates} updates")


def greedy_race(agent, input_filter, track: str, params) -> dict:
    env = TrackManiaEnv(params=params, track=track)
    obs, info = env.reset(seed=0)
    done = False
    while not done:
        filtered = input_filter.filter_observation(obs)
        with torch.no_grad():
            q = agent.q_values(agent.to_device({k: v[None] for k, v in filtered.items()}))
        obs, _, terminated, truncated, info = env.step(int(q.argmax(1)[0]))
        done = terminated or truncated
    env.close()
    return info


def cmd_loss(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    folder = record(args.track, 5, Path(args.demos or tempfile.mkdtemp()) / f"{args.track.replace(':', '_')}_driver")
    episodes = load_demonstrations(folder).episodes
    print(f"{describe_machine()}; {args.updates} pretraining updates on 5 races of the classical driver on "
          f"{args.track} ({sum(e.length for e in episodes)} steps), then one greedy race from reset seed 0")
    print("loss          | seed | agreement | s    | progress | race")
    for loss in ("large_margin", "cross_entropy"):
        for seed in [int(s) for s in args.seeds.split(",")]:
            agent, input_filter = build_agent(seed, loss)
            demos = demonstration_replay(agent, episodes, input_filter.filter_observation,
                                         input_filter.filter_reward, seed)
            result = pretrain(agent, demos, args.updates, loss, agent.config.demonstrations.margin)
            states = {k: np.concatenate([input_filter.filter_observation({kk: vv[t] for kk, vv in e.states.items()})[k][None]
                                         for e in episodes for t in range(e.length)]) for k in episodes[0].states}
            actions = torch.from_numpy(np.concatenate([e.actions for e in episodes]))
            with torch.no_grad():
                agreement = float((agent.q_values(agent.to_device(states)).argmax(1) == actions).float().mean())
            info = greedy_race(agent, input_filter, args.track, agent.config.environment)
            race = (f"finished {info['race_time_ms'] / 1000:.2f} s" if info["finished"]
                    else f"{info['end_reason']} at {info['race_time_ms'] / 1000:.1f} s")
            print(f"{loss:13} | {seed:4} | {agreement:9.2f} | {result.seconds:4.0f} | "
                  f"{info['progress_fraction']:8.1%} | {race}", flush=True)


def cmd_table(args: argparse.Namespace) -> None:
    from trackmania_vs_baseline import References, parse_rows, print_table, table_row, train

    from environments.trackmania.tools.baseline import run_baseline, tune_baseline

    out = Path(args.out or tempfile.mkdtemp(prefix="rulka_demos_"))
    rows = []
    for track, seed in parse_rows(args.rows):
        shipped, tuned = run_baseline(track), tune_baseline(track)
        refs = References(shipped.race_time_s if shipped.finished else math.inf, tuned.race_time_s, str(tuned.margins))
        name = track.replace(":", "_")
        demos = record(track, 5, out / f"{name}_tuned_driver", tuned.margins)
        sides = (("none", []), ("driver x5", [f"demonstrations.folders=[{demos}]"]))
        wanted = {"both": ("none", "driver x5"), "with": ("driver x5",), "without": ("none",)}[args.sides]
        for label, overrides in [side for side in sides if side[0] in wanted]:
            run_dir = out / f"{name}_seed{seed}_{'demos' if overrides else 'plain'}"
            train(track, seed, args.minutes, run_dir, [*overrides, *args.custom_parameter])
            if not (run_dir / "races.csv").is_file():
                print(f"{run_dir.name}: no race ended within {args.minutes:g} minutes", flush=True)
                continue
            row = table_row(track, str(seed), args.minutes, refs, run_dir)
            row["init from"] = f"demonstrations: {label}"  # the column that tells rows apart
            rows.append(row)
    print_table(rows)


def record_standin_demo(track: str, out: Path) -> str:
    """The tuned driver's race on ``track`` played back through a stand-in game into ``out``; returns
    ``rulka demos from-inputs``'s last line."""
    import os
    import subprocess

    from vs_linesight_training import ROOT, STANDIN_LAUNCH_VARIABLES, STANDIN_YAML

    from environments.trackmania.tmi.standin.build import LAUNCH_SCRIPT
    from environments.trackmania.tmi.standin.ports import free_port_block
    from environments.trackmania.tools.baseline import tune_baseline
    from environments.trackmania.tools.demos import driver_race_as_inputs
    from rulka.config import apply_overrides

    config = apply_overrides(load_graph_manager("trackmania_iqn_uni").config, [str(STANDIN_YAML)])
    margins = tune_baseline(track).margins
    out.mkdir(parents=True, exist_ok=True)
    inputs = out / "driver_race.txt"
    _, race = driver_race_as_inputs(config.environment, track, inputs, margins)
    if not race.finished:
        raise SystemExit(f"the tuned driver ({margins}) did not finish {track} in the stand-in configuration")
    env = {k: v for k, v in os.environ.items() if k not in STANDIN_LAUNCH_VARIABLES}
    env.update(TMI_LINUX_LAUNCH_SCRIPT=str(LAUNCH_SCRIPT), TMI_ACCOUNT_NAME="standin",
               RULKA_STANDIN_PYTHON=sys.executable, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "rulka.cli", "demos", "from-inputs", str(inputs), "--config", str(STANDIN_YAML),
               "--map", track, "--port", str(free_port_block(1)), "--launch", "--out", str(out / "demo")]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"rulka demos from-inputs failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    said = done.stdout.strip().splitlines()
    return f"driver {margins}: simulator {race.race_time_ms / 1000:.2f} s; {said[-1] if said else 'recorded'}"


def cmd_standin(args: argparse.Namespace) -> None:
    from vs_linesight_training import run_rulka

    out = Path(args.out or tempfile.mkdtemp(prefix="rulka_demos_standin_")).resolve()
    print(f"{describe_machine()}; {args.games} stand-in games, {args.minutes:g} minutes a run", flush=True)
    print(record_standin_demo(args.track, out), flush=True)
    labels = {"none": [], "replayed race": [f"demonstrations.folders=[{out / 'demo'}]"]}
    rows = []
    for repeat in range(args.repeats):
        order = list(labels) if repeat % 2 == 0 else list(labels)[::-1]
        for label in order:
            work = out / f"r{repeat}_{'demos' if labels[label] else 'plain'}"
            work.mkdir(parents=True, exist_ok=True)
            print(f"[{time.strftime('%H:%M:%S')}] r{repeat}: demonstrations {label} in {work}", flush=True)
            side = run_rulka(work, args.track, args.games, args.minutes, args.seed,
                             [*labels[label], *args.custom_parameter])
            finished = [r for r in side.races if r.finished]
            first = min(finished, key=lambda r: r.minute, default=None)
            rows.append({"repeat": repeat, "demonstrations": label, "minutes": side.minutes, "actions": side.actions,
                         "races": len(side.races), "finished": len(finished),
                         "first": first, "best": min((r.race_time_s for r in finished), default=math.inf)})
            print(f"  {side.note}", flush=True)
    print(f"\n| repeat | demonstrations | minutes | actions | races | finished | first finish (min) | "
          f"first finish (actions) | best race (s) |\n|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        first = r["first"]
        print(f"| {r['repeat']} | {r['demonstrations']} | {r['minutes']:.1f} | {r['actions']} | {r['races']} | "
              f"{r['finished']} | {'-' if first is None else f'{first.minute:.1f}'} | "
              f"{'-' if first is None else first.actions} | {r['best']:.2f} |")
    for repeat in range(args.repeats):
        plain, demos = (next(r for r in rows if r["repeat"] == repeat and r["demonstrations"] == label)
                        for label in labels)
        if demos["first"] is None:
            print(f"r{repeat}: no finish with the replayed race in {args.minutes:g} minutes (goal: 3 times sooner)")
            continue
        plain_minute = plain["first"].minute if plain["first"] else plain["minutes"]
        bound = "" if plain["first"] else " at least (no finish without it)"
        print(f"r{repeat}: first finish {plain_minute / demos['first'].minute:.1f} times sooner with the replayed "
              f"race{bound} (goal: at least 3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("speed")
    p.add_argument("--updates", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--demos", default=None, help="folder for the recorded sets (default: a temporary one)")
    p.set_defaults(func=cmd_speed)
    p = sub.add_parser("loss")
    p.add_argument("--track", default="short")
    p.add_argument("--updates", type=int, default=500)
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--demos", default=None)
    p.set_defaults(func=cmd_loss)
    p = sub.add_parser("table")
    p.add_argument("--rows", default="procedural:11:0,procedural:12:0")
    p.add_argument("--sides", choices=["both", "with", "without"], default="both",
                   help="which runs per row: with and without demonstrations, or one side alone (a setting of "
                        "demonstrations.* changes only the runs with them)")
    p.add_argument("--no-without", dest="sides", action="store_const", const="with",
                   help="the same as --sides with")
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--out", default=None)
    p.add_argument("-cp", "--custom-parameter", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.set_defaults(func=cmd_table)
    p = sub.add_parser("standin")
    p.add_argument("--track", default="short", choices=["short"],
                   help="the stand-in configuration's track (its map cycle and reference line)")
    p.add_argument("--games", type=int, default=4)
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    p.add_argument("-cp", "--custom-parameter", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.set_defaults(func=cmd_standin)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
