"""One trial of ``rulka tune``: an ordinary ``rulka`` run that also writes each evaluation to a file.

    python -m rulka.tune_trial PROGRESS.jsonl RULKA_ARGS...

runs ``rulka RULKA_ARGS`` (``-p PRESET ...`` or ``--resume RUN_DIR``) and appends one JSON line per
evaluation to PROGRESS.jsonl: ``{"env_steps", "last_evaluation", "best_evaluation", "wall_time_s"}``
(``null`` where there is none yet, e.g. no finished greedy race). The trial's Tune function
(:func:`rulka.tune.run_trial`) reads it and reports to Tune. Ray normally ends this process with the
trial's worker; should the run outlive its parent, it stops as after Ctrl-C (final checkpoint).
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Sequence

#: Seconds between two looks at whether the parent process is still there.
PARENT_POLL_S = 1.0


def reporter(path: Path):
    """A :data:`rulka.cli.RUN_HOOKS` hook: each evaluation as one JSON line in ``path``; stop with the parent."""
    parent = os.getppid()

    def attach(graph_manager) -> None:
        start = time.monotonic()

        def write(gm) -> None:
            line = {"env_steps": gm.agent.counters.env_steps, "last_evaluation": gm.last_evaluation,
                    "best_evaluation": gm.best_evaluation, "wall_time_s": round(time.monotonic() - start, 2)}
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")

        def watch_parent() -> None:
            while not graph_manager.stop_requested:
                if os.getppid() != parent:
                    print("rulka tune: the sweep's trial process is gone; stopping this run", file=sys.stderr, flush=True)
                    graph_manager.stop_requested = True
                    return
                time.sleep(PARENT_POLL_S)

        graph_manager.evaluation_listeners.append(write)
        threading.Thread(target=watch_parent, daemon=True, name="rulka-tune-parent").start()

    return attach


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2:
        print("usage: python -m rulka.tune_trial PROGRESS.jsonl RULKA_ARGS...", file=sys.stderr)
        return 2
    from rulka import cli

    cli.RUN_HOOKS.append(reporter(Path(argv[0])))
    return cli.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
