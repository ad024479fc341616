"""Write docs/reliability.md from the test suite's own results: each fault and bad input tried,
how many times, and what happened.

    python scripts/reliability_report.py                 # runs the tests, writes docs/reliability.md
    python scripts/reliability_report.py --out FILE.md -- -k checkpoint   # extra pytest arguments after --

It runs every test marked ``reliability`` (``@pytest.mark.reliability`` on a test, or
``pytestmark = pytest.mark.reliability`` in a module; the marker is registered in setup.cfg) and
writes one row per test function:

* the fault or bad input and the expected outcome: the test's docstring;
* the cases: the parametrize ids (one case per id);
* the tries: 1 per case, unless the test records more with ``record_property("tries", n)`` (e.g. a
  test that kills and resumes a run 20 times records 20);
* the result: passed / failed / skipped counts, straight from pytest's reports.

To add a fault test, mark it ``reliability`` and give it a docstring that says what is done to the
program and what must happen; the next run of this script lists it. A fault of games or collectors
also gets a row in :data:`GAME_FAULTS` (how it is detected, what happens, its test); a soak's printout
(``bench/trackmania_soak.py --out bench/results/trackmania_soak*.md``) is appended. The exit status is pytest's
(non-zero when a test fails); the document is written either way and shows the failures.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKER = "reliability"
COMMAND = "python scripts/reliability_report.py"


@dataclass(frozen=True)
class GameFault:
    """A fault of the real-game path: how rulka detects it, what it does, and the test that proves it."""

    fault: str
    detected: str
    handled: str
    test: str  # module::function of the test marked reliability that injects it


#: The faults of game processes and collectors that the stand-in games are put through
#: (tests/environments/trackmania/tmi/test_supervision.py); each row's result is its test's (the faults a run
#: survives share one run and one test, injected in turn; a run that cannot start has a test of its own).
SUPERVISION = "tests/environments/trackmania/tmi/test_supervision.py"
GAME_FAULTS = (
    GameFault("A game is killed (SIGKILL) mid-race",
              "its collector's next read or write on the link fails (connection reset / closed)",
              "the race in flight is discarded (`race discarded: game instance N (port P): ...; the game is gone`), "
              "not written to races.csv, and none of its actions is stored (the learner holds a race's chunks "
              "until it ends: `tests/rulka/collection/test_episodes.py`); the dead game is reaped and the same "
              "collector launches a new game on the same port before the next race (at once while it waits for the "
              "learner: `check_between_races`)",
              f"{SUPERVISION}::test_supervision_faults_in_turn_in_one_run"),
    GameFault("A game hangs mid-race (SIGSTOP)",
              "the collector's read times out after `environment.timeout_during_run_ms` (default 30 s)",
              "the race in flight is discarded (`...; the game hung: killed (pids ...)`); the game is killed "
              "(SIGKILL works on a stopped process) and reaped, and relaunched on its port before the next race "
              "(at once while its collector waits for the learner)",
              f"{SUPERVISION}::test_supervision_faults_in_turn_in_one_run"),
    GameFault("A game dies (SIGKILL) or hangs (SIGSTOP) while its collector waits for the learner between races "
              "(the learner stalled longer than the in-race timeout)",
              "the waiting collector checks its games about once a second (`check_between_episodes`): a dead game "
              "at once; a stopped one does not answer a short question (`is_in_menus`) within "
              "`environment.timeout_during_run_ms`",
              "nothing is in flight, so nothing is discarded (`game instance N (port P) between races: ...; the game "
              "is gone` or `...; the game hung: killed (pids ...), relaunching it now`); a new game is launched at "
              "once, during the stall, by the same collector, and races when the learner reads again",
              f"{SUPERVISION}::test_supervision_faults_in_turn_in_one_run"),
    GameFault("A game hangs as its next race starts (stopped between races, unchecked)",
              "the next race on the loaded map starts by a rewind, so the collector's read times out after "
              "`environment.timeout_during_run_ms` as mid-race (menus, map loads and countdowns keep the start "
              "timeout, TMI_START_TIMEOUT_S, default 600 s)",
              "nothing is in flight, so nothing is discarded (`game instance N (port P): ...; the game hung: "
              "killed (pids ...)`); the next start attempt launches a new game and races",
              "tests/environments/trackmania/tmi/test_manager_fake_game.py::"
              "test_game_hung_between_races_is_relaunched_within_the_in_race_timeout"),
    GameFault("A connection drops and the game says hello late (the plugin first waits out its timeout on "
              "the old client)",
              "the manager reconnects to the same game; the new connection's first message gets the start "
              "timeout (TMI_START_TIMEOUT_S), not the in-race one, though the next race starts by a rewind",
              "the race in flight when the connection dropped is discarded; the game is kept (not killed as hung) "
              "and the next race starts on it",
              "tests/environments/trackmania/tmi/test_manager_fake_game.py::"
              "test_reconnection_waits_the_start_timeout_for_the_games_hello"),
    GameFault("A collector is killed (SIGKILL) mid-race",
              "the learner sees the collector process exit (`collector N died (exit code -9)`)",
              "the learner kills the games the collector reported (pid and start time) before it starts a new "
              "collector, whose game takes the freed port; the collector's unfinished episodes are dropped",
              f"{SUPERVISION}::test_supervision_faults_in_turn_in_one_run"),
    GameFault("A collector dies while the learner is in a long training burst (a minute and more at batch 512 "
              "on a CPU)",
              "the learner checks its collectors' exit codes and heartbeats once a second between gradient updates "
              "(`Collection.supervise`), not only between bursts",
              "within about a second: its games killed by the learner (named in the message), a new collector "
              "started; before, only after the burst, when the games' guards (60 s) could have killed them first",
              "tests/rulka/collection/test_processes.py::"
              "test_a_collector_that_dies_during_a_long_training_burst_is_replaced_within_seconds"),
    GameFault("A collector dies while the learner's thread is busy for seconds (one gradient update took 5 s in a "
              "soak on 2 cores, slowed by the dead collector's game racing on its own)",
              "a thread of the learner's waits on the collector processes' exits (`ProcessCollection` exit watcher) "
              "and logs the death at once",
              "its games killed within a second whatever the learner's thread is doing; the learner's next check "
              "starts a new collector and names the games killed; before, the games ran until that check "
              "(1.2-7.9 s after the kill in a soak of 19 kills)",
              "tests/rulka/collection/test_processes.py::"
              "test_a_dead_collectors_game_is_killed_at_once_while_the_learners_thread_is_busy"),
    GameFault("A collector is killed while it copies the learner's newest weights",
              "nothing to detect: the weights are shared without a lock (a sequence number; a reader copies again "
              "when a publication began under it)",
              "the learner's next publish and the other collectors' loads go on; with the old lock, the killed "
              "collector held it and the whole run waited forever",
              "tests/rulka/collection/test_shared.py::"
              "test_a_collector_killed_while_copying_the_weights_blocks_no_publish"),
    GameFault("An orphan game of ours (an earlier run's or collector's) holds the port at launch",
              "the launch finds a listener on the port whose environment carries `RULKA_TMI_LAUNCH_ID`",
              "it is killed (logged with its pid) under the launch lock before the new game starts",
              f"{SUPERVISION}::test_supervision_faults_in_turn_in_one_run"),
    GameFault("The learner stalls (SIGSTOP) longer than the games' in-race timeout while they race",
              "nothing to detect: a collector whose share of the rollout queue is full keeps playing the race in "
              "flight into its local buffer (`performance.collector_buffer_actions`) and waits between races",
              "no race is discarded and no game drops its client; the races go on after the stall",
              f"{SUPERVISION}::test_supervision_faults_in_turn_in_one_run"),
    GameFault("At the uni stand-in configuration's own learner settings (batch 512, replay ratio 32, speed 160, "
              "not throttled): a game hangs (SIGSTOP) mid-race, a collector is killed (SIGKILL) mid-race, the "
              "learner is frozen while its collectors get SIGTERM",
              "as above: the in-race timeout (30 s); the collector's exit; SIGTERM reaches the collectors",
              "the hung game's race is discarded and the game killed and relaunched; the killed collector's game "
              "goes with it and a new collector races; collectors sent SIGTERM close their environments and kill "
              "their games (exit 143), none left running; Ctrl-C then leaves no process of the run",
              "tests/environments/trackmania/tmi/test_supervision_unthrottled.py::"
              "test_supervision_at_the_configurations_own_learner_settings"),
    GameFault("A collector process is sent SIGTERM while its learner polls nothing",
              "the collector's own SIGTERM handler (no learner needed)",
              "it closes its environments and kills the games they still run (pid and start time), exit 143",
              "tests/rulka/collection/test_processes.py::"
              "test_a_collector_sent_sigterm_kills_its_games_while_the_learner_is_frozen"),
    GameFault("A Ray collector actor dies while the learner's thread is busy for seconds",
              "the actor watcher (a thread of the learner's) asks each actor for its games every half second; "
              "a failed question is a death",
              "its games killed within a few seconds of the death (Ray's report included) whatever the learner's "
              "thread is doing; the learner's next check starts a new actor and names the games killed; before, "
              "the learner asked only between two updates",
              "tests/rulka/collection/test_ray_collection.py::"
              "test_a_dead_actors_game_is_killed_at_once_while_the_learners_thread_is_busy"),
    GameFault("A Ray collector actor on another node dies (SIGKILL) while that node lives",
              "Ray fails the actor's pending calls at once; the actor watcher, a thread of the learner's that asks "
              "each actor for its games every half second, sees its question fail",
              "its games on that node are killed by the node's `ProcessKiller`, a small actor the learner started "
              "there when the actor first reported a game (a method call: no worker process to start then); a "
              "new actor is started",
              "tests/rulka/collection/test_multinode.py::"
              "test_a_dead_actors_games_on_a_worker_node_are_killed_by_the_nodes_killer_started_before"),
    GameFault("A Ray node is lost (its raylet and the collector actor on it die) while its game runs",
              "the game's guard process (not the collector's child) sees the pipe from its collector close and "
              "the collector's parent gone",
              "the guard kills the game and its launch script's group at once (by pid and start time); with the "
              "collector's parent alive it first leaves the learner 60 s to kill the game itself",
              "tests/environments/trackmania/tmi/test_game_guard.py::test_a_lost_nodes_game_dies_with_its_node"),
    GameFault("A stranger's program holds the port at launch",
              "the listener on the port has no rulka launch marker (or belongs to another user)",
              "not killed: `PortHeldError` names its pid and command line and the fix (stop it, or choose other "
              "ports with TMI_BASE_PORT); the collector fails, and after 3 failed starts in a row the run stops "
              "with that message",
              f"{SUPERVISION}::test_supervision_strangers_process_holding_the_port_is_reported_not_killed"),
    GameFault("A stranger's program takes the port while rulka launches a game there (after the launch's look "
              "at the port, before the game listens)",
              "while the launch waits for the game to listen, a listener on the port that is not a process of "
              "this launch and has no rulka launch marker",
              "not killed: `PortHeldError` at once (its pid and command line, 'while rulka was launching a game "
              "there'); the game started is killed. Before 1caab44 the stranger was taken for the game: named "
              "64.7 s later in a Ray soak (goal 5 s)",
              "tests/environments/trackmania/tmi/test_launch_lock.py::"
              "test_a_stranger_taking_the_port_during_the_launch_is_reported_at_once"),
    GameFault("A Ray actor's game cannot be relaunched at a race's start (a stranger took its port after the game "
              "died mid-race)",
              "the refusal ends the actor's playing thread; the actor watcher's question (every half second) "
              "carries what broke it",
              "logged at once (`collector N stopped playing: PortHeldError: ...`), the actor replaced at the "
              "learner's next check; before db662d6 the error waited in the actor for the learner's next call "
              "(8.0 s and over 30 s in 2 of 19 strangers, bench/results/2026-12-07_ray_soak)",
              "tests/rulka/collection/test_ray_collection.py::"
              "test_an_actor_whose_race_cannot_start_is_named_at_once_while_the_learners_thread_is_busy"),
)

#: Soak printouts (bench/trackmania_soak.py --out bench/results/trackmania_soak*.md), shown at the end of
#: the document when present.
SOAK_PRINTOUTS = "bench/results/trackmania_soak*.md"


@dataclass
class Row:
    """The results of one test function over its parametrized cases."""

    module: str
    name: str
    doc: str
    cases: list[str] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    tries: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


class Collector:
    """A pytest plugin that keeps each reliability test's docstring, cases, tries and outcome."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], Row] = {}
        self.items: dict[str, tuple[str, str, str, str]] = {}
        self.exit_status = 0

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            function = getattr(item, "function", None)
            doc = " ".join((getattr(function, "__doc__", None) or "(no docstring)").split())
            callspec = getattr(item, "callspec", None)
            module = item.nodeid.split("::")[0]
            name = getattr(item, "originalname", item.name)
            self.items[item.nodeid] = (module, name, doc, callspec.id if callspec else "")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid not in self.items:
            return
        if report.when != "call" and not (report.failed or report.skipped):
            return
        module, name, doc, case = self.items[report.nodeid]
        row = self.rows.setdefault((module, name), Row(module, name, doc))
        outcome = "skipped" if report.skipped else "failed" if report.failed else "passed"
        row.outcomes[outcome] += 1
        if case:
            row.cases.append(case)
        tries = [int(v) for k, v in report.user_properties if k == "tries"]
        row.tries += sum(tries) if tries else (0 if report.skipped else 1)
        row.seconds += report.duration
        if report.failed:
            row.failures.append(f"{case or name} ({report.when}): {_first_line(report.longreprtext)}")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.exit_status = int(exitstatus)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("E ")]
    return (lines[0][1:].strip() if lines else text.strip().splitlines()[-1] if text.strip() else "")[:200]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _result(row: Row) -> str:
    parts = [f"{n} {k}" for k, n in sorted(row.outcomes.items(), key=lambda kv: ("passed", "failed", "skipped").index(kv[0]))]
    return ", ".join(parts)


def render(rows: list[Row], extra_args: list[str]) -> str:
    """The markdown document for ``rows``."""
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = " (with uncommitted changes)" if _git("status", "--porcelain", "--untracked-files=no") else ""
    totals: dict[str, int] = defaultdict(int)
    for row in rows:
        for k, n in row.outcomes.items():
            totals[k] += n
    n_cases = sum(totals.values())
    n_tries = sum(r.tries for r in rows)
    command = COMMAND + (" -- " + " ".join(extra_args) if extra_args else "")
    lines = [
        "# Reliability: faults and bad input tried by the test suite",
        "",
        f"Written by `{command}` on {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC at commit "
        f"`{commit}`{dirty} (Python {platform.python_version()}, {platform.system()}). Do not edit by hand: "
        "run the command again.",
        "",
        "Every test marked `reliability` does something harmful to the program on purpose (a damaged "
        "file, a full disk, an out-of-range parameter, NaN data, a killed process) and checks what must "
        "happen. Each row is one test function: its docstring says what is tried and what must happen; "
        "*cases* are its parametrized variants; *tries* counts the attempts (1 per case unless the test "
        "records more, e.g. repeated kill-and-resume cycles); *result* is pytest's outcome per case.",
        "",
        f"**Totals: {len(rows)} tests, {n_cases} cases, {n_tries} tries: {totals['passed']} passed, "
        f"{totals['failed']} failed, {totals['skipped']} skipped.**",
        "",
    ]
    lines += _game_faults(rows)
    by_module: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_module[row.module].append(row)
    for module in sorted(by_module):
        lines += [f"## `{module}`", "", "| What is tried, and what must happen | Cases | Tries | Result |",
                  "|---|---|---:|---|"]
        for row in by_module[module]:
            cases = ", ".join(f"`{c}`" for c in row.cases) if row.cases else "1"
            lines.append(f"| **{row.name}**: {_cell(row.doc)} | {_cell(cases)} | {row.tries} | {_result(row)} |")
        lines.append("")
        failures = [f for row in by_module[module] for f in row.failures]
        if failures:
            lines += ["Failures:", ""] + [f"- {_cell(f)}" for f in failures] + [""]
    lines += _soak()
    return "\n".join(lines)


def _game_faults(rows: list[Row]) -> list[str]:
    """The table of :data:`GAME_FAULTS`, each with its test's result in this run."""
    by_id = {f"{r.module}::{r.name}": r for r in rows}
    lines = ["## Faults of games and collectors (stand-in games)", "",
             "Each fault is injected into a training run with stand-in games (our plugin `rulka_link.as` in the "
             "AngelScript test host, launched by `launch.sh` as a user's Wine script is) and collector processes. "
             "Every such test also checks that the run goes on (or stops with the fix, for a stranger's port), "
             "that no race is counted twice and that no process of the run is left (by pid). The hang between "
             "races is put to the game manager against the fake game server, where it can be made to land "
             "between two races every time.", "",
             "| Fault | How it is detected | What happens | Test | Result |", "|---|---|---|---|---|"]
    for f in GAME_FAULTS:
        row = by_id.get(f.test)
        result = _result(row) if row is not None else "not run"
        lines.append(f"| {_cell(f.fault)} | {_cell(f.detected)} | {_cell(f.handled)} | "
                     f"`{f.test.split('::')[1]}` | {result} |")
    return lines + [""]


def _soak() -> list[str]:
    """The soaks' printouts, if any were kept (this script does not run them: a soak takes an hour)."""
    paths = sorted(ROOT.glob(SOAK_PRINTOUTS))
    if not paths:
        return []
    lines = ["## Soak: faults on a schedule", "",
             "Not run by this script: the printouts of `bench/trackmania_soak.py` kept in "
             f"`{SOAK_PRINTOUTS}` (each starts with its command, date, commit and machine). A fault's *detected "
             "after* is the time from injection to the first line of the run's log that shows it handled (a race "
             "discarded or a game relaunched on its port, the collector's death, every process of a killed learner "
             "gone, the stranger named); *races lost* counts `race discarded` lines on the fault's port until the "
             "next fault, plus the race in flight of a killed collector, one race per game for a killed learner "
             "and for the games of a lost Ray node. *No stored action outside a kept race* is checked from "
             "`races.csv`: between two lines of one incarnation `env_steps` grows by exactly the later race's "
             "`stored_actions`.", ""]
    for path in paths:
        text = path.read_text(encoding="utf-8").rstrip().splitlines()
        lines += [f"### `{path.relative_to(ROOT)}`", ""]
        lines += [line if line.startswith("|") or not line.strip() else f"- {line}" for line in text] + [""]
    return lines


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "reliability.md"), help="markdown file to write")
    args = parser.parse_args(own)
    os.chdir(ROOT)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    collector = Collector()
    paths_given = any(Path(a.split("::")[0]).exists() for a in extra if not a.startswith("-"))
    pytest.main(["-m", MARKER, "-q", "-p", "no:cacheprovider", *extra, *([] if paths_given else ["tests"])],
                plugins=[collector])
    rows = sorted(collector.rows.values(), key=lambda r: (r.module, r.name))
    if not rows:
        print("reliability_report: no test marked 'reliability' ran; nothing written", file=sys.stderr)
        return collector.exit_status or 5
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(rows, extra) + "\n", encoding="utf-8")
    print(f"reliability_report: wrote {out} ({len(rows)} tests)")
    return collector.exit_status


if __name__ == "__main__":
    sys.exit(main())
