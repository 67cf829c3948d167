"""A story's steering settings: memory, the author's note and the lorebook, as values.

Steering is what a writer tells the model without writing it into the story:
  memory       text always at the top of the context (who the heroine is, the setting).
  note         the author's note: a short instruction inserted as its own line `note_depth`
               lines before the story's end, where it weighs most ("keep it dark").
  lore         lorebook entries, each inserted after the memory only while one of its keys
               appears in the story's last `scan_chars` characters.

How a key is found in the story (`LoreEntry.fires`), as SillyTavern users expect it with
SillyTavern's default settings:
  - A key is literal text: characters special in regular expressions ("Dr. (Who)?") are
    those characters. SillyTavern reads a key written as "/pattern/flags" as a regular
    expression; here it is literal text too.
  - Case does not matter unless the entry is case-sensitive (folded character by
    character by `str.lower`).
  - Whole words (the default): "Mira" fires on "Mira," and "Mira's", not on "Miranda"; a
    key's edge that is not a letter, digit or underscore needs no boundary ("#tag" fires on
    "a#tag"). Letters are Unicode letters ("Émile" is a word). With whole words off, a key
    fires anywhere, even inside a word. SillyTavern matches keys of several words as
    plain substrings; here they are whole words at their edges too ("the king" does not
    fire on "the kingdom").
  - A key that is empty or only spaces is no key (it would fire everywhere); an entry
    with no key never fires, unless it is `constant` (always inserted, as in SillyTavern).
  - Secondary keys (SillyTavern's "optional filter") refine an entry that a key fired:
    "and_any" needs one of them too, "and_all" all of them, "not_any" none of them,
    "not_all" not all of them. With no secondary keys the logic does not matter.
  - An entry switched off, or with no text, never fires.

`Steering.to_dict` / `Steering.from_dict` are the JSON form (the loom export writes it;
a lorebook file may hold it): strict, so an unknown key, a wrong type or a value past its
cap is one `ValueError` naming the field. A story keeps its steering in its settings record
(the store's, the loom export's), under `SETTINGS_KEY` (`steering_in`, `with_steering`).
All the keys of a lorebook are found in one pass over the story's end (`Steering.fired`,
`weave.story.lore_keys`). This module builds no context (`weave.story.context` does) and
reads no files (`weave.story.lorebook` does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from weave.story.lore_keys import LoreKeys, lore_keys

MAX_MEMORY_CHARS = 20_000
MAX_NOTE_CHARS = 2_000
MAX_NOTE_DEPTH = 1_000
MAX_ENTRIES = 1_000
MAX_ENTRY_CHARS = 20_000
MAX_KEYS = 100  # per entry, primary and secondary each
MAX_KEY_CHARS = 200
MAX_NAME_CHARS = 200
MAX_SCAN_CHARS = 100_000
DEFAULT_NOTE_DEPTH = 3
DEFAULT_SCAN_CHARS = 2_000
LOGICS = ("and_any", "and_all", "not_any", "not_all")
SETTINGS_KEY = "steering"


@dataclass(frozen=True)
class LoreEntry:
    """One lorebook entry; see the module docstring for how its keys are found."""

    keys: tuple[str, ...]
    text: str
    enabled: bool = True
    name: str = ""  # the writer's label ("Mira"); the first key stands in when empty
    case_sensitive: bool = False
    whole_words: bool = True
    scan_chars: int = DEFAULT_SCAN_CHARS  # how far back from the story's end keys are looked for
    constant: bool = False  # inserted whenever enabled, keys or not
    secondary_keys: tuple[str, ...] = ()
    logic: str = "and_any"  # how secondary keys refine a fired entry: one of LOGICS

    def __post_init__(self) -> None:
        _check_entry(vars(self), "entry")

    @property
    def label(self) -> str:
        """What the page calls the entry: its name, else its first key."""
        return self.name or next((k.strip() for k in self.keys if k.strip()), "(no key)")

    def fires(self, story_text: str) -> bool:
        """Whether this entry goes into the context for a story ending in `story_text`."""
        return bool(LoreKeys((self,)).fired(story_text))


@dataclass(frozen=True)
class Steering:
    """A story's steering settings. The default steers nothing."""

    memory: str = ""
    note: str = ""
    note_depth: int = DEFAULT_NOTE_DEPTH  # the note goes before the story's last this many lines
    lore: tuple[LoreEntry, ...] = ()
    _keys: LoreKeys | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _cap_text(self.memory, MAX_MEMORY_CHARS, "memory")
        _cap_text(self.note, MAX_NOTE_CHARS, "note")
        _check_int(self.note_depth, 1, MAX_NOTE_DEPTH, "note_depth")
        _check(
            isinstance(self.lore, tuple) and all(isinstance(e, LoreEntry) for e in self.lore),
            "lore must be a tuple of LoreEntry",
        )
        _check(len(self.lore) <= MAX_ENTRIES, f"lore holds at most {MAX_ENTRIES} entries")

    def in_force(self, story_text: str) -> Steering:
        """What of this steering shapes the context of a story ending in `story_text`: the
        memory and the note, and only the lorebook entries that fire there (a search
        records this: an entry that did not fire changed nothing)."""
        return Steering(self.memory, self.note, self.note_depth, self.fired(story_text))

    def fired(self, story_text: str) -> tuple[LoreEntry, ...]:
        """The lorebook entries that fire on a story ending in `story_text`, in order: all
        keys found in one pass (`weave.story.lore_keys`), compiled on the first call (or
        found compiled, for a lorebook equal to one compiled lately)."""
        if self._keys is None:
            object.__setattr__(self, "_keys", lore_keys(self.lore))  # frozen: set once
        return self._keys.fired(story_text)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, every field written out."""
        return {
            "memory": self.memory,
            "note": self.note,
            "note_depth": self.note_depth,
            "lore": [_entry_dict(e) for e in self.lore],
        }

    @classmethod
    def from_dict(cls, data: Any) -> Steering:
        """Read the JSON form back; fields left out take their defaults.

        Raises:
            ValueError: one line naming the first field that is unknown, of the wrong
                type or past its cap (e.g. "steering: lore[2].keys[0] must be text").
        """
        _check(isinstance(data, dict), "steering must be an object")
        _no_unknown(data, _STEERING_FIELDS, "")
        lore = data.get("lore", [])
        _check(isinstance(lore, list), "lore must be a list")
        _check(len(lore) <= MAX_ENTRIES, f"lore holds at most {MAX_ENTRIES} entries")
        return cls(
            memory=_text(data, "memory", ""),
            note=_text(data, "note", ""),
            note_depth=_int(data, "note_depth", DEFAULT_NOTE_DEPTH, ""),
            lore=tuple(_entry_from(item, f"lore[{i}]") for i, item in enumerate(lore)),
        )


def steering_in(settings: Mapping[str, Any]) -> Steering:
    """The steering a story's settings record keeps (the default where it keeps none).

    Raises:
        ValueError: as `Steering.from_dict`, naming the field.
    """
    data = settings.get(SETTINGS_KEY)
    return Steering() if data is None else Steering.from_dict(data)


def with_steering(settings: Mapping[str, Any], steering: Steering) -> dict[str, Any]:
    """The settings record keeping `steering` (none written for the default)."""
    kept = {k: v for k, v in settings.items() if k != SETTINGS_KEY}
    return kept if steering == Steering() else {**kept, SETTINGS_KEY: steering.to_dict()}


_STEERING_FIELDS = ("memory", "note", "note_depth", "lore")
_ENTRY_FIELDS = (
    "keys", "text", "enabled", "name", "case_sensitive", "whole_words", "scan_chars",
    "constant", "secondary_keys", "logic",
)  # fmt: skip


def _entry_dict(entry: LoreEntry) -> dict[str, Any]:
    return {
        "keys": list(entry.keys),
        "text": entry.text,
        "enabled": entry.enabled,
        "name": entry.name,
        "case_sensitive": entry.case_sensitive,
        "whole_words": entry.whole_words,
        "scan_chars": entry.scan_chars,
        "constant": entry.constant,
        "secondary_keys": list(entry.secondary_keys),
        "logic": entry.logic,
    }


def _entry_from(data: Any, where: str) -> LoreEntry:
    _check(isinstance(data, dict), f"{where} must be an object")
    _no_unknown(data, _ENTRY_FIELDS, where + ".")
    _check("keys" in data and "text" in data, f"{where} needs keys and text")
    values = dict(
        keys=_keys(data, "keys", where),
        text=_text(data, "text", "", where + "."),
        enabled=_bool(data, "enabled", True, where),
        name=_text(data, "name", "", where + "."),
        case_sensitive=_bool(data, "case_sensitive", False, where),
        whole_words=_bool(data, "whole_words", True, where),
        scan_chars=_int(data, "scan_chars", DEFAULT_SCAN_CHARS, where + "."),
        constant=_bool(data, "constant", False, where),
        secondary_keys=_keys(data, "secondary_keys", where),
        logic=_text(data, "logic", "and_any", where + "."),
    )
    _check_entry(values, where)  # here, so that an error names the entry's place
    return LoreEntry(**values)


# -- checks: each failure is one ValueError naming the field ------------------------------
def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(f"steering: {message}")


def _check_entry(entry: dict[str, Any], where: str) -> None:
    """Check a lore entry's field values (by name), past the types JSON can have."""
    for name in ("keys", "secondary_keys"):
        keys = entry[name]
        _check(
            isinstance(keys, tuple) and all(isinstance(k, str) for k in keys),
            f"{where}.{name} must be a tuple of text",
        )
        _check(len(keys) <= MAX_KEYS, f"{where}.{name} holds at most {MAX_KEYS} keys")
        for i, key in enumerate(keys):
            _cap_text(key, MAX_KEY_CHARS, f"{where}.{name}[{i}]")
    _cap_text(entry["text"], MAX_ENTRY_CHARS, f"{where}.text")
    _cap_text(entry["name"], MAX_NAME_CHARS, f"{where}.name")
    for name in ("enabled", "case_sensitive", "whole_words", "constant"):
        _check(isinstance(entry[name], bool), f"{where}.{name} must be true or false")
    _check_int(entry["scan_chars"], 1, MAX_SCAN_CHARS, f"{where}.scan_chars")
    _check(entry["logic"] in LOGICS, f"{where}.logic must be one of {', '.join(LOGICS)}")


def _cap_text(value: Any, cap: int, where: str) -> None:
    _check(isinstance(value, str), f"{where} must be text")
    _check(len(value) <= cap, f"{where} holds at most {cap:,} characters")


def _check_int(value: Any, low: int, high: int, where: str) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool)
    _check(ok and low <= value <= high, f"{where} must be a whole number in {low}..{high:,}")


def _no_unknown(data: dict, known: tuple[str, ...], where: str) -> None:
    unknown = sorted(str(k) for k in data if k not in known)
    _check(not unknown, f"unknown field {where}{unknown[0]}" if unknown else "")


def _text(data: dict, key: str, default: str, where: str = "") -> str:
    value = data.get(key, default)
    _check(isinstance(value, str), f"{where}{key} must be text")
    return value


def _bool(data: dict, key: str, default: bool, where: str) -> bool:
    value = data.get(key, default)
    _check(isinstance(value, bool), f"{where}.{key} must be true or false")
    return value


def _int(data: dict, key: str, default: int, where: str) -> int:
    value = data.get(key, default)
    _check(
        isinstance(value, int) and not isinstance(value, bool),
        f"{where}{key} must be a whole number",
    )
    return value


def _keys(data: dict, key: str, where: str) -> tuple[str, ...]:
    value = data.get(key, [])
    _check(isinstance(value, list), f"{where}.{key} must be a list of text")
    _check(len(value) <= MAX_KEYS, f"{where}.{key} holds at most {MAX_KEYS} keys")
    for i, item in enumerate(value):
        _check(isinstance(item, str), f"{where}.{key}[{i}] must be text")
    return tuple(value)
