"""Reading a lorebook file: LLooM's own JSON form, SillyTavern world info, a card's book.

Three forms are read, told apart by their top-level keys:
  - LLooM's own: the steering's JSON form (`Steering.to_dict`, as the loom export writes
    it; `{"lore": [...]}` alone will do). Its lorebook entries are read strictly.
  - SillyTavern world info: `{"entries": {"0": {...}, "1": {...}}}`. Of each entry these
    fields matter (others, which SillyTavern adds release after release, are ignored):
      key, keysecondary   primary and secondary keys (lists of text);
      content             the text inserted;  comment  the entry's title (our `name`);
      disable             switched off;  constant  always inserted;
      selective, selectiveLogic   secondary keys apply only when `selective` is true
                          (its default); logic 0 AND ANY, 1 NOT ALL, 2 NOT ANY, 3 AND ALL;
      caseSensitive, matchWholeWords   true/false, or null for SillyTavern's defaults
                          (case-insensitive; whole words, as its shipped settings have it);
      order               insertion order: entries are kept sorted by it, lowest first,
                          so the highest-order entry sits nearest the story, as there.
    Not carried over: `position` and `depth` (lore always follows the memory here),
    `scanDepth` (counted in chat messages there; entries here look back
    `DEFAULT_SCAN_CHARS` characters), probability, groups, timed effects and recursion.
    A key written as "/pattern/flags" is a regular expression there and literal text here.
  - A character card's lorebook (Character Card V2/V3 `character_book`, also as a file
    of its own, as SillyTavern and character sites share them): `{"entries": [...]}`,
    or a whole card `{"spec": "chara_card_v2", "data": {"character_book": {...}}}`.
    Of each entry: keys, secondary_keys (used when `selective`, needing one of them),
    content, enabled, name (else comment), case_sensitive, constant, insertion_order
    (sorted as `order` above); the rest is ignored, as above.

Any problem (not UTF-8, not JSON, larger than MAX_LOREBOOK_BYTES, nested deeper than
MAX_NESTING, none of these forms, a field of the wrong type, a cap passed) is one `ValueError`
that names the file. This module reads; it builds no context (`weave.story.context` does).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from weave.story.steering import DEFAULT_SCAN_CHARS, MAX_ENTRIES, LoreEntry, Steering

MAX_LOREBOOK_BYTES = 8 << 20  # large SillyTavern lorebooks are a few MiB
MAX_NESTING = 20  # SillyTavern's own files nest about 5 deep
_ST_LOGIC = {0: "and_any", 1: "not_all", 2: "not_any", 3: "and_all"}


def read_lorebook(path: str | Path) -> tuple[LoreEntry, ...]:
    """The lorebook entries in the file at `path` (either form, see the module docstring).

    Raises:
        ValueError: one line naming the file and what is wrong with it.
    """
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_LOREBOOK_BYTES + 1)
    except OSError as e:
        raise ValueError(f"{path}: cannot read it: {e.strerror or e}") from e
    try:
        return parse_lorebook(data)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from e


def parse_lorebook(data: bytes) -> tuple[LoreEntry, ...]:
    """The lorebook entries in a file's bytes; `read_lorebook` names the file in errors."""
    if len(data) > MAX_LOREBOOK_BYTES:
        raise ValueError(f"larger than {MAX_LOREBOOK_BYTES >> 20} MiB: not a lorebook")
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 text (byte {e.start})") from e
    except RecursionError as e:
        raise ValueError(f"nested deeper than {MAX_NESTING} levels: not a lorebook") from e
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg}, line {e.lineno} column {e.colno})") from e
    if _depth(doc) > MAX_NESTING:
        raise ValueError(f"nested deeper than {MAX_NESTING} levels: not a lorebook")
    if isinstance(doc, dict) and isinstance(doc.get("data"), dict) and "spec" in doc:
        book = doc["data"].get("character_book")  # a whole character card
        if not isinstance(book, dict):
            raise ValueError("a character card with no character_book (lorebook) in it")
        doc = book
    if isinstance(doc, dict) and isinstance(doc.get("entries"), list):
        return _character_book(doc["entries"])
    if isinstance(doc, dict) and "entries" in doc:
        return _sillytavern(doc["entries"])
    if isinstance(doc, dict) and "lore" in doc:
        return Steering.from_dict(doc).lore
    raise ValueError(
        'neither a LLooM lorebook ({"lore": [...]}), a SillyTavern world-info file '
        '({"entries": {...}}) nor a character book ({"entries": [...]})'
    )


def _no_constant(name: str) -> None:
    raise ValueError(f"not JSON ({name} is not a JSON number)")


def _depth(value: Any) -> int:
    """How deep lists and objects nest in `value` (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth + 1)
            children = item.values() if isinstance(item, dict) else item
            if depth + 1 <= MAX_NESTING:  # deeper is already too deep
                stack.extend((child, depth + 1) for child in children)
    return deepest


# -- SillyTavern world info ---------------------------------------------------------------
def _sillytavern(entries: Any) -> tuple[LoreEntry, ...]:
    if not isinstance(entries, dict):
        raise ValueError('SillyTavern "entries" must be an object of entries by uid')
    read = ((_order(entry, uid), _st_entry(entry, uid)) for uid, entry in entries.items())
    return _in_order(len(entries), read)


def _st_entry(entry: Any, uid: str) -> LoreEntry:
    where = _an_object(entry, f"entries[{uid!r}]")
    selective = _field(entry, "selective", bool, True, where)
    logic = _field(entry, "selectiveLogic", int, 0, where)
    if logic not in _ST_LOGIC:
        raise ValueError(f"{where}.selectiveLogic must be 0, 1, 2 or 3")
    case = _field(entry, "caseSensitive", bool, None, where)
    whole = _field(entry, "matchWholeWords", bool, None, where)
    values = dict(
        keys=_key_list(entry, "key", where),
        text=_field(entry, "content", str, "", where),
        enabled=not _field(entry, "disable", bool, False, where),
        name=_field(entry, "comment", str, "", where),
        case_sensitive=bool(case),
        whole_words=True if whole is None else whole,
        scan_chars=DEFAULT_SCAN_CHARS,
        constant=_field(entry, "constant", bool, False, where),
        secondary_keys=_key_list(entry, "keysecondary", where) if selective else (),
        logic=_ST_LOGIC[logic],
    )
    return _entry(values, where)


def _an_object(entry: Any, where: str) -> str:
    """`where`, once `entry` (found there) is shown to be a JSON object."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be an object")
    return where


def _entry(values: dict[str, Any], where: str) -> LoreEntry:
    try:
        return LoreEntry(**values)
    except ValueError as e:  # a cap passed: say which entry
        raise ValueError(f"{where}: {str(e).removeprefix('steering: entry.')}") from e


def _in_order(count: int, read: Iterator[tuple[float, LoreEntry]]) -> tuple[LoreEntry, ...]:
    """The `count` entries `read` gives with their order, sorted by it (ties keep the file's
    order: the sort is stable), when they are at most `MAX_ENTRIES`."""
    if count > MAX_ENTRIES:
        raise ValueError(f"holds {count:,} entries; a lorebook holds at most {MAX_ENTRIES}")
    return tuple(entry for _, entry in sorted(read, key=lambda r: r[0]))


def _order(entry: Any, uid: str, field: str = "order") -> float:
    order = entry.get(field, 100) if isinstance(entry, dict) else 100
    if not isinstance(order, int | float) or isinstance(order, bool):
        raise ValueError(f"entries[{uid!r}].{field} must be a number")
    return order


# -- Character Card V2/V3 character_book ----------------------------------------------------
def _character_book(entries: list) -> tuple[LoreEntry, ...]:
    read = (
        (_order(entry, str(i), "insertion_order"), _card_entry(entry, i))
        for i, entry in enumerate(entries)
    )
    return _in_order(len(entries), read)


def _card_entry(entry: Any, i: int) -> LoreEntry:
    where = _an_object(entry, f"entries[{i}]")
    selective = _field(entry, "selective", bool, False, where)
    name = _field(entry, "name", str, "", where) or _field(entry, "comment", str, "", where)
    values = dict(
        keys=_key_list(entry, "keys", where),
        text=_field(entry, "content", str, "", where),
        enabled=_field(entry, "enabled", bool, True, where),
        name=name,
        case_sensitive=_field(entry, "case_sensitive", bool, False, where),
        constant=_field(entry, "constant", bool, False, where),
        secondary_keys=_key_list(entry, "secondary_keys", where) if selective else (),
    )
    return _entry(values, where)


def _field(entry: dict, key: str, kind: type, default: Any, where: str) -> Any:
    """`entry[key]` when of type `kind` (null reads as the default)."""
    value = entry.get(key)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{where}.{key} must be {_KIND_NAMES[kind]}")
    return value


_KIND_NAMES = {bool: "true or false", int: "a whole number", str: "text"}


def _key_list(entry: dict, key: str, where: str) -> tuple[str, ...]:
    keys = entry.get(key)
    if keys is None:
        return ()
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ValueError(f"{where}.{key} must be a list of text")
    return tuple(keys)
