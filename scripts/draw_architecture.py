"""Draw the house from the code: docs/architecture.md's two Mermaid diagrams, between their markers.

    python scripts/draw_architecture.py            # rewrite the diagrams in docs/architecture.md
    python scripts/draw_architecture.py --check    # exit 1 when docs/architecture.md is stale

1. **Rooms**: every folder of the repository that holds Python modules (tests, hidden folders and
   virtual environments left out), nested as on disk, with an arrow from one room to another when a
   module of the first imports a module of the second (any ``import``, also inside a function).
   An arrow that carries an import cycle (modules that import each other, possibly through others)
   is drawn red and dashed; every such circle of modules is listed below the picture.
2. **One action**: its way from the environment to the learner and back, each step named by the
   function or method that does it (``FLOW`` below). The file of each step is looked up in the code:
   a name the code no longer defines stops the script with its name, so the picture cannot go stale.

Everything but the names of ``FLOW`` comes from the tree: nothing here names a file. The standard
library only.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = Path("docs") / "architecture.md"
#: Top-level folders that are not rooms of the house: the tests mirror it, the others are not code.
NOT_ROOMS = {"tests", "build", "dist", "experiments", "node_modules"}
RED = "stroke:#d62728,stroke-width:2px,stroke-dasharray:6 4"


# ---------------------------------------------------------------------------------------------- rooms
@dataclass
class Room:
    """A folder holding Python modules: its path relative to the root ("" for the root itself)."""

    path: str
    modules: list[str] = field(default_factory=list)  # dotted names

    @property
    def node(self) -> str:
        return "r_" + (re.sub(r"\W", "_", self.path) or "root")

    @property
    def label(self) -> str:
        return f"{self.path or '.'}/"


def python_files(root: Path) -> list[Path]:
    """The repository's Python files, sorted; tests, hidden folders, caches and virtual environments left out."""
    found = []

    def walk(folder: Path, top: bool) -> None:
        if (folder / "pyvenv.cfg").exists():
            return
        for entry in sorted(folder.iterdir()):
            if entry.is_dir():
                if entry.name.startswith((".", "__")) or entry.name.endswith(".egg-info"):
                    continue
                if top and entry.name in NOT_ROOMS:
                    continue
                walk(entry, False)
            elif entry.suffix == ".py":
                found.append(entry)

    walk(root, True)
    return found


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_names(tree: ast.AST, package: str) -> list[str]:
    """The dotted name of what each import statement of ``tree`` takes (``from a import b``: ``a.b``, which
    :func:`resolve` turns into module ``a.b`` when there is one, else into module ``a``, whose name ``b`` is)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".") if package else []
                parent = parent[:len(parent) - (node.level - 1)] if node.level > 1 else parent
                base = ".".join([*parent, base] if base else parent)
            names += [f"{base}.{alias.name}" if base else alias.name for alias in node.names]
    return [n for n in names if n]


def resolve(name: str, modules: dict[str, Path], beside: str) -> str | None:
    """The project module ``name`` comes from: the longest known prefix of it, else, for a script in
    folder ``beside`` (not a package), its neighbour of that name; None for a module from elsewhere."""
    for parts, shortest in ((name.split("."), 1), ([*beside.split("."), *name.split(".")], beside.count(".") + 2)):
        if parts[0] == "":
            continue  # no script folder
        for end in range(len(parts), shortest - 1, -1):
            prefix = ".".join(parts[:end])
            if prefix in modules:
                return prefix
    return None


@dataclass
class House:
    rooms: dict[str, Room]
    arrows: set[tuple[str, str]]  # (room path, room path)
    circles: list[list[str]]  # modules of each import cycle, sorted
    cycle_arrows: set[tuple[str, str]]  # the arrows that carry an import of a cycle


def survey(root: Path) -> House:
    """Rooms, the arrows between them and the circles, read from the code under ``root``."""
    files = python_files(root)
    modules = {module_name(f, root): f for f in files}
    rooms: dict[str, Room] = {}
    room_of: dict[str, str] = {}
    for name, path in modules.items():
        folder = path.parent.relative_to(root).as_posix()
        folder = "" if folder == "." else folder
        rooms.setdefault(folder, Room(folder)).modules.append(name)
        room_of[name] = folder
    imports: set[tuple[str, str]] = set()
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        # A script's folder is on sys.path when it runs (bench/ imports its neighbours so); a package's is not.
        is_script = not (path.parent / "__init__.py").exists()
        beside = path.parent.relative_to(root).as_posix().replace("/", ".").strip(".") if is_script else ""
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        except SyntaxError as error:
            raise SystemExit(f"{path}: cannot parse it ({error}); fix it and run again") from None
        for imported in imported_names(tree, package):
            target = resolve(imported, modules, beside)
            if target is not None and target != name:
                imports.add((name, target))
    arrows = {(room_of[a], room_of[b]) for a, b in imports if room_of[a] != room_of[b]}
    cycles = circles(set(modules), imports)
    cycle_of = {module: number for number, cycle in enumerate(cycles) for module in cycle}
    cycle_arrows = {(room_of[a], room_of[b]) for a, b in imports
                    if room_of[a] != room_of[b] and a in cycle_of and cycle_of[a] == cycle_of.get(b)}
    return House(rooms, arrows, cycles, cycle_arrows)


def circles(nodes: set[str], arrows: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected groups of more than one node (Tarjan's algorithm), each sorted, in order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    out = {n: sorted(b for a, b in arrows if a == n) for n in nodes}

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in out[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return sorted(found)


def rooms_diagram(house: House) -> str:
    """Mermaid: rooms nested as their folders, arrows between them, arrows of a circle red and dashed."""
    lines = ["```mermaid", "flowchart TB"]
    paths = sorted(house.rooms)

    def children(parent: str) -> list[str]:
        """Rooms right below ``parent`` (a room, or a folder on the way to one, as a subgraph)."""
        below = set()
        for p in paths:
            if p == parent or (parent and not p.startswith(parent + "/")):
                continue
            rest = p[len(parent) + 1:] if parent else p
            below.add(f"{parent}/{rest.split('/')[0]}" if parent else rest.split("/")[0])
        return sorted(below)

    def draw(path: str, depth: int) -> None:
        pad = "    " * depth
        inner = children(path)
        room = house.rooms.get(path)
        if not inner:
            lines.append(f'{pad}{room.node}["{room.label}<br/>{len(room.modules)} modules"]')
            return
        lines.append(f'{pad}subgraph s_{re.sub(r"[^A-Za-z0-9_]", "_", path)} ["{path}/"]')
        if room is not None:
            lines.append(f'{pad}    {room.node}["{room.label}<br/>{len(room.modules)} modules"]')
        for child in inner:
            draw(child, depth + 1)
        lines.append(f"{pad}end")

    for top in children(""):
        draw(top, 1)
    if "" in house.rooms:
        root = house.rooms[""]
        lines.append(f'    {root.node}["./ (top level)<br/>{len(root.modules)} modules"]')
    red = []
    for number, (a, b) in enumerate(sorted(house.arrows)):
        lines.append(f"    {house.rooms[a].node} --> {house.rooms[b].node}")
        if (a, b) in house.cycle_arrows:
            red.append(str(number))
    if red:
        lines.append(f"    linkStyle {','.join(red)} {RED}")
    lines.append("```")
    lines.append("")
    if house.circles:
        lines.append("Import cycles (modules that import each other, possibly through others; an arrow that "
                     "carries one is red and dashed):")
        lines.append("")
        for circle in house.circles:
            lines.append("- " + ", ".join(f"`{m}`" for m in circle))
    else:
        lines.append("No import cycles: no module imports, directly or through others, a module that imports it.")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- one action
@dataclass(frozen=True)
class Step:
    """One step of an action's way: the code that does it (``Class.method`` or ``function``) and what it does."""

    lane: str
    name: str
    does: str


LANES = {
    "collector": "a collector process (the same Collector runs in the learner's process or a Ray actor)",
    "env": "the environment (one of the collector's)",
    "learner": "the learner",
}
FLOW = [
    Step("collector", "Collector.step", "one action in every environment of the collector"),
    Step("collector", "build_collector", "before acting: the learner's counters, newer weights (load_into)"),
    Step("collector", "Agent.act", "one forward pass for all environments: q_values, then the exploration policy"),
    Step("collector", "ExplorationPolicy.select", "an action per environment (greedy or exploring)"),
    Step("collector", "LevelManager.apply", "the action through the output filter, the answer through the input filter"),
    Step("env", "OutputFilter.filter", "the agent's action as the environment's"),
    Step("env", "TrackManiaEnv.step", "inputs to the backend; observation, reward, terminated, truncated"),
    Step("env", "TrackManiaBackend.step", "the car: the simulator (SimBackend) or the game (TMIBackend)"),
    Step("env", "InputFilter.filter_observation", "the observation as the agent's networks take it"),
    Step("collector", "Collector._flush", "a finished episode or chunk as a Rollout, sent to the learner"),
    Step("learner", "BasicRLGraphManager.improve", "the one training loop: poll the collectors, store, train, publish"),
    Step("learner", "ProcessCollection.poll", "the Rollouts that arrived (RayCollection.poll for actors)"),
    Step("learner", "store_rollout", "each transition of a Rollout to the agent"),
    Step("learner", "Agent.observe", "one transition into the replay memory"),
    Step("learner", "Replay.add", "stored once in the StepStorage ring buffer"),
    Step("learner", "BasicRLGraphManager.train_and_log", "as many updates as the replay-ratio gate allows, one at a time"),
    Step("learner", "Replay.sample", "a TransitionBatch: sampler picks slots, assembler builds returns"),
    Step("learner", "Agent.learn_from_batch", "compute_loss, one optimizer step, priorities updated"),
    Step("learner", "BasicRLGraphManager.publish_policy", "every send_shared_network_every_n_batches updates"),
    Step("learner", "SharedPolicy.publish", "the online network's weights into shared memory (ray.put for actors)"),
    Step("collector", "SharedPolicy.load_into", "the collector's inference network takes the new weights"),
]
#: Arrows of the flow: (from, to, what travels). Steps are named as in FLOW.
FLOW_ARROWS = [
    ("Collector.step", "build_collector", ""),
    ("build_collector", "Agent.act", "observations (E, ...)"),
    ("Agent.act", "ExplorationPolicy.select", "Q values (E, A)"),
    ("ExplorationPolicy.select", "LevelManager.apply", "ActionInfo"),
    ("LevelManager.apply", "OutputFilter.filter", "action"),
    ("OutputFilter.filter", "TrackManiaEnv.step", ""),
    ("TrackManiaEnv.step", "TrackManiaBackend.step", "InputState"),
    ("TrackManiaBackend.step", "TrackManiaEnv.step", "CarState, frame"),
    ("TrackManiaEnv.step", "InputFilter.filter_observation", "observation"),
    ("InputFilter.filter_observation", "Collector._flush", "StepResult"),
    ("Collector._flush", "ProcessCollection.poll", "Rollout"),
    ("BasicRLGraphManager.improve", "ProcessCollection.poll", ""),
    ("ProcessCollection.poll", "store_rollout", "Rollout"),
    ("store_rollout", "Agent.observe", "transition"),
    ("Agent.observe", "Replay.add", ""),
    ("BasicRLGraphManager.improve", "BasicRLGraphManager.train_and_log", ""),
    ("BasicRLGraphManager.train_and_log", "Replay.sample", ""),
    ("Replay.sample", "Agent.learn_from_batch", "TransitionBatch"),
    ("Agent.learn_from_batch", "BasicRLGraphManager.publish_policy", "gradient updates"),
    ("BasicRLGraphManager.publish_policy", "SharedPolicy.publish", "state_dict"),
    ("SharedPolicy.publish", "SharedPolicy.load_into", "weights"),
    ("SharedPolicy.load_into", "Agent.act", "the next action"),
]


def definitions(root: Path) -> dict[str, list[str]]:
    """``Class.method``, ``Class`` and top-level ``function`` names -> the files (relative) that define them."""
    found: dict[str, list[str]] = {}
    for path in python_files(root):
        relative = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.setdefault(node.name, []).append(relative)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        found.setdefault(f"{node.name}.{item.name}", []).append(relative)
    return found


def where(name: str, defined: dict[str, list[str]]) -> str:
    files = defined.get(name)
    if not files:
        raise SystemExit(f"the data flow names {name}, which the code no longer defines: update FLOW and "
                         f"FLOW_ARROWS in scripts/draw_architecture.py to the code's new name for that step")
    return ", ".join(sorted(set(files)))


def flow_diagram(root: Path) -> str:
    """Mermaid: one action's way, each step with the file that defines it, grouped by where it runs."""
    defined = definitions(root)
    for source, target, _ in FLOW_ARROWS:
        for name in (source, target):
            if name not in {s.name for s in FLOW}:
                raise SystemExit(f"FLOW_ARROWS names {name}, which is not a step of FLOW")
    node = {step.name: f"f{number}" for number, step in enumerate(FLOW)}
    lines = ["```mermaid", "flowchart TB"]
    for lane, title in LANES.items():
        lines.append(f'    subgraph {lane} ["{title}"]')
        for step in FLOW:
            if step.lane == lane:
                lines.append(f'        {node[step.name]}["<b>{step.name}</b><br/>{where(step.name, defined)}'
                             f'<br/><i>{step.does}</i>"]')
        lines.append("    end")
    for source, target, what in FLOW_ARROWS:
        label = f'|"{what}"|' if what else ""
        lines.append(f"    {node[source]} -->{label} {node[target]}")
    lines.append("```")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------- page
def render(page_text: str, root: Path) -> str:
    """``page_text`` with the text between each ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` redrawn."""
    drawn = {"rooms": rooms_diagram(survey(root)), "flow": flow_diagram(root)}
    for name, body in drawn.items():
        begin, end = f"<!-- {name}:begin (scripts/draw_architecture.py) -->", f"<!-- {name}:end -->"
        if begin not in page_text or end not in page_text:
            raise SystemExit(f"{PAGE} lacks the markers {begin} ... {end}: put them back where the "
                             f"{name} diagram goes")
        head, rest = page_text.split(begin, 1)
        _, tail = rest.split(end, 1)
        page_text = f"{head}{begin}\n{body}\n{end}{tail}"
    return page_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="do not write: exit 1 when the page is stale")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this script's)")
    args = parser.parse_args(argv)
    page = args.root / PAGE
    current = page.read_text(encoding="utf-8")
    fresh = render(current, args.root)
    if args.check:
        if fresh != current:
            sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), fresh.splitlines(True),
                                                       str(PAGE), "drawn now"))
            print(f"{PAGE} is stale: run python scripts/draw_architecture.py")
            return 1
        print(f"{PAGE} is up to date")
        return 0
    if fresh != current:
        page.write_text(fresh, encoding="utf-8")
    print(f"wrote {PAGE}" if fresh != current else f"{PAGE} was up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
