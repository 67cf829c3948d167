"""Which loom format a file is, and reading it as a LLooM story (`read_loom_file`).

Each format is a module with `NAME`, `detect(doc)` and `read(doc)` (a `ForeignTree`);
`FORMATS` lists them by the name `--format` takes, in the order they are tried: the
formats that name themselves first, the shapes after. LLooM's own "lloom-loom" files are
`weave.loom.formats`' to read. Every problem with a file is one ValueError saying what is
wrong: too large, nested too deep, a number too large, not JSON, no format LLooM knows, or
the reader's own (a wrong type, a duplicate id, an orphan, a cycle).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from weave.finite import non_finite
from weave.interop import (
    basemode,
    exoloom,
    loomsidian,
    mikupad,
    miniloom,
    openloom,
    openloom_v1,
    socketteer,
)
from weave.interop.foreign import Imported, build
from weave.loom.formats import LOOM_FORMAT, bounded_json, read_document

LLOOM = "lloom"
FORMATS: dict[str, ModuleType] = {
    "openloom": openloom,
    "openloom-v1": openloom_v1,
    "miniloom": miniloom,
    "exoloom": exoloom,
    "basemode": basemode,
    "mikupad": mikupad,
    "loomsidian": loomsidian,
    "socketteer": socketteer,
}
CHOICES = (LLOOM, *FORMATS)  # what `--format` takes
FOREIGN_DEPTH = 512  # JSON levels: a socketteer tree ~250 nodes deep; Python's stack holds it
KNOWN = "LLooM, " + ", ".join(m.NAME for m in FORMATS.values())


def read_loom_file(data: str | bytes, format: str | None = None) -> Imported:
    """The story a loom file holds, in `format` (one of `CHOICES`; None: detected)."""
    try:
        doc = bounded_json(data, max_depth=FOREIGN_DEPTH)
    except ValueError:
        if _names_lloom(data):
            read_document(data)  # LLooM's own file: its own limits, and their message
        raise
    if format == LLOOM or (format is None and _is_lloom(doc)):
        return Imported(read_document(data), "LLooM")  # it leaves out what is not finite
    if (where := non_finite(doc)) is not None:
        raise ValueError(f"it holds a number too large for a float (at {where})")
    module = FORMATS.get(format) if format else next(
        (m for m in FORMATS.values() if m.detect(doc)), None)  # fmt: skip
    if module is None:
        unknown = f"there is no format {format!r}; one of {', '.join(CHOICES)}"
        foreign = f"it is not a LLooM file, nor another loom tool's it reads ({KNOWN})"
        raise ValueError(unknown if format else foreign)
    try:
        return build(module.read(doc))
    except (KeyError, TypeError, AttributeError, IndexError) as e:
        raise ValueError(f"a {module.NAME} file with a missing or wrong value ({e!r})") from e


def _names_lloom(data: str | bytes) -> bool:
    head = data[:256]
    return (LOOM_FORMAT if isinstance(head, str) else LOOM_FORMAT.encode()) in head


def _is_lloom(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("format") == LOOM_FORMAT
