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
    assert named - modules() - {"backends/__init__.py", "page/__init__.py"} == set(), "named but not there"


def imported(package: str) -> set[str]:
    """The modules that `package`'s modules import (absolute imports; ours are all so)."""
    names = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
    return names


def test_the_desk_takes_no_rule_from_the_view():
    """The desk's rules (what an accept adds among them) are its own: the view shows the
    desk's values, never the other way round."""
    from_view = {m for m in imported("weave/desk") if m.split(".")[:2] == ["weave", "view"]}
    assert from_view == set()
