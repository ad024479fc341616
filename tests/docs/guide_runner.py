"""Run the code of one guide (docs/*.md) in a scratch folder, in the order a reader would.

    python tests/docs/guide_runner.py docs/GUIDE.md SCRATCH_DIR [RULKA ARGS ...]

Fenced blocks, in order:

* a ``python`` or ``yaml`` block whose first line is ``# file: NAME`` is saved as SCRATCH_DIR/NAME
  (later blocks and commands use it);
* a ``python`` block whose first line is ``# excerpt: PATH`` quotes the repository file PATH: it is
  not run (``tests/docs/test_guides.py`` checks that it appears there verbatim);
* any other ``python`` block is run as a script, with SCRATCH_DIR as working directory and on
  ``sys.path`` (so it can import the files saved before it);
* in a ``sh`` block, each line ``rulka -p ...`` or ``rulka tune PRESET ...`` (optionally after ``NAME=value`` settings) is run by ``rulka.cli.main`` with RULKA ARGS appended
  (the test passes a tiny ``--max-steps``), runs going under SCRATCH_DIR/experiments; it must
  return 0. A line ``rulka demos record ...`` is run as written (it takes no RULKA ARGS) and must
  return 0 too. Other lines are not run.

One process runs the whole guide (torch is imported once). Exit status 0 when every block ran.
"""
from __future__ import annotations

import os
import re
import runpy
import shlex
import sys
from pathlib import Path

BLOCK = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
FILE_TAG = re.compile(r"^# file: (\S+)")
EXCERPT_TAG = re.compile(r"^# excerpt: (\S+)")
#: A command line the runner runs: ``rulka -p ...`` or ``rulka tune PRESET ...``, after optional ``NAME=value``
#: settings (ignored: the runner already has the scratch folder on ``sys.path``).
COMMAND = re.compile(r"^(?:[A-Z_]+=\S*\s+)*rulka (-p .*|tune \w.*)$")
#: A tool command the runner runs as written (recording what a later ``rulka -p`` line trains on).
TOOL_COMMAND = re.compile(r"^rulka (demos record .*)$")


def blocks(markdown: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block, in order."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(markdown)]


def run_guide(guide: Path, scratch: Path, rulka_args: list[str]) -> None:
    from rulka.cli import main

    scratch.mkdir(parents=True, exist_ok=True)
    os.chdir(scratch)
    sys.path.insert(0, str(scratch))
    for number, (language, code) in enumerate(blocks(guide.read_text(encoding="utf-8")), start=1):
        first = code.splitlines()[0] if code.strip() else ""
        where = f"{guide.name}, block {number} ({language})"
        if (tag := FILE_TAG.match(first)) and language in ("python", "yaml"):
            (scratch / tag.group(1)).write_text(code, encoding="utf-8")
            print(f"{where}: saved {tag.group(1)}", flush=True)
        elif language == "python" and not EXCERPT_TAG.match(first):
            script = scratch / f"block_{number}.py"
            script.write_text(code, encoding="utf-8")
            print(f"{where}: running", flush=True)
            runpy.run_path(str(script), run_name="__main__")
        elif language == "sh":
            for line in code.splitlines():
                if tool := TOOL_COMMAND.match(line):
                    print(f"{where}: {line}", flush=True)
                    if main(shlex.split(tool.group(1).split("  #")[0])) != 0:
                        raise SystemExit(f"{where}: '{line}' failed")
                    continue
                if not (command := COMMAND.match(line)):
                    continue
                args = shlex.split(command.group(1).split("  #")[0])
                print(f"{where}: {line}", flush=True)
                shown = [] if args[0] == "tune" else ["--no-progress"]  # a sweep's trials never show one
                status = main([*args, *rulka_args, "--experiments-dir", str(scratch / "experiments"),
                               "--device", "cpu", *shown])
                if status != 0:
                    raise SystemExit(f"{where}: '{line}' exited with {status}")


if __name__ == "__main__":
    run_guide(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve(), sys.argv[3:])
