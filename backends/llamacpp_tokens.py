"""llama-server's tokenizer, asked over HTTP: ids for text, the model's BOS and control
tokens, the vocabulary's size, and the bytes of each token of a text.

Ids are checked against the vocabulary where the server names its size (`/v1/models`
meta.n_vocab); a pre-Dec-2024 server's token strings are mapped back to ids here, once
each. The control tokens are the BOS and the end of text `/props` names.

Owns: `/tokenize`, `/detokenize` and `/v1/models`. Not: checking the ids a caller sends
(`Backend.check_ids`), reading `/completion` (`backends.llamacpp_replies`).
"""

from __future__ import annotations

import logging

from backends import replies
from backends.errors import BackendError
from backends.http import JsonClient, expect
from backends.llamacpp_replies import n_vocab, token_ids, token_pieces

log = logging.getLogger(__name__)


class ServerTokens:
    """The tokenizer of the llama-server `client` talks to, whose `/props` are `props`."""

    def __init__(self, client: JsonClient, props: dict):
        self.client = client
        self.vocab_size = self._vocab_size()
        self.bos = self.ids("", add_special=True)  # [] unless the model wants a BOS
        self.plain = self.ids("a")[:1]  # a token that is a whole character
        self.specials = frozenset(self._specials(props))
        self._old_ids: dict[str, int] = {}

    def ids(self, text: str, *, add_special: bool = False, special: bool = False) -> list[int]:
        """The ids of `text` (`add_special`: with the model's BOS; `special`: control
        tokens' texts read as those tokens)."""
        body = {"content": text, "add_special": add_special, "parse_special": special}
        reply = self.client.post("/tokenize", body)
        return token_ids(reply, self.client.error, self.vocab_size)

    def text(self, ids: list[int]) -> str:
        """The text of `ids` (already checked)."""
        reply = self.client.post("/detokenize", {"tokens": list(ids)})
        return replies.field(reply, "content", str, self.client.error, "/detokenize")

    def pieces(self, ids: list[int]) -> list[bytes]:
        """Each id's bytes: those `/tokenize` gives for each piece of the ids' text (when that
        text tokenizes back to the same ids; else each id's text alone)."""
        body = {"content": self.text(ids), "with_pieces": True}
        reply = self.client.post("/tokenize", body)
        pieces = token_pieces(reply, ids, self.client.error)
        if pieces is None:  # a text that tokenizes otherwise: each id decoded alone
            pieces = [self.text([i]).encode("utf-8") for i in ids]
        return pieces

    def old_id(self, text: str) -> int:
        """The id of a pre-Dec-2024 server's token string."""
        if text not in self._old_ids:
            ids = self.ids(text)
            expect(len(ids) == 1, self.client, f"token {text!r} does not tokenize to one id")
            self._old_ids[text] = ids[0]
        return self._old_ids[text]

    def _vocab_size(self) -> int | None:
        """The vocabulary's size, from `/v1/models` where the server names it (n_vocab)."""
        try:
            reply = self.client.get("/v1/models")
        except BackendError as e:
            log.info("%s; token ids are checked against no vocabulary size", e)
            return None
        return n_vocab(reply, self.client.error)

    def _specials(self, props: dict) -> set[int]:
        """End-of-text and BOS ids, from the token texts /props names."""
        ids: set[int] = set(self.bos)
        for key in ("eos_token", "bos_token"):
            text = props.get(key)
            if text:
                found = self.ids(text, special=True)
                if len(found) == 1:
                    ids.add(found[0])
        return ids
