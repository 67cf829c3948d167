"""Bounds: the values a setting may take, declared once, on its dataclass field.

A field made with `bounded(default, low, high)` or `one_of(default, *options)` carries its
bound in the field's metadata, and whatever needs the range reads it from there
(`bound_of`, `problem`): the parameters' own `__post_init__` (`check_bounds`), the
settings file and environment (`weave.config`), the page's sliders and the command
line's help. A value outside is an error that names the setting; nothing is clamped.
NaN and the infinities are outside every range, a bool is not a number, and a
whole-number range takes only ints.

This module knows nothing of where a value came from: its callers name the setting.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, field, fields
from typing import Any

KEY = "bound"  # the field metadata key
_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = _SHOWN.maxlong = 40


@dataclass(frozen=True)
class Range:
    """A closed range `low..high`; of whole numbers when both ends are ints."""

    low: int | float
    high: int | float
    unit: str = ""

    @property
    def whole(self) -> bool:
        return isinstance(self.low, int) and isinstance(self.high, int)

    def admits(self, value: Any) -> bool:
        kinds = int if self.whole else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            return False
        return self.low <= value <= self.high  # False for NaN, and for inf: the ends are finite

    def __str__(self) -> str:
        span = f"{_number(self.low)}..{_number(self.high)}"
        return f"{span} {self.unit}" if self.unit else span


@dataclass(frozen=True)
class Choice:
    """One of a few names."""

    options: tuple[str, ...]

    def admits(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.options

    def __str__(self) -> str:
        return ", ".join(repr(option) for option in self.options)


Bound = Range | Choice


def bounded(default: int | float | None, low: int | float, high: int | float, unit: str = ""):
    """A dataclass field holding a number in `low..high` (None too, when that is the default)."""
    return field(default=default, metadata={KEY: Range(low, high, unit)})


def one_of(default: str, *options: str):
    """A dataclass field holding one of `options`."""
    return field(default=default, metadata={KEY: Choice(tuple(options))})


def bound_of(cls: type, name: str) -> Bound | None:
    """The bound of field `name` of dataclass `cls` (None: the field is not bounded)."""
    return next((f.metadata.get(KEY) for f in fields(cls) if f.name == name), None)


def problem(name: str, value: Any, bound: Bound) -> str | None:
    """What is wrong with `value` for the setting `name` bounded by `bound`, or None."""
    if bound.admits(value):
        return None
    within = f"one of {bound}"
    if isinstance(bound, Range):
        within = f"a whole number in {bound}" if bound.whole else f"in {bound}"
    return f"{name} must be {within}, not {shown(value)}"


def shown(value: Any) -> str:
    """`value`'s repr, short however long or deeply nested the value is."""
    return _SHOWN.repr(value)


class Bounded:
    """A dataclass whose bounded fields are checked as it is made (`check_bounds`)."""

    def __post_init__(self) -> None:
        check_bounds(self)


def check_bounds(values: Any) -> None:
    """Check every bounded field of the dataclass instance `values` (None passes where it is
    the field's default); raise ValueError naming the first field out of bounds."""
    for f in fields(values):
        value = getattr(values, f.name)
        if KEY in f.metadata and not (value is None and f.default is None):
            wrong = problem(f.name, value, f.metadata[KEY])
            if wrong:
                raise ValueError(wrong)


def _number(value: int | float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"
