"""Reading an OpenAI-shaped reply's JSON: its choices, log-probabilities and token bytes.

The replies are read as the JSON the server sent (`replies.parsed`), not through the
`openai` package's models, which coerce what they are given (a log-prob `true` became
1.0, `false` 0.0) or give up on the shape (a number no float holds left a plain dict
where an object was expected). Every field is checked where it is read
(`backends.replies`): a log-probability must be a number <= 0 (-inf: dropped), token
bytes a list of byte values, and a reply holds the choices asked for, no more.

Two shapes of log-probs: the chat API's `{content: [{token, bytes, logprob,
top_logprobs: [...]}]}` (which llama.cpp's server answers on the legacy endpoint too)
and the legacy `{tokens, token_logprobs, top_logprobs: [{token: logprob}]}`, whose token
text may be "bytes:\\xNN" for part of a character.

Owns: the shape of a reply. Not: requests, token ids, wording of HTTP errors
(`backends.openai`).
"""

from __future__ import annotations

import re
from typing import Any

from backends import replies

BYTES_TOKEN = re.compile(r"^bytes:((?:\\x[0-9a-fA-F]{2})+)$")  # legacy: a partial character

Option = tuple[bytes, float]  # a candidate token's bytes and its log-prob
Read = tuple[bytes, Any, str]  # a token's bytes, its log-prob as sent, and where it was


def choices(reply: Any, asked: int, error: replies.Error) -> list[dict]:
    """A reply's choices (at most `asked`), in `index` order; each index one of the
    `asked` (a server's 10**9 or -1 names no choice asked for)."""
    found = replies.field(reply, "choices", list, error, "the reply")
    if len(found) > asked:
        raise error(f"unexpected reply: {len(found)} choices, {asked} asked")
    for i, choice in enumerate(found):
        replies.of_type(choice, dict, error, f"choices[{i}]")
        index = replies.of_type(choice.get("index", i), int, error, f"choices[{i}].index")
        if not 0 <= index < asked:
            raise replies.wrong(error, f"choices[{i}].index", index, f"an index in 0..{asked - 1}")
    return sorted(found, key=lambda c: c.get("index", 0))


def top_positions(choice: dict | None, error: replies.Error) -> list[list[Option]]:
    """The top log-probs at each position of one choice, either shape; -inf dropped."""
    logprobs = choice.get("logprobs") if choice else None
    if not isinstance(logprobs, dict) or not (logprobs.get("content") or
                                               logprobs.get("top_logprobs")):  # fmt: skip
        raise error("the reply carried no log-probabilities for this model")
    if logprobs.get("content"):
        content = replies.of_type(logprobs["content"], list, error, "logprobs.content")
        return [
            _ranked(_chat_options(position, error, f"logprobs.content[{j}]"), error)
            for j, position in enumerate(content)
        ]
    tops = replies.of_type(logprobs["top_logprobs"], list, error, "logprobs.top_logprobs")
    return [
        _ranked(_legacy_options(position, error, f"logprobs.top_logprobs[{j}]"), error)
        for j, position in enumerate(tops)
    ]


def drawn(choice: dict, chat: bool, error: replies.Error) -> tuple[list[Option], str]:
    """A sampled choice's tokens (bytes, finite log-prob) and the text it wrote."""
    logprobs = choice.get("logprobs")
    logprobs = logprobs if isinstance(logprobs, dict) else {}
    if chat or logprobs.get("content") is not None:
        content = replies.of_type(logprobs.get("content") or [], list, error, "logprobs.content")
        read = [_chat_option(entry, error, f"logprobs.content[{j}]")
                for j, entry in enumerate(content)]  # fmt: skip
    else:
        tokens = replies.of_type(logprobs.get("tokens") or [], list, error, "logprobs.tokens")
        values = replies.of_type(logprobs.get("token_logprobs") or [], list, error,
                                 "logprobs.token_logprobs")  # fmt: skip
        if len(values) != len(tokens):
            raise error(f"unexpected reply: {len(values)} token_logprobs, {len(tokens)} tokens")
        read = [(_legacy_piece(t, error, f"logprobs.tokens[{j}]"), v,
                 f"logprobs.token_logprobs[{j}]")
                for j, (t, v) in enumerate(zip(tokens, values, strict=True))]  # fmt: skip
    options = [(piece, replies.drawn_logprob(value, error, what)) for piece, value, what in read]
    message = choice.get("message") if chat else None
    written = message.get("content") if isinstance(message, dict) else choice.get("text")
    written = written if isinstance(written, str) else ""
    if written and not options:
        raise error("the reply carried no log-probabilities for this model")
    return options, written


def usage(reply: dict) -> dict[str, int]:
    """The reply's token counts (0 for any that is not a whole number)."""
    counts = reply.get("usage")
    counts = counts if isinstance(counts, dict) else {}
    details = counts.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else 0
    prompt = max(_count(counts.get("prompt_tokens")) - _count(cached), 0)
    completion = _count(counts.get("completion_tokens"))
    return {"model_tokens": prompt + completion, "prefill_tokens": prompt}


def _chat_options(position: Any, error: replies.Error, what: str) -> list[Read]:
    entries = replies.field(position, "top_logprobs", list, error, what)
    return [_chat_option(e, error, f"{what}.top_logprobs[{i}]") for i, e in enumerate(entries)]


def _chat_option(entry: Any, error: replies.Error, what: str) -> Read:
    """A chat entry {token, bytes, logprob}: its bytes, log-prob as sent, and name."""
    token = replies.field(entry, "token", str, error, what)
    raw = replies.token_bytes(entry.get("bytes"), error, f"{what}.bytes")
    if "logprob" not in entry:
        raise error(f"unexpected reply: {what} has no 'logprob'")
    return (raw if raw else token.encode("utf-8")), entry["logprob"], f"{what}.logprob"


def _legacy_options(position: Any, error: replies.Error, what: str) -> list[Read]:
    replies.of_type(position, dict, error, what)
    return [(_legacy_piece(token, error, what), value, f"{what}[{token!r}]")
            for token, value in position.items()]  # fmt: skip


def _legacy_piece(token: Any, error: replies.Error, what: str) -> bytes:
    """A legacy token's bytes: "bytes:\\xNN" for part of a character, else its text."""
    token = replies.of_type(token, str, error, what)
    partial = BYTES_TOKEN.match(token)
    if partial:
        return bytes(int(h, 16) for h in partial.group(1).split("\\x")[1:])
    return token.encode("utf-8")


def _ranked(options: list[Read], error: replies.Error) -> list[Option]:
    """Options by log-probability; -inf ones dropped, a position left empty an error."""
    out = []
    for piece, value, what in options:
        logprob = replies.logprob(value, error, what)
        if logprob is not None:
            out.append((piece, logprob))
    if not out:
        raise error("no finite log-probability at a position of the reply")
    out.sort(key=lambda option: -option[1])
    return out


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
