"""How the story store keeps a str exactly: in the database, and in ASCII JSON.

Text is stored as UTF-8 with `surrogatepass`, so every Python str (NUL, lone surrogates
such as '\\ud800', a surrogate pair written as two code points) comes back exactly;
settings and tree are JSON stored the same way. The export is ASCII JSON: lone surrogates
are `\\ud800` escapes, and the one str JSON cannot give back (a high surrogate followed
by a low one, which JSON reads as the character they spell) is written as
"\\u0000lloom-utf8-b64:" and its bytes in base64, as is any str that starts so. JSON values
come back as JSON gives them: tuples as lists, non-string keys as strings, infinite
log-probabilities as Python's `-Infinity`.

This module owns those conversions and nothing else: which columns hold what is
`weave.store.schema`'s, and the export document's shape is `weave.store.export`'s.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from weave.store.errors import InvalidInput, _Unreadable

_ESCAPED = "\x00lloom-utf8-b64:"  # starts an exported str that JSON alone would not keep
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _json(value: Any, what: str) -> bytes:
    """JSON as UTF-8 bytes; unescaped, so that surrogates stay exactly as they are."""
    try:
        return _blob(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"{what} cannot be saved as JSON: {e}") from e


def _load_json(data: str | bytes, what: str) -> Any:
    try:
        return json.loads(
            data.decode("utf-8", "surrogatepass") if isinstance(data, bytes) else data
        )
    except (ValueError, UnicodeDecodeError) as e:
        raise _Unreadable(f"{what} not valid JSON ({e})") from e


def _escaped(value: Any) -> Any:
    """`value` with every str that ASCII JSON would not give back exactly escaped."""
    if isinstance(value, str):
        if value.startswith(_ESCAPED) or _PAIR.search(value):
            return _ESCAPED + base64.b64encode(_blob(value)).decode("ascii")
        return value
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_escaped(v) for v in value]
    return value


def _unescaped(value: Any) -> Any:
    """`_escaped`'s inverse; raises ValueError for a damaged escape."""
    if isinstance(value, str):
        if not value.startswith(_ESCAPED):
            return value
        try:
            data = base64.b64decode(value[len(_ESCAPED) :], validate=True)
            return data.decode("utf-8", "surrogatepass")
        except (binascii.Error, UnicodeDecodeError) as e:
            raise ValueError(f"a damaged escaped string ({e})") from e
    if isinstance(value, dict):
        return {_unescaped(k): _unescaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unescaped(v) for v in value]
    return value


def _blob(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8", "surrogatepass")


def _text(data: bytes | str) -> str:
    if isinstance(data, str):  # written by hand or by another tool: take it as it is
        return data
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as e:
        raise _Unreadable(f"a text is not UTF-8 ({e})") from e
