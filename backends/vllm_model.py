"""What a vLLM server says of its model at start: the model served and its window, the
vocabulary's size, and the control tokens its tokenizer names.

The vocabulary's size: vLLM names it nowhere but in refusing an id past it, so it is
asked once, at start, with a stop token past any vocabulary (`stop_token_ids`,
checked before anything runs): the refusal says "Vocabulary size: N" (the model's, the
width of its log-probs). A server that does not say so may name it in its tokenizer's
`/tokenizer_info` (`vocab_size`); one that says neither is refused at start, naming what
it was asked: its ids could not be checked (a 100-token server's ids 100 and 150 became
suggestions with empty text).

Control tokens come from `/tokenizer_info` when the server offers it
(`--enable-tokenizer-info-endpoint`): the special tokens its tokenizer's config names.
The backend (`backends.vllm`) learns more on the way, from the tokens the server stops on.

Owns: reading `/v1/models` and `/tokenizer_info`, and asking the vocabulary's size. Not:
requests during a search (`backends.vllm`).
"""

from __future__ import annotations

import logging
import re

from backends import replies
from backends.errors import BackendError
from backends.http import JsonClient, expect
from backends.vllm_texts import MAX_VOCAB

log = logging.getLogger(__name__)

VOCABULARY = re.compile(r"[Vv]ocabulary size:? (\d{1,9})\b")
SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
                "mask_token", "additional_special_tokens", "extra_special_tokens")  # fmt: skip


def served_model(client: JsonClient, wanted: str | None) -> tuple[str, int | None]:
    """The served model's name and window (`/v1/models`): `wanted`, or the first served."""
    reply = client.get("/v1/models")
    models = reply.get("data") if isinstance(reply, dict) else None
    expect(isinstance(models, list) and models and all(isinstance(m, dict) for m in models),
           client, "/v1/models lists no model")  # fmt: skip
    for entry in models:
        if wanted is None or entry.get("id") == wanted:
            expect(isinstance(entry.get("id"), str), client, "a model without an id")
            length = entry.get("max_model_len")
            window = replies.count(
                length, client.error, "/v1/models max_model_len", least=replies.MIN_CONTEXT
            )
            return entry["id"], window
    served = ", ".join(str(m.get("id")) for m in models)
    raise client.error(f"model {wanted!r} is not served here (VLLM_MODEL); it serves {served}")


def tokenizer_info(client: JsonClient) -> dict | None:
    """The server's `/tokenizer_info` (an optional endpoint), or None without it."""
    try:
        info = client.get("/tokenizer_info")
    except BackendError as e:
        log.info("%s; control tokens are learnt when the server stops on them", e)
        return None
    return info if isinstance(info, dict) else None


def vocabulary_size(client: JsonClient, model: str, info: dict | None) -> int:
    """The model's vocabulary size: from the server's refusal of a stop token past any
    vocabulary (vLLM's own words), else from `/tokenizer_info`'s `vocab_size`.

    Raises:
        BackendError: the server says neither: the ids it sends could not be checked.
    """
    body = {"model": model, "prompt": [0], "max_tokens": 1,
            "stop_token_ids": [MAX_VOCAB]}  # fmt: skip
    try:
        client.post("/v1/completions", body)
        why = "it took a stop token past any vocabulary"
    except BackendError as e:
        said = VOCABULARY.search(str(e))
        if said is not None:
            return replies.count(int(said.group(1)), client.error,
                                 "the vocabulary size its refusal names",
                                 optional=False, most=MAX_VOCAB)  # fmt: skip
        said_instead = str(e).partition(": ")[2]  # less "vllm at URL"
        why = f"asked with a stop token past any vocabulary, it answered: {said_instead}"
    size = replies.count((info or {}).get("vocab_size"), client.error,
                         "/tokenizer_info vocab_size", most=MAX_VOCAB)  # fmt: skip
    if size is None:
        raise client.error(
            f"it does not say its vocabulary's size ({why}; /tokenizer_info names none), "
            "so the token ids it sends cannot be checked"
        )
    return size


def special_ids(info: dict) -> set[int]:
    """Ids of the special tokens that `/tokenizer_info` names; its `added_tokens_decoder`
    maps ids to their text (or to {content, special})."""
    names = {name for key in SPECIAL_KEYS for name in _names(info.get(key))}
    added = info.get("added_tokens_decoder")
    out = set()
    for key, entry in added.items() if isinstance(added, dict) else ():
        flagged = isinstance(entry, dict) and entry.get("special") is True
        if (flagged or set(_names(entry)) & names) and str(key).isdigit():
            out.add(int(key))
    return out


def _names(value: object) -> list[str]:
    """Token texts in a tokenizer-config value: a string, {content}, or lists/maps of them."""
    if isinstance(value, dict):
        return _names(value["content"]) if "content" in value else _names(list(value.values()))
    if isinstance(value, list):
        return [name for item in value for name in _names(item)]
    return [value] if isinstance(value, str) and value else []
