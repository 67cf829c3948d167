"""docs/ARCHITECTURE.md names every module of the page, the engine and the backends, and
no module that is not there: its layout is kept true in the same commit as the code."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ARCHITECTURE.md"


def layout_paths() -> set[str]:
    """The files the layout block names, their paths rebuilt from its indentation."""
    block = DOC.read_text().split("## Layout", 1)[1].split("```")[1]
    folders: list[str] = []
    paths = set()
    for line in block.splitlines():
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip())) // 2
        name = line.split()[0]
        del folders[depth:]
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
        else:
            paths.add("/".join([*folders, name]))
    return paths


def modules() -> set[str]:
    found = {p.name for p in ROOT.glob("lloom*.py")}
    for package in ("page", "weave", "backends"):
        found |= {str(p.relative_to(ROOT)) for p in (ROOT / package).rglob("*.py")}
    return {p for p in found if not p.endswith("__init__.py")}


def test_the_layout_names_every_module_and_only_those():
    named = {p for p in layout_paths() if p.endswith(".py")}
    assert modules() - named == set(), "modules missing from docs/ARCHITECTURE.md"
    packages = {"backends/__init__.py", "page/__init__.py"}
    assert named - modules() - packages == set(), "named but not there"


# -- the import graph: which part of weave may import which ----------------------------------
LAYERS = ("loom", "story", "search", "view", "desk")  # each imports only those before it
BASE = {"bounds", "finite", "hosts", "keys", "lru", "redaction"}  # import nothing of LLooM
TOP = {"__main__", "access", "backend_settings", "cli", "config", "loom_cli"}  # above every package
# The one import of a top module from below: `python -m backends.embedded` reads the
# configured cache folder (`backends.embedded.main`, inside the function).
UPWARD = {("backends", "config")}


def part(module: str) -> str | None:
    """The part of the engine a module belongs to: a weave package ("loom"), a weave
    top-level module ("cli"), "backends", or None (not LLooM's)."""
    names = module.split(".")
    if names[0] == "backends":
        return "backends"
    if names[0] != "weave" or len(names) == 1:
        return None
    return names[1]


def imported(tree: ast.Module) -> set[str]:
    """Every module `tree` imports, inside functions too, less those only a type checker
    reads (`if TYPE_CHECKING:` runs nothing); `from a import b` counts `a.b` too, which
    may be a module."""
    skipped = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING")
        for n in ast.walk(block)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def import_graph() -> dict[str, set[str]]:
    """Which parts each part of weave and backends imports (itself left out)."""
    graph: dict[str, set[str]] = {}
    for package in ("weave", "backends"):
        for path in (ROOT / package).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            source = part(module)
            if source is None:
                continue
            parts = {part(m) for m in imported(ast.parse(path.read_text()))}
            graph.setdefault(source, set()).update(parts - {source, None})
    return graph


def test_the_packages_import_only_the_layers_below_them():
    graph = import_graph()
    packages = {p.name for p in (ROOT / "weave").iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in (ROOT / "weave").glob("*.py")} - {"__init__"}
    assert packages == {*LAYERS, "interop"}, "a new package needs its place here"
    assert modules == BASE | TOP, "a new top-level module needs its place here"
    for name in BASE:
        assert graph.get(name, set()) == set(), f"weave.{name} imports {graph[name]}"
    below = BASE | {"backends"}
    for i, name in enumerate(LAYERS):
        allowed = below | set(LAYERS[:i]) | ({"interop"} if name == "desk" else set())
        assert graph[name] <= allowed, f"weave.{name} imports {graph[name] - allowed}"
    assert graph["interop"] <= below | {"loom", "story"}, graph["interop"]
    users = {name for name, parts in graph.items() if "interop" in parts}
    assert users <= TOP | {"desk"}, f"{users - TOP - {'desk'}} import weave.interop"
    assert {("backends", p) for p in graph["backends"]} <= {("backends", b) for b in BASE} | UPWARD
    upward = {(s, t) for s, parts in graph.items() for t in parts if t in TOP and s not in TOP}
    assert upward == UPWARD, "only the top imports the top"


def test_no_two_parts_import_each_other_even_through_others():
    graph = {s: parts for s, parts in import_graph().items() if s not in TOP}
    graph = {s: {t for t in parts if t not in TOP} for s, parts in graph.items()}

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for t in graph.get(todo.pop(), ()):
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return seen

    cycles = sorted(name for name in graph if name in reach(name))
    assert cycles == [], f"in a cycle: {cycles}"


def test_the_desk_takes_no_rule_from_the_view():
    """The desk's rules (what an accept adds among them) are its own: the view shows the
    desk's values, never the other way round."""
    assert "view" not in import_graph()["desk"]
