"""Dependencies point down: the core (rulka/) and agents/ know no environment."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", ["rulka", "agents", "memories", "filters", "exploration_policies"])
def test_package_does_not_import_trackmania(package):
    """Neither the core nor the agents (nor what they build on) imports environments.trackmania."""
    offenders = {str(path.relative_to(ROOT)): sorted(n for n in _imports(path) if n.startswith("environments.trackmania"))
                 for path in (ROOT / package).rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}
