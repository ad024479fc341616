"""scripts/draw_architecture.py: docs/architecture.md's pictures are drawn from the code, stay true to it
(this test fails when the page is stale), come from the tree alone and need only the standard library."""
from __future__ import annotations

import ast
import difflib
import sys
from pathlib import Path

import pytest

from tests.scripts_as_modules import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "draw_architecture.py"


@pytest.fixture
def draw():
    yield load_script(SCRIPT)
    sys.modules.pop("draw_architecture", None)


def test_architecture_page_is_up_to_date(draw, tmp_path):
    """The page equals what the script draws now (drawn into a temporary copy, not over the page)."""
    page = ROOT / "docs" / "architecture.md"
    current = page.read_text(encoding="utf-8")
    fresh = tmp_path / "architecture.md"
    fresh.write_text(draw.render(current, ROOT), encoding="utf-8")
    drawn = fresh.read_text(encoding="utf-8")
    diff = "".join(difflib.unified_diff(current.splitlines(True), drawn.splitlines(True), "docs/architecture.md",
                                        "drawn now"))
    assert drawn == current, f"docs/architecture.md is stale: run python scripts/draw_architecture.py\n{diff}"


def test_the_script_needs_only_the_standard_library():
    """Every import of the script is of the standard library, so it runs before anything is installed."""
    tree = ast.parse(SCRIPT.read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def _tree(root: Path) -> None:
    """alpha/ and beta/ (beta/sub/ inside it) in an import cycle through a lazy import; tools/ scripts that
    import a neighbour; tests/ and a virtual environment that are no rooms."""
    files = {
        "alpha/__init__.py": "",
        "alpha/x.py": "import os\nfrom beta.y import Y\n",
        "beta/__init__.py": "",
        "beta/y.py": "def f():\n    from beta.sub import z\n\nclass Y:\n    pass\n",
        "beta/sub/__init__.py": "",
        "beta/sub/z.py": "from alpha import x\n",
        "gamma/__init__.py": "from .w import W\n",
        "gamma/w.py": "from __future__ import annotations\nimport alpha\nW = 1\n",
        "tools/run.py": "import helper\nimport numpy\nfrom gamma import W\n",
        "tools/helper.py": "import json\n",
        "tests/test_alpha.py": "import tools.run\nimport gamma\n",
        ".venv/pyvenv.cfg": "",
        ".venv/lib/site.py": "import alpha\n",
        "venv2/pyvenv.cfg": "",
        "venv2/mod.py": "import beta\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_rooms_arrows_and_cycles_come_from_the_tree(draw, tmp_path):
    """Rooms are the folders with modules (tests and virtual environments left out), arrows the imports
    between them (lazy, relative and a script's neighbour imports included), red the ones of a cycle."""
    _tree(tmp_path)
    house = draw.survey(tmp_path)
    assert set(house.rooms) == {"alpha", "beta", "beta/sub", "gamma", "tools"}
    assert house.arrows == {("alpha", "beta"), ("beta", "beta/sub"), ("beta/sub", "alpha"), ("gamma", "alpha"),
                            ("tools", "gamma")}
    assert house.circles == [["alpha.x", "beta.sub.z", "beta.y"]]
    assert house.cycle_arrows == {("alpha", "beta"), ("beta", "beta/sub"), ("beta/sub", "alpha")}
    picture = draw.rooms_diagram(house)
    assert 'subgraph s_beta ["beta/"]' in picture and 'r_beta_sub["beta/sub/<br/>2 modules"]' in picture
    arrows = [line.strip() for line in picture.splitlines() if "-->" in line]
    assert arrows == ["r_alpha --> r_beta", "r_beta --> r_beta_sub", "r_beta_sub --> r_alpha", "r_gamma --> r_alpha",
                      "r_tools --> r_gamma"]
    assert "linkStyle 0,1,2 " in picture
    assert "- `alpha.x`, `beta.sub.z`, `beta.y`" in picture


def test_a_flow_step_the_code_no_longer_defines_stops_the_script(draw, tmp_path):
    """The data flow's names are looked up in the code: a renamed step stops the script and names it."""
    _tree(tmp_path)
    with pytest.raises(SystemExit, match=r"names Collector\.step, which the code no longer defines"):
        draw.flow_diagram(tmp_path)


def test_check_fails_on_a_stale_page_and_passes_once_redrawn(draw, tmp_path, monkeypatch, capsys):
    """--check exits 1 (with the command that mends it) until the script has rewritten the page."""
    _tree(tmp_path)
    monkeypatch.setattr(draw, "FLOW", [draw.Step("collector", "Y", "a class of beta")])
    monkeypatch.setattr(draw, "FLOW_ARROWS", [])
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "architecture.md"
    page.write_text("# House\n\n<!-- rooms:begin (scripts/draw_architecture.py) -->\nold\n<!-- rooms:end -->\n\n"
                    "<!-- flow:begin (scripts/draw_architecture.py) -->\n<!-- flow:end -->\ntail\n")
    assert draw.main(["--root", str(tmp_path), "--check"]) == 1
    assert "is stale: run python scripts/draw_architecture.py" in capsys.readouterr().out
    assert draw.main(["--root", str(tmp_path)]) == 0
    assert draw.main(["--root", str(tmp_path), "--check"]) == 0
    text = page.read_text()
    assert text.startswith("# House\n") and text.endswith("<!-- flow:end -->\ntail\n")
    assert "r_tools --> r_gamma" in text and "<b>Y</b><br/>beta/y.py" in text
