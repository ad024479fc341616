"""The guides' code runs: every block of docs/*.md (except the generated pages and the reference pages
that are not guides) is run by tests/docs/guide_runner.py, each guide in its own process, with tiny budgets:
600 environment steps per ``rulka -p`` command, learning from the 300th (so updates happen too), one torch
thread (the machine is shared)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from guide_runner import COMMAND, EXCERPT_TAG, FILE_TAG, blocks  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GENERATED = {"configuration.md", "reliability.md", "architecture.md"}
#: Pages moved out of the README, whose blocks were never run: measurements (commands of minutes, printed
#: outputs) and set-ups that need the game, a stand-in game or a Ray cluster.
REFERENCE = {"benchmarks.md", "collection.md", "real_game.md", "ray.md", "trackmania.md"}
GUIDES = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name not in GENERATED | REFERENCE)
TINY = ["--max-steps", "600", "-cp", "memory.memory_size_schedule=[[0, [5000, 300]]]",
        "-cp", "performance.torch_num_threads=1"]


def test_the_extension_guides_are_all_here():
    """The guides README.md links to exist (a renamed guide would silently drop out of the tests)."""
    assert {"writing_presets.md", "new_agent.md", "new_memory.md", "tensorboard.md"} <= set(GUIDES)


@pytest.mark.parametrize("guide", GUIDES)
def test_guide_runs_something_and_says_how_to_run_it_in_full(guide):
    """Each guide has code the runner executes (a script or a ``rulka -p`` command): a guide whose
    blocks were all skipped would pass its run test without running anything."""
    found = blocks((ROOT / "docs" / guide).read_text(encoding="utf-8"))
    scripts = [c for lang, c in found if lang == "python" and not FILE_TAG.match(c) and not EXCERPT_TAG.match(c)]
    commands = [line for lang, c in found if lang == "sh" for line in c.splitlines() if COMMAND.match(line)]
    assert scripts or commands, f"{guide}: no block would run"
    assert commands, f"{guide}: give the command that runs the full version (a ```sh block with rulka -p ...)"


#: Guides whose commands need an optional extra: the module that must import, and how to install it.
NEEDS = {"sweeps.md": ("ray.tune", "pip install 'rulka[ray]'")}


@pytest.mark.parametrize("guide", GUIDES)
def test_guide_code_runs(guide, tmp_path):
    """Every script, file, ``rulka -p`` and ``rulka tune`` command of the guide runs without an error."""
    if guide in NEEDS:
        module, install = NEEDS[guide]
        pytest.importorskip(module, reason=f"{guide} needs {module}, which is not installed: {install} runs it")
    result = subprocess.run([sys.executable, str(ROOT / "tests" / "docs" / "guide_runner.py"),
                             str(ROOT / "docs" / guide), str(tmp_path), *TINY],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, f"{guide}:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"


@pytest.mark.parametrize("guide", GUIDES)
def test_excerpts_are_the_shipped_code(guide):
    """A ``# excerpt: PATH`` block appears verbatim in PATH, so a guide cannot drift from the code it explains."""
    for language, code in blocks((ROOT / "docs" / guide).read_text(encoding="utf-8")):
        tag = EXCERPT_TAG.match(code)
        if language != "python" or not tag:
            continue
        body = code.split("\n", 1)[1]
        source = (ROOT / tag.group(1)).read_text(encoding="utf-8")
        assert body in source, f"{guide}: the excerpt of {tag.group(1)} differs from the file:\n{body}"
