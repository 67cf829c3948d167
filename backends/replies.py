"""Reading fields of a server's reply: each one checked where it is read.

A remote server may answer valid JSON of any shape, and numbers JSON should not carry
(NaN, Infinity). Each reader here takes the value, a name for it ("/completion
top_logprobs[2].id") and the client's `error` (which names the backend and the server),
and returns the value as the type the backend needs or raises that `BackendError`.

The rule for log-probabilities: a finite number <= 0 is one; -inf (probability 0) is a
token the model rules out, and its candidate is dropped (`logprob` gives None); NaN and
+inf are a broken server, an error. A drawn (sampled) token's log-prob must be finite.

Owns: types, ranges and the wording of a wrong shape. Not: which fields a reply has.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from backends.base import BackendError

Error = Callable[[str], BackendError]


def wrong(error: Error, what: str, value: Any, expected: str) -> BackendError:
    """The error for `what` holding `value` where `expected` was needed."""
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return error(f"unexpected reply: {what} is {shown}, expected {expected}")


def of_type(value: Any, kind: type | tuple[type, ...], error: Error, what: str) -> Any:
    """`value` when it is a `kind` (a bool is not a number here)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise wrong(error, what, value, _names(kinds))
    if not isinstance(value, kinds):
        raise wrong(error, what, value, _names(kinds))
    return value


def field(reply: Any, key: str, kind: type | tuple[type, ...], error: Error, what: str) -> Any:
    """`reply[key]` as a `kind`; `reply` must be an object holding it."""
    of_type(reply, dict, error, what)
    if key not in reply:
        raise error(f"unexpected reply: {what} has no {key!r}")
    return of_type(reply[key], kind, error, f"{what}.{key}")


def count(value: Any, error: Error, what: str, *, optional: bool = True) -> int | None:
    """A whole number > 0 (a size, a length); None when absent and `optional`."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise wrong(error, what, value, "a whole number above 0")
    return value


def logprob(value: Any, error: Error, what: str) -> float | None:
    """A log-probability as a float; None for -inf (the candidate is dropped)."""
    number = float(of_type(value, (int, float), error, what))
    if math.isnan(number) or number == math.inf:
        raise wrong(error, what, value, "a finite log-probability")
    return None if number == -math.inf else number


def drawn_logprob(value: Any, error: Error, what: str) -> float:
    """A sampled token's log-probability: finite, as a token the model ruled out (-inf)
    cannot have been drawn."""
    number = logprob(value, error, what)
    if number is None:
        raise wrong(error, what, value, "a finite log-probability")
    return number


def probability(value: Any, error: Error, what: str) -> float | None:
    """A probability in 0..1 as its log; None for 0 (the candidate is dropped)."""
    number = float(of_type(value, (int, float), error, what))
    if not 0.0 <= number <= 1.0:  # NaN fails this too
        raise wrong(error, what, value, "a probability in 0..1")
    return math.log(number) if number > 0 else None


def token_id(value: Any, error: Error, what: str, vocab_size: int | None) -> int:
    """A token id in the vocabulary: 0 <= id < vocab_size (when the size is known)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong(error, what, value, "a token id (a whole number)")
    if value < 0 or (vocab_size is not None and value >= vocab_size):
        limit = f"0..{vocab_size - 1}" if vocab_size is not None else "0 or more"
        raise error(
            f"unexpected reply: {what} is token id {value}, outside the vocabulary ({limit})"
        )
    return value


def _names(kinds: tuple[type, ...]) -> str:
    if set(kinds) == {int, float}:
        return "a number"
    words = {dict: "an object", list: "a list", str: "text", int: "a whole number",
             float: "a number", bool: "true or false"}  # fmt: skip
    return " or ".join(words.get(k, k.__name__) for k in kinds)
