"""requirements.txt pins exactly the packages the app's code imports (lloom*.py, weave/,
backends/, lazy imports included), each at one version; what those packages need in turn
is theirs to require, so it is not pinned beside them."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==[^\s;#]+")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> set[str]:
    """The distributions requirements.txt names; each must be pinned to one version."""
    named = set()
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            pinned = PIN.match(line)
            assert pinned, f"not pinned to one version: {line}"
            named.add(canonical(pinned.group(1)))
    return named


def imported() -> dict[str, set[str]]:
    """Each top-level module of another package the app imports, with the files that do."""
    ours = {p.stem for p in ROOT.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    files = sorted(ROOT.glob("lloom*.py"))
    for package in ("page", "weave", "backends"):
        files += sorted((ROOT / package).rglob("*.py"))
    found: dict[str, set[str]] = {}
    for file in files:
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in ours and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(str(file.relative_to(ROOT)))
    return found


def test_every_package_the_app_imports_is_pinned_and_nothing_else():
    owners = packages_distributions()
    modules = imported()
    distributions = {m: {canonical(d) for d in owners.get(m, [])} for m in modules}
    unknown = sorted(m for m, d in distributions.items() if not d)
    assert unknown == [], f"imported but not installed: {unknown}"
    pinned = pins()
    unpinned = sorted(
        f"{m} ({', '.join(sorted(distributions[m]))}), in {', '.join(sorted(files))}"
        for m, files in modules.items()
        if not distributions[m] & pinned
    )
    assert unpinned == [], "imported, not pinned in requirements.txt:\n" + "\n".join(unpinned)
    used = set().union(*distributions.values())
    assert sorted(pinned - used) == [], "pinned, not imported by the app"
