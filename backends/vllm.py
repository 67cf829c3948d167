"""The vLLM backend: a thin client of vLLM's OpenAI-compatible server.

One `POST /v1/completions` carries a whole depth's frontier as token-id prompts
(`prompt: [[ids], [ids], ...]`) with `logprobs: k`, `temperature: 0` and
`return_tokens_as_token_ids` (top-logprob keys come back as "token_id:N"; plain token
strings collide). Greedy chains ask `max_tokens` = the remaining depth, so one request
answers a beam's whole greedy path. Token ids are the server's own (`/tokenize`); the
text of ids not seen before comes from `/detokenize`, in parallel, once per id. A token
that is half of a UTF-8 character shows as U+FFFD here: the server's API offers no token
bytes. Control tokens are known by their empty text, or when the server stops on one.

Owns: request shapes, parsing, the logprobs limit. Not: the search, HTTP error wording
(`backends.http`).
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import ThreadPoolExecutor

from backends.base import BackendError, Candidate, Chain, GreedyPathBackend, Usage
from backends.http import JsonClient, expect

log = logging.getLogger(__name__)

PIECE_LOOKUPS = 8  # parallel /detokenize calls for token ids not seen before
TOKEN_KEY = re.compile(r"^token_id:(-?\d+)$")
LIMIT = re.compile(r"max(?:imum)? allowed:? (\d+)")
DEFAULT_MAX_LOGPROBS = 20


class VLLMBackend(GreedyPathBackend):
    """vLLM at `url` (e.g. http://127.0.0.1:8000); `model` defaults to the first served."""

    name = "vllm"
    prefers_chains = False  # one request already carries a whole depth

    def __init__(self, url: str, *, model: str | None = None, timeout: float = 60.0):
        super().__init__()
        self.client = JsonClient(url, backend=self.name, timeout=timeout, pool=PIECE_LOOKUPS)
        self._model, self._context_length = self._served_model(model)
        self.max_logprobs = DEFAULT_MAX_LOGPROBS
        self._pieces: dict[int, str] = {}
        self.text_lookups = 0  # /detokenize calls made for token text, for benchmarks

    # -- Backend ---------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self._model

    @property
    def url(self) -> str:
        return self.client.base_url

    @property
    def context_length(self) -> int | None:
        return self._context_length

    def tokenize(self, text: str) -> list[int]:
        reply = self.client.post(
            "/tokenize", {"model": self._model, "prompt": text, "add_special_tokens": False}
        )
        expect(isinstance(reply, dict) and isinstance(reply.get("tokens"), list), self.client,
               "/tokenize gave no token list")  # fmt: skip
        return [int(t) for t in reply["tokens"]]

    def detokenize(self, ids: list[int]) -> str:
        reply = self.client.post("/detokenize", {"model": self._model, "tokens": list(ids)})
        expect(isinstance(reply, dict) and "prompt" in reply, self.client,
               "/detokenize gave no text")  # fmt: skip
        return reply["prompt"]

    def close(self) -> None:
        self.client.close()

    # -- requests --------------------------------------------------------------------
    def _served_model(self, wanted: str | None) -> tuple[str, int | None]:
        reply = self.client.get("/v1/models")
        models = reply.get("data") if isinstance(reply, dict) else None
        expect(isinstance(models, list) and models, self.client, "/v1/models lists no model")
        for entry in models:
            if wanted is None or entry.get("id") == wanted:
                return entry["id"], entry.get("max_model_len")
        served = ", ".join(str(m.get("id")) for m in models)
        raise self.client.error(
            f"model {wanted!r} is not served here (VLLM_MODEL); it serves {served}"
        )

    def _complete(self, contexts: list[list[int]], k: int, length: int) -> list[Chain]:
        """Top-k at each of `length` greedy positions, for every context, in one request."""
        if not contexts:
            return []
        k = self._clamp(k)
        body = {
            "model": self._model,
            "prompt": [list(ctx) for ctx in contexts],
            "max_tokens": length,
            "logprobs": k,
            "temperature": 0,
            "return_tokens_as_token_ids": True,
        }
        try:
            reply = self.client.post("/v1/completions", body)
        except BackendError as e:
            limit = LIMIT.search(str(e))
            if not limit or int(limit.group(1)) >= k:
                raise
            self._learn_limit(int(limit.group(1)))
            return self._complete(contexts, k, length)
        self._count(reply)
        return self._parse(reply, len(contexts), k)

    def _clamp(self, k: int) -> int:
        return max(1, min(k, self.max_logprobs))

    def _learn_limit(self, limit: int) -> None:
        log.warning(
            "vLLM at %s allows %d logprobs (--max-logprobs); asking for that many; "
            "start it with a higher --max-logprobs for wider splits",
            self.url,
            limit,
        )
        self.max_logprobs = limit

    def _parse(self, reply, rows: int, k: int) -> list[Chain]:
        choices = reply.get("choices") if isinstance(reply, dict) else None
        expect(isinstance(choices, list) and len(choices) == rows, self.client,
               f"expected {rows} choices")  # fmt: skip
        ordered = sorted(choices, key=lambda c: c.get("index", 0))
        tops = []
        for choice in ordered:
            self._learn_end(choice)
            logprobs = choice.get("logprobs") or {}
            positions = logprobs.get("top_logprobs")
            expect(isinstance(positions, list) and positions, self.client,
                   "a choice without top_logprobs: does the server allow logprobs?")  # fmt: skip
            tops.append([self._ranked(position, k) for position in positions])
        self._learn_pieces({c.token_id for chain in tops for top in chain for c in top})
        return [[[self._with_text(c) for c in top] for top in chain] for chain in tops]

    def _ranked(self, position: dict, k: int) -> list[Candidate]:
        expect(isinstance(position, dict) and position, self.client, "an empty top_logprobs entry")
        out = []
        for key, logprob in position.items():
            match = TOKEN_KEY.match(str(key))
            expect(match is not None, self.client, f"top_logprobs key {key!r} is not 'token_id:N'")
            expect(logprob is not None, self.client, "a null log-probability")
            out.append(Candidate(int(match.group(1)), "", float(logprob)))
        out.sort(key=lambda c: (-c.logprob, c.token_id))
        return out[:k]  # the sampled token may come on top of the k asked for

    def _count(self, reply: dict) -> None:
        usage = reply.get("usage") or {}
        prompt = int(usage.get("prompt_tokens") or 0)
        cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        self.stats.add(
            **Usage(forward_calls=1, model_tokens=prompt - cached + completion,
                    prefill_tokens=prompt - cached).__dict__
        )  # fmt: skip

    # -- token text ------------------------------------------------------------------
    def _learn_pieces(self, ids: set[int]) -> None:
        """Each unseen id's text from /detokenize, in parallel: these calls skip the model
        (~2 ms each here, against ~200 ms for a completion) and each id is asked once."""
        unseen = sorted(i for i in ids if i not in self._pieces)
        if not unseen:
            return
        with ThreadPoolExecutor(PIECE_LOOKUPS) as pool:
            texts = list(pool.map(lambda i: self.detokenize([i]), unseen))
        self._pieces.update(zip(unseen, texts, strict=True))
        self.text_lookups += len(unseen)
        # The server skips control tokens when detokenizing: an empty text marks one.
        empty = {i for i, text in zip(unseen, texts, strict=True) if not text}
        if empty:
            self.special_token_ids = self.special_token_ids | empty

    def _learn_end(self, choice: dict) -> None:
        """A greedy path that stopped before its length stopped on the end-of-text token."""
        tokens = (choice.get("logprobs") or {}).get("tokens") or []
        if choice.get("finish_reason") == "stop" and tokens:
            match = TOKEN_KEY.match(str(tokens[-1]))
            if match:
                self.special_token_ids = self.special_token_ids | {int(match.group(1))}

    def _with_text(self, candidate: Candidate) -> Candidate:
        text = self._pieces[candidate.token_id]
        return Candidate(candidate.token_id, text, candidate.logprob)
