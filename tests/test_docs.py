"""Docs that cannot go stale: every `weave.*` / `backends.*` module or attribute that a
docstring or comment of the page, the engine, the backends, the benchmarks or the scripts
names, or that README.md, bench/README.md or docs/ names, resolves (a module, a module's
attribute, or a class's attribute such as `weave.desk.session.Workspace.retry`); and every
path in this repository that they name (`weave/story/data/slop.txt`, `bench/bench_page.py`,
`tests/test_*.py`) is there. A module moved or renamed without its mentions fails here."""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = ("page", "weave", "backends", "bench", "scripts")

# `weave.x.y` (`backends.`, `page.` too) not inside a longer word, path or name
# (`~/.weave.x`, `lloom.weave`).
DOTTED = re.compile(r"(?<![\w./-])(?:weave|backends|page)(?:\.[A-Za-z_]\w*)+")


def folders() -> list[str]:
    """The repository's top-level folders: a path that starts with one is a path here."""
    return sorted(
        p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
    )


def path_pattern() -> re.Pattern[str]:
    # Not after a word, a dot or a slash: `other/repo/docs/x.md` and `~/.cache/weave/x`
    # name paths elsewhere. Globs (`bench/bench_*.py`) name the files they match.
    roots = "|".join(map(re.escape, folders()))
    return re.compile(rf"(?<![\w./~-])(?:{roots})/[\w./*-]*")


def python_files() -> list[Path]:
    files = sorted(ROOT.glob("lloom*.py"))
    for folder in CODE:
        files += sorted((ROOT / folder).rglob("*.py"))
    return files


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "bench/README.md"]


def texts() -> Iterator[tuple[str, str]]:
    """(where, text) for each docstring and comment of the code, and each Markdown file."""
    for file in python_files():
        source = file.read_text()
        name = file.relative_to(ROOT)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    yield f"{name}:{getattr(node, 'lineno', 1)}", doc
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                yield f"{name}:{token.start[0]}", token.string
    for file in markdown_files():
        yield str(file.relative_to(ROOT)), file.read_text()


def resolves(dotted: str) -> bool:
    """Whether `dotted` is a module, or attributes reached from the longest module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            found = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name is not None and module.startswith(e.name):
                continue  # not a module: an attribute, or nothing
            raise  # a module that fails to import is a failure of its own
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_every_module_and_attribute_named_resolves():
    stale = sorted(
        f"{where}: {name}"
        for where, text in texts()
        for name in set(DOTTED.findall(text))
        if not resolves(name)
    )
    assert stale == [], "named but not there:\n" + "\n".join(stale)


def test_every_repository_path_named_is_there():
    pattern = path_pattern()
    missing = sorted(
        f"{where}: {path}"
        for where, text in texts()
        for path in {p.rstrip(".") for p in pattern.findall(text)}
        if not any(ROOT.glob(path))
    )
    assert missing == [], "named but not there:\n" + "\n".join(missing)


def test_the_checks_find_what_they_look_for():
    """The patterns catch a stale name and a stale path, and pass a true one of each."""
    text = "See `weave.loom_store` and weave.search.beams.expand; (weave/data/slop.txt)."
    assert DOTTED.findall(text) == ["weave.loom_store", "weave.search.beams.expand"]
    assert [resolves(n) for n in DOTTED.findall(text)] == [False, True]
    assert resolves("weave.desk.session.Workspace.retry")
    assert not resolves("backends.mlx.CPU_READ_WINDOW")
    assert path_pattern().findall(text) == ["weave/data/slop.txt"]
    assert path_pattern().findall("intrinsic-labs/aspen-grove/docs/open-loom/spec.md") == []
    assert any(ROOT.glob("bench/bench_*.py"))
