"""The vLLM backend: a thin client of vLLM's OpenAI-compatible server.

One `POST /v1/completions` carries a whole depth's new beams as token-id prompts
(`prompt: [[ids], [ids], ...]`) with `logprobs: k`, `temperature: 0` and
`return_tokens_as_token_ids` (top-logprob keys come back as "token_id:N"; plain token
strings collide). Token ids are the server's own (`/tokenize`).

Where a search's time goes (bench/bench_vllm.py; the server's /metrics count prompt
tokens, prefix-cache hits, generated tokens and forward passes): on a small CPU server
each forward pass (step) costs a fixed time on top of its tokens', and a step makes one
token for every running sequence. So:
- Greedy chains by default: `max_tokens` up to the remaining depth answers a beam's whole
  greedy path in one sequence, each token computed once; only split tokens start new
  sequences. Asked one position a depth instead, every beam's context is read again at
  every depth, since a short context is never in the prefix cache (below).
- Chains are streamed (`stream: true`, `backends.vllm_chains`): the search asks its new
  beams first, so their prompts join the older chains' steps, where a whole reply cost a
  step per token of its longest chain. A depth where new beams start still costs two
  steps: the server makes the older chains' next step while the new beams' request is
  on its way (it does not wait for a client). Measured: a request sent as a chain's 5th
  token arrived got its first token with the chain's 7th, 140 ms later (steps of ~65 ms).
  So a search takes about twice its tree's depth in steps (14 for a 7-deep tree).
- A chain stops where the beam does: the search's auto-stop strings go as `stop` (the
  stop token's log-probs still come back, its `stop_reason` naming the string), and at
  an end-of-text token (no `ignore_eos`). A chain may be shorter than asked.
- The prefix cache reuses whole blocks only: on CPU a multiple of 32 tokens, 128 unless
  the server is started with `--block-size 32` (recommended; 16 fails to start). So
  each new sequence re-reads its context's last partial block: up to 31 tokens of the
  story's end plus its path. That bounds what a search costs the server: a story under
  32 tokens is never reused, and each split beam reads it again (3-6x the least on the
  starting stories); a longer story costs its tail (its length mod 32) per new beam.
- Not levers, measured: the number of log-probs asked (1, 5 or 20 cost the same time:
  the server decodes each entry's text, but that is small beside a step), and binding
  both cores to the model's threads (`VLLM_CPU_OMP_THREADS_BIND=0-1`; vLLM keeps one of
  two cores for its front end): 2-4x slower on a loaded 2-core machine.

Token text: looked up from `/detokenize`, a vocabulary block at a time, ahead on a thread
of its own (`backends.vllm_texts`).

Control tokens: from `/tokenizer_info` when the server offers it (`backends.vllm_model`);
always also every token the server stops on. A story's text never becomes one: `tokenize`
cuts a control token's name apart.

Usage: `forward_calls` counts every HTTP round trip (completions and text look-ups made
on the searching thread); `prefill_tokens` are prompt tokens less those the server
reports as cached (it reports them with `--enable-prompt-tokens-details`, and for one
prompt of a request only: the first streamed, the last otherwise, so for many prompts
this overstates; the server's /metrics are exact); `model_tokens` adds the completion
tokens. A reply dropped before its usage came counts what was sent and received.

The logprobs limit: the server's `--max-logprobs` (default 20) is not advertised, so a
search asks for what it needs; a request over the limit is refused with the limit in
its message, which is learnt (and logged as a warning) and the request asked again.

A bias's ids (`top_logprobs_also`): after the top-k, one more request names them in
`logprob_token_ids` (raw log-probs over the whole vocabulary, at most 128 ids a
request; the field takes the place of the top-k, hence two requests). A server older
than the field answers the sampled token only: that is learnt, and the search told.

Replies are checked field by field where they are read (`backends.replies`): a token id
must lie in the vocabulary (`id_bound`, its size read at start by `backends.vllm_model`),
a log-probability must be finite (-inf candidates are dropped), and a wrong shape is an
error naming the server and the field.

Owns: the backend, request shapes, samples, control tokens met on the way, the logprobs
limit. Not: the search, what the server says of its model at start
(`backends.vllm_model`), reading a reply's chains and its usage (`backends.vllm_chains`),
reading a prompt's and named ids' log-probs (`backends.vllm_replies`), token text
(`backends.vllm_texts`), HTTP error wording and the reading of a stream (`backends.http`).
"""

from __future__ import annotations

import logging
import re
import threading
from itertools import pairwise

from backends import replies
from backends.base import Candidate, Continuation, Positions, TokenAlternatives
from backends.errors import BackendError
from backends.greedy_path import GreedyPathBackend
from backends.http import JsonClient, expect
from backends.vllm_chains import StreamedReply, count_usage, ordered_choices, token_id
from backends.vllm_model import served_model, special_ids, tokenizer_info, vocabulary_size
from backends.vllm_replies import named_logprobs, prompt_logprobs
from backends.vllm_texts import MAX_VOCAB, TokenTexts, separator_token
from weave.redaction import redacted

log = logging.getLogger(__name__)

LIMIT = re.compile(r"max(?:imum)? allowed:? (\d+)")
NAMED = 128  # ids one request may name in `logprob_token_ids` (vLLM's MAX_LOGPROB_TOKEN_IDS)
POOL = 32  # connections kept: each depth of a search may hold a stream open a while


class VLLMBackend(GreedyPathBackend):
    """vLLM at `url` (e.g. http://127.0.0.1:8000); `model` defaults to the first served."""

    name = "vllm"

    def __init__(self, url: str, *, model: str | None = None, timeout: float = 60.0):
        super().__init__()
        self.client = JsonClient(url, backend=self.name, timeout=timeout, pool=POOL)
        self._model, self._context_length = served_model(self.client, model)
        info = tokenizer_info(self.client)
        self.vocab_size = vocabulary_size(self.client, self._model, info)
        self.max_logprobs: int | None = None  # the server's --max-logprobs, once learnt
        self.names_ids: bool | None = None  # whether it answers `logprob_token_ids`, once seen
        separator = separator_token(self.tokenize, self.detokenize, self.url)
        self.special_token_ids = frozenset(special_ids(info)) if info else frozenset()
        self._controls_lock = threading.Lock()  # searches and the look-ahead thread learn them
        self._texts = TokenTexts(
            self.detokenize, separator, stats=self.stats, learn_controls=self._learn_controls,
            id_bound=self.id_bound,
        )  # fmt: skip

    # -- Backend ---------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self._model

    @property
    def url(self) -> str:
        return redacted(self.client.base_url)

    @property
    def context_length(self) -> int | None:
        return self._context_length

    @property
    def id_bound(self) -> int:
        """Every token id a reply names is below this: the vocabulary's size, if known."""
        return self.vocab_size or MAX_VOCAB

    def tokenize(self, text: str) -> list[int]:
        """The server's ids for `text`, read as text: its /tokenize reads a control token's
        name ("<|im_start|>") as that token, so a text holding one is cut inside each such
        name and tokenized piece by piece."""
        ids = self._tokenize(text)
        controls = {i for i in ids if i in self.special_token_ids}
        if not controls:
            return ids
        names = {self.detokenize([i]) for i in controls}
        cuts = {m.start() + 1 for name in names if name for m in re.finditer(re.escape(name), text)}
        bounds = [0, *sorted(cuts), len(text)]
        ids = [i for a, b in pairwise(bounds) for i in self._tokenize(text[a:b])]
        expect(not set(ids) & self.special_token_ids, self.client,
               "/tokenize reads control tokens in this text that cannot be cut apart")  # fmt: skip
        return ids

    def _tokenize(self, text: str) -> list[int]:
        reply = self.client.post(
            "/tokenize", {"model": self._model, "prompt": text, "add_special_tokens": False}
        )
        tokens = replies.field(reply, "tokens", list, self.client.error, "/tokenize")
        return [
            replies.token_id(t, self.client.error, f"/tokenize tokens[{i}]", self.id_bound)
            for i, t in enumerate(tokens)
        ]

    def detokenize(self, ids: list[int]) -> str:
        self.check_ids(ids)
        reply = self.client.post("/detokenize", {"model": self._model, "tokens": list(ids)})
        return replies.field(reply, "prompt", str, self.client.error, "/detokenize")

    def close(self) -> None:
        self.client.close()

    def alternatives(
        self, ids: list[int], k: int, *, start: int = 1
    ) -> list[TokenAlternatives] | None:
        """vLLM's `prompt_logprobs`: one request for the story with `max_tokens: 1`. The
        server evaluates the whole prompt for it (log-probs of cached positions are not
        kept), so this costs a prefill of the story, not of the positions asked."""
        self.check_ids(ids)
        if not 1 <= start < len(ids):
            raise self.client.error(f"positions {start}..{len(ids) - 1} hold no token after text")
        k = max(1, min(k, self.max_logprobs or k))
        body = {"model": self._model, "prompt": list(ids), "max_tokens": 1, "temperature": 0,
                "prompt_logprobs": k}  # fmt: skip
        reply = self._ask(body, k)
        if reply is None:
            return self.alternatives(ids, k, start=start)
        self._count(reply)
        scored = prompt_logprobs(reply, ids, start, k, self.client, self.id_bound)
        contexts = [list(ids[:i]) for i in range(start, len(ids))]
        # The story's own token is spelled with the top-k, after the same context.
        asked = [[[*top, Candidate(ids[i], "", own)]] for i, (top, own) in enumerate(scored, start)]
        spelled = self._texts.spell(contexts, asked)
        return [
            TokenAlternatives(i, ids[i], chain[0][-1].text, own, chain[0][:-1])
            for i, ((_, own), chain) in enumerate(zip(scored, spelled, strict=True), start)
        ]

    def top_logprobs_also(self, contexts, k, also):
        """The top k (`top_logprobs`), then the asked ids not among them, from a second
        request: vLLM's `logprob_token_ids` gives named ids' log-probs over the whole
        vocabulary (raw, as `logprobs`), one list for every prompt of a request (the union
        is asked, NAMED at a time; each context keeps its own). A server that does not
        answer it (older than the field) says None, once and for later calls."""
        if self.names_ids is False:
            return None
        tops = self.top_logprobs(contexts, k)
        missing = [
            sorted(set(ids) - {c.token_id for c in top})
            for top, ids in zip(tops, also, strict=True)
        ]
        rows = [r for r, ids in enumerate(missing) if ids]
        if not rows:
            return tops
        union = sorted(set().union(*(missing[r] for r in rows)))
        self.check_ids(union)
        prompts = [list(contexts[r]) for r in rows]
        found: list[dict[int, float]] = [{} for _ in rows]
        for start in range(0, len(union), NAMED):
            named = union[start : start + NAMED]
            for i, weighed in enumerate(self._named(prompts, named)):
                found[i].update(weighed)
        if self.names_ids is False:
            return None
        extras = [
            sorted((Candidate(t, "", lp) for t, lp in got.items() if t in set(missing[r])),
                   key=lambda c: (-c.logprob, c.token_id))
            for r, got in zip(rows, found, strict=True)
        ]  # fmt: skip
        spelled = self._texts.spell(prompts, [[extra] for extra in extras])
        out = list(tops)
        for r, [extra] in zip(rows, spelled, strict=True):
            out[r] = tops[r] + extra
        return out

    def _named(self, prompts: list[list[int]], named: list[int]) -> list[dict[int, float]]:
        """Each prompt's next-token log-probs of the ids `named` ({id: log-prob})."""
        body = {"model": self._model, "prompt": prompts, "max_tokens": 1, "temperature": 0,
                "logprobs": 1, "logprob_token_ids": named,
                "return_tokens_as_token_ids": True}  # fmt: skip
        reply = self.client.post("/v1/completions", body)
        self._count(reply)
        out = named_logprobs(reply, len(prompts), self.client, self.id_bound)
        answered = any(set(named) & got.keys() for got in out)
        if self.names_ids is None:
            self.names_ids = answered
        return out

    def _learn_controls(self, ids: set[int]) -> None:
        """Control tokens met on the way: those the server stops on, or decodes to nothing.
        Under a lock: two threads adding at once would otherwise lose one's tokens."""
        with self._controls_lock:
            self.special_token_ids = self.special_token_ids | ids

    # -- completions -------------------------------------------------------------------
    def _complete(
        self, contexts: list[list[int]], k: int, length: int, stops=()
    ) -> list[Positions]:
        """Top-k at each of `length` greedy positions, for every context, in one request;
        a path ends early on a token whose text holds one of `stops` (that token's
        log-probs still come back)."""
        chains = self._chains(contexts, k, length, stops)
        try:
            return [list(chain) for chain in chains]
        finally:
            for chain in chains:
                chain.close()

    def _chains(self, contexts: list[list[int]], k: int, length: int, stops=()) -> list:
        """One streamed request for all `contexts`; a `StreamedChain` for each, whose
        positions arrive as the server makes them."""
        if not contexts:
            return []
        for context in contexts:
            self.check_ids(context)
        k = max(1, min(k, self.max_logprobs or k))
        body = {
            "model": self._model,
            "prompt": [list(ctx) for ctx in contexts],
            "max_tokens": length,
            "logprobs": k,
            "temperature": 0,
            "return_tokens_as_token_ids": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if stops and length > 1:
            body["stop"] = list(stops)
        events = self._ask(body, k, stream=True)
        if events is None:
            return self._chains(contexts, k, length, stops)
        self.stats.add(forward_calls=1)
        reply = StreamedReply(events, contexts, k, client=self.client, stats=self.stats,
                              texts=self._texts, learn_controls=self._learn_controls,
                              id_bound=self.id_bound)  # fmt: skip
        return reply.chains()

    def _ask(self, body: dict, k: int, *, stream: bool = False):
        """POST a completions request asking k log-probs (its reply's events when
        `stream`); None when the server allows fewer (the limit is learnt: ask again,
        and fewer are asked)."""
        try:
            if not stream:
                return self.client.post("/v1/completions", body)
            events = self.client.open_events("/v1/completions", body)
            events.peek()  # a streamed reply reports a refused request as its first event
            return events
        except BackendError as e:
            limit = LIMIT.search(str(e))
            if not limit or int(limit.group(1)) >= k:
                raise
            self._learn_limit(int(limit.group(1)))
            return None

    def _learn_limit(self, limit: int) -> None:
        log.warning(
            "vLLM at %s allows %d logprobs (--max-logprobs); asking for that many; "
            "start it with a higher --max-logprobs for wider splits",
            self.url,
            limit,
        )
        self.max_logprobs = limit

    def _count(self, reply: object) -> None:
        count_usage(self.stats, reply.get("usage") if isinstance(reply, dict) else None)
        self.stats.add(forward_calls=1)

    # -- sampling (ramify) -------------------------------------------------------------
    def sample(self, context, *, n, temperature, min_p, max_tokens, seed=None):
        """One request with `n` choices: the prefix cache reads the story once, and with a
        seed choice i is drawn with seed + i. vLLM's own sampler scales by temperature
        before min-p (llama.cpp and MLX filter first: at temperatures below 1 vLLM keeps
        fewer tokens). `logprobs: 0` gives each drawn token's raw log-prob (the server's
        default `--logprobs-mode raw_logprobs`)."""
        self.check_ids(context)
        if temperature == 0 and n > 1:  # every draw is the greedy path (vLLM refuses n > 1)
            return n * self.sample(
                context, n=1, temperature=0, min_p=min_p, max_tokens=max_tokens, seed=seed
            )
        body = {
            "model": self._model,
            "prompt": list(context),
            "n": n,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "min_p": min_p,
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
        }
        if seed is not None:
            body["seed"] = seed
        reply = self.client.post("/v1/completions", body)
        self._count(reply)
        choices = reply.get("choices") if isinstance(reply, dict) else None
        expect(isinstance(choices, list) and len(choices) == n, self.client,
               f"expected {n} choices")  # fmt: skip
        return [self._continuation(c) for c in ordered_choices(choices, self.client)]

    def _continuation(self, choice: dict) -> Continuation:
        """A choice's tokens up to the first control token; its text is the server's,
        or looked up when a control token cut it short. A drawn token's log-prob must be
        finite (one the model ruled out, -inf, cannot have been drawn)."""
        logprobs = choice.get("logprobs")
        logprobs = logprobs if isinstance(logprobs, dict) else {}
        tokens = [token_id(t, self.client, self.id_bound) for t in logprobs.get("tokens") or []]
        values = logprobs.get("token_logprobs") or []
        expect(isinstance(values, list) and len(values) == len(tokens), self.client,
               "a choice without the drawn tokens' log-probs")  # fmt: skip
        values = [replies.drawn_logprob(v, self.client.error, f"token_logprobs[{i}]")
                  for i, v in enumerate(values)]  # fmt: skip
        if choice.get("finish_reason") == "stop" and tokens:  # it stopped on a control token
            self._learn_controls({tokens[-1]})
        kept = next((i for i, t in enumerate(tokens) if t in self.special_token_ids), len(tokens))
        if kept < len(tokens) or not isinstance(choice.get("text"), str):
            text = self.detokenize(tokens[:kept])
            self.stats.add(forward_calls=1)
        else:
            text = choice["text"]
        return Continuation(tuple(tokens[:kept]), text, float(sum(values[:kept])))
