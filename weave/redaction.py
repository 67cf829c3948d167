"""Credentials taken out of text before it is shown or logged: `redacted`.

A server's or a database's error may quote what it was sent (a request's headers, a URL
with its password); every message that may carry one is shown only through here: the
backends' errors (`backends.errors.BackendError`) and the story store's (a PostgreSQL URL's
password, `weave.loom.store_pg`). Pure text work: it imports nothing of LLooM.
"""

from __future__ import annotations

import re

CREDENTIALS = (  # (what names it, then its value)
    re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)[^\"'\n,;}]+"),
    re.compile(r"(?i)(\b(?:bearer|basic)\s+)[^\s\"',;}]+"),
    re.compile(r"(?i)(api[_-]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',;}]+"),
    re.compile(r"(?i)(\bpassword\s*=\s*)[^\s\"',;}]+"),  # a key=value connection string's
    re.compile(r"(://[^/\s:@]+:)[^/\s@]+(?=@)"),  # a password in a URL
)
KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}")
REDACTED = "[redacted]"


def redacted(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` less `secrets`, bearer and basic tokens, Authorization and api-key values,
    passwords in URLs and connection strings and OpenAI-style keys (`sk-...`): server text
    is shown only through this."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    for pattern in CREDENTIALS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return KEY_LIKE.sub(REDACTED, text)
