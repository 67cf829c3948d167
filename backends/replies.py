"""Reading fields of a server's reply: each one checked where it is read.

A remote server may answer valid JSON of any shape, and numbers JSON should not carry
(NaN, Infinity). Each reader here takes the value, a name for it ("/completion
top_logprobs[2].id") and the client's `error` (which names the backend and the server),
and returns the value as the type the backend needs or raises that `BackendError`.

The rule for log-probabilities: a finite number <= 0 is one; a positive one up to
LOGPROB_SLACK (1e-4, a server's rounding of a near-certain token) is read as 0; -inf
(probability 0) is a token the model rules out, and its candidate is dropped (`logprob`
gives None); NaN, +inf, anything above LOGPROB_SLACK and an integer no float holds
(`10**400`) are a broken server, an error. A drawn (sampled) token's log-prob must be
finite.

A reply's JSON is parsed here too (`parsed`), with bounds: at most MAX_REPLY_BYTES (the
transport stops reading there) and MAX_DEPTH levels of nesting, checked before the
parser recurses into them. Server text an error quotes is made one short line
(`one_line`).

Owns: types, ranges, parsing bounds and the wording of a wrong shape. Not: which fields
a reply has, or reading it off the wire (`backends.http`, `backends.openai`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from backends.errors import BackendError

Error = Callable[[str], BackendError]

LOGPROB_SLACK = 1e-4  # a positive log-prob up to this is rounding: read as 0
MAX_REPLY_BYTES = 64 << 20  # a whole reply, or a whole stream: the prompt log-probs of a
# 40,000-token story at k = 20 fit; a reply past it is broken, or an attack on memory
MAX_DEPTH = 32  # nesting of a reply's JSON; the deepest the backends read is 6
MIN_CONTEXT = 128  # tokens: a smaller context window holds no story with a search's depth
QUOTED = 300  # characters of a server's own text that an error quotes
_PAIRS = bytes.maketrans(b"[{]}", b"(())")
_OUTSIDE_BRACKETS = bytes(b for b in range(256) if b not in b'"[]{}')


def parsed(data: bytes, error: Error, what: str) -> Any:
    """The JSON in `data` (a server's reply to `what`), bounded in size and depth."""
    if len(data) > MAX_REPLY_BYTES:
        raise error(f"{what} answered more than {MAX_REPLY_BYTES >> 20} MiB")
    if too_deep(data):
        raise error(f"{what} answered JSON nested over {MAX_DEPTH} levels deep, or unbalanced")
    try:
        return json.loads(data)
    except ValueError as e:
        shown = one_line(data[:200].decode("utf-8", "replace"), 80)
        raise error(f"{what} answered with something that is not JSON: {shown!r}") from e


def too_deep(data: bytes) -> bool:
    """Whether JSON `data` nests arrays and objects over MAX_DEPTH deep (or leaves one
    open), found without recursing: the parser's own recursion is what a deep reply
    attacks. Brackets inside strings do not count."""
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return False  # the common, small reply
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    quoted = unescaped.translate(None, _OUTSIDE_BRACKETS)  # quotes and brackets only
    brackets = b"".join(quoted.split(b'"')[::2]).translate(_PAIRS)
    for _ in range(MAX_DEPTH):  # each pass takes away the innermost level
        if not brackets:
            return False
        brackets = brackets.replace(b"()", b"")
    return bool(brackets)


def one_line(text: str, limit: int = QUOTED) -> str:
    """A server's text as one line (every run of whitespace one space), at most `limit`
    characters, "..." marking a cut."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


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


def count(
    value: Any,
    error: Error,
    what: str,
    *,
    optional: bool = True,
    least: int = 1,
    most: int | None = None,
) -> int | None:
    """A whole number in least..most (a size, a length); None when absent and `optional`."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        expected = f"a whole number of at least {least}" if least > 1 else "a whole number above 0"
        raise wrong(error, what, value, expected if most is None else f"{least}..{most}")
    if most is not None and value > most:
        raise wrong(error, what, value, f"{least}..{most}")
    return value


def logprob(value: Any, error: Error, what: str) -> float | None:
    """A log-probability as a float <= 0 (up to LOGPROB_SLACK above 0 read as 0); None for
    -inf (the candidate is dropped)."""
    number = _float(value, error, what)
    if math.isnan(number) or number == math.inf:
        raise wrong(error, what, value, "a finite log-probability")
    if number > LOGPROB_SLACK:
        raise wrong(error, what, value, "a log-probability (at most 0)")
    return None if number == -math.inf else min(number, 0.0)


def drawn_logprob(value: Any, error: Error, what: str) -> float:
    """A sampled token's log-probability: finite, as a token the model ruled out (-inf)
    cannot have been drawn."""
    number = logprob(value, error, what)
    if number is None:
        raise wrong(error, what, value, "a finite log-probability")
    return number


def probability(value: Any, error: Error, what: str) -> float | None:
    """A probability in 0..1 as its log; None for 0 (the candidate is dropped)."""
    number = _float(value, error, what)
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


def token_bytes(value: Any, error: Error, what: str) -> bytes | None:
    """A token's bytes, from the list of byte values a server gives (None when absent)."""
    if value is None:
        return None
    items = of_type(value, list, error, what)
    if not all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 256 for b in items):
        raise wrong(error, what, value, "a list of byte values 0..255")
    return bytes(items)


def _float(value: Any, error: Error, what: str) -> float:
    """A JSON number as a float; an integer past a float's range is a wrong value."""
    try:
        return float(of_type(value, (int, float), error, what))
    except OverflowError:
        raise wrong(error, what, value, "a number a float holds") from None


def _names(kinds: tuple[type, ...]) -> str:
    if set(kinds) == {int, float}:
        return "a number"
    words = {dict: "an object", list: "a list", str: "text", int: "a whole number",
             float: "a number", bool: "true or false"}  # fmt: skip
    return " or ".join(words.get(k, k.__name__) for k in kinds)
