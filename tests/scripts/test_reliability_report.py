"""scripts/reliability_report.py: the reliability document is written from pytest's own results."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.scripts_as_modules import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "reliability_report.py"


def _module():
    return load_script(SCRIPT)


def test_report_lists_each_marked_test_with_docstring_cases_and_outcome(tmp_path):
    """Run on one test file: the document names each reliability test with its docstring, its cases
    and the outcome pytest reported; unmarked tests are left out."""
    out = tmp_path / "reliability.md"
    result = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--",
                             "tests/rulka/test_checkpoints.py", "-k", "legacy or full_disk"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    text = out.read_text()
    assert "**Totals: 2 tests, 3 cases, 3 tries: 3 passed, 0 failed, 0 skipped.**" in text
    assert ("| **test_full_disk_during_write_leaves_previous_checkpoint_intact**: ENOSPC while writing the memory "
            "arrays or the payload") in text
    assert "| `array`, `payload` | 2 | 2 passed |" in text
    assert "test_round_trip" not in text


def test_failures_and_recorded_tries_are_shown():
    """A failed case is counted and quoted under its table; tries recorded by a test replace the default 1."""
    module = _module()
    row = module.Row("tests/x/test_y.py", "test_kill_and_resume", "Kill the run 20 times; it always resumes.")
    row.cases = ["a", "b"]
    row.outcomes.update({"passed": 1, "failed": 1})
    row.tries = 40
    row.failures = ["b (call): AssertionError: checkpoint unreadable"]
    text = module.render([row], [])
    assert "**Totals: 1 tests, 2 cases, 40 tries: 1 passed, 1 failed, 0 skipped.**" in text
    assert "| **test_kill_and_resume**: Kill the run 20 times; it always resumes. | `a`, `b` | 40 | 1 passed, 1 failed |" in text
    assert "- b (call): AssertionError: checkpoint unreadable" in text
