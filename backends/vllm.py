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
- Chains are streamed (`stream: true`): each position reaches the search as the server
  makes it (`StreamedChain`), and the search asks its new beams first, so their prompts
  join the step that makes the older chains' next tokens. A depth then costs about one
  step, where a whole reply cost a step per token of its longest chain (measured: 14-16
  steps for a 25-suggestion search on the starting stories, 22-40 before). A chain no beam
  follows any more is closed; once all of a reply's chains are, the connection is
  dropped and the server stops that request.
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

Token text. vLLM's API gives no token bytes: it decodes each token alone, and a token
holding part of a UTF-8 character decodes to U+FFFD. Text comes from `/detokenize`,
many ids in one request (joined by a separator token and split again), a block of
VOCAB_BLOCK ids at a time (the whole 49,152-token vocabulary here is three blocks, ~45
ms and ~210 kB each): a thread started with the backend fetches every block in turn
until one ends past the vocabulary, so a search rarely waits for one, and an id not yet
known brings its whole block. Where a context ends inside a character, a candidate's
text is the difference between decoding the context's open run of tokens with and
without it, so a character split over tokens is held back until its last byte arrives
and then appears whole, on the token that completes it, as an incremental detokenizer
shows it (`raw` is that text's UTF-8: the beam's joined pieces decode to exactly what
the server decodes for its ids, less an unfinished last character).

Control tokens: from `/tokenizer_info` when the server offers it
(`--enable-tokenizer-info-endpoint`); always also every token the server stops on. A
story's text never becomes one: `tokenize` cuts a control token's name apart.

Usage: `forward_calls` counts every HTTP round trip (completions and text look-ups made
on the searching thread); `prefill_tokens` are prompt tokens less those the server
reports as cached (it reports them with `--enable-prompt-tokens-details`, and for one
prompt of a request only: the first streamed, the last otherwise, so for many prompts
this overstates; the server's /metrics are exact); `model_tokens` adds the completion
tokens. A reply dropped before its usage came counts what was sent and received.

The logprobs limit: the server's `--max-logprobs` (default 20) is not advertised, so a
search asks for what it needs; a request over the limit is refused with the limit in
its message, which is learnt (and logged as a warning) and the request asked again.

Replies are checked field by field where they are read (`backends.replies`): a token id
must lie in the vocabulary (below MAX_VOCAB, since vLLM does not say its size, so a
look-up never grows past it), a log-probability must be finite (-inf candidates are
dropped), and a wrong shape is an error naming the server and the field.

Owns: request shapes, parsing (a streamed reply's chunks, or one whole JSON body from a
server that does not stream), token text, the logprobs limit. Not: the search, HTTP
error wording and the reading of a stream (`backends.http`).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

from backends import replies
from backends.base import (
    BackendError,
    Candidate,
    Chain,
    Continuation,
    GreedyPathBackend,
    TokenAlternatives,
)
from backends.http import JsonClient, expect

log = logging.getLogger(__name__)

TOKEN_KEY = re.compile(r"^token_id:(-?\d+)$")
PROMPT_KEY = re.compile(r"^(?:token_id:)?(\d+)$")  # prompt_logprobs keys: ids, maybe prefixed
LIMIT = re.compile(r"max(?:imum)? allowed:? (\d+)")
SEPARATOR = "\x1f"  # ASCII unit separator: its byte token never merges with a neighbour
REPLACEMENT = "\ufffd"  # what a lone token holding part of a character decodes to
MAX_RUN = 8  # tokens kept in an open run (a character has at most 4 bytes)
PARALLEL_LOOKUPS = 8  # /detokenize calls at once when the server has no separator token
POOL = 32  # connections kept: each depth of a search may hold a stream open a while
VOCAB_BLOCK = 16384  # ids whose texts one look-up brings (ids past the vocabulary: "")
MAX_VOCAB = 1 << 20  # no served vocabulary is this large (the largest are ~262k tokens)
SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
                "mask_token", "additional_special_tokens", "extra_special_tokens")  # fmt: skip

Ids = tuple[int, ...]


class VLLMBackend(GreedyPathBackend):
    """vLLM at `url` (e.g. http://127.0.0.1:8000); `model` defaults to the first served."""

    name = "vllm"
    prefers_chains = True  # the tokens a depth-by-depth search would read again

    def __init__(self, url: str, *, model: str | None = None, timeout: float = 60.0):
        super().__init__()
        self.client = JsonClient(url, backend=self.name, timeout=timeout, pool=POOL)
        self._model, self._context_length = self._served_model(model)
        self.max_logprobs: int | None = None  # the server's --max-logprobs, once learnt
        self._pieces: dict[int, str] = {}  # each id decoded alone
        self._run_texts: dict[Ids, str] = {}  # open runs decoded, with and without a token
        self._local = threading.local()  # look-ups counted per thread, as `stats` are
        self._separator = self._separator_id()
        self.special_token_ids = self._control_tokens()
        self._lookups = threading.Lock()  # one look-up at a time: a search waits for one ahead
        threading.Thread(target=self._prefetch, name="lloom-vllm-texts", daemon=True).start()

    # -- Backend ---------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self._model

    @property
    def url(self) -> str:
        return self.client.base_url

    @property
    def text_lookups(self) -> int:
        """/detokenize round trips this thread made for token text (in `stats` too); those
        made ahead on the backend's own thread count in neither."""
        return getattr(self._local, "lookups", 0)

    @property
    def context_length(self) -> int | None:
        return self._context_length

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
            replies.token_id(t, self.client.error, f"/tokenize tokens[{i}]", MAX_VOCAB)
            for i, t in enumerate(tokens)
        ]

    def detokenize(self, ids: list[int]) -> str:
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
        if not 1 <= start < len(ids):
            raise self.client.error(f"positions {start}..{len(ids) - 1} hold no token after text")
        k = max(1, min(k, self.max_logprobs or k))
        body = {"model": self._model, "prompt": list(ids), "max_tokens": 1, "temperature": 0,
                "prompt_logprobs": k}  # fmt: skip
        reply = self._ask(body, k)
        if reply is None:
            return self.alternatives(ids, k, start=start)
        self._count(reply)
        choices = reply.get("choices") if isinstance(reply, dict) else None
        expect(isinstance(choices, list) and len(choices) == 1 and isinstance(choices[0], dict),
               self.client, "expected one choice")  # fmt: skip
        positions = choices[0].get("prompt_logprobs")
        expect(isinstance(positions, list) and len(positions) == len(ids), self.client,
               "no prompt_logprobs for every prompt token")  # fmt: skip
        scored = [self._prompt_position(positions[i], ids[i], k) for i in range(start, len(ids))]
        contexts = [list(ids[:i]) for i in range(start, len(ids))]
        # The story's own token is spelled with the top-k, after the same context.
        asked = [[[*top, Candidate(ids[i], "", own)]] for i, (top, own) in enumerate(scored, start)]
        spelled = self._spell(contexts, asked)
        return [
            TokenAlternatives(i, ids[i], chain[0][-1].text, own, chain[0][:-1])
            for i, ((_, own), chain) in enumerate(zip(scored, spelled, strict=True), start)
        ]

    def _prompt_position(
        self, entry: object, token_id: int, k: int
    ) -> tuple[list[Candidate], float | None]:
        """(top-k without text, log-prob of the prompt's own token) from one entry:
        {id: {logprob, rank, decoded_token}}, the prompt's token among them. A -inf
        log-prob leaves its token out of the top-k (the own token's is then unknown)."""
        expect(isinstance(entry, dict) and entry, self.client, "an empty prompt_logprobs entry")
        found: dict[int, float | None] = {}
        for key, value in entry.items():
            match = PROMPT_KEY.match(str(key))
            expect(match is not None and isinstance(value, dict) and "logprob" in value,
                   self.client,
                   f"a prompt_logprobs entry {key!r} without an id and a log-prob")  # fmt: skip
            what = f"prompt_logprobs[{key!r}]"
            token = replies.token_id(int(match.group(1)), self.client.error, what, MAX_VOCAB)
            found[token] = replies.logprob(value["logprob"], self.client.error, f"{what}.logprob")
        expect(token_id in found, self.client, "prompt_logprobs without the prompt's own token")
        finite = [(i, lp) for i, lp in found.items() if lp is not None]
        top = sorted(finite, key=lambda item: (-item[1], item[0]))[:k]
        return [Candidate(i, "", lp) for i, lp in top], found[token_id]

    # -- start-up --------------------------------------------------------------------
    def _served_model(self, wanted: str | None) -> tuple[str, int | None]:
        reply = self.client.get("/v1/models")
        models = reply.get("data") if isinstance(reply, dict) else None
        expect(isinstance(models, list) and models and all(isinstance(m, dict) for m in models),
               self.client, "/v1/models lists no model")  # fmt: skip
        for entry in models:
            if wanted is None or entry.get("id") == wanted:
                expect(isinstance(entry.get("id"), str), self.client, "a model without an id")
                length = entry.get("max_model_len")
                return entry["id"], replies.count(length, self.client.error,
                                                  "/v1/models max_model_len")  # fmt: skip
        served = ", ".join(str(m.get("id")) for m in models)
        raise self.client.error(
            f"model {wanted!r} is not served here (VLLM_MODEL); it serves {served}"
        )

    def _separator_id(self) -> int | None:
        """The token that is the separator character alone (the last of its tokenization:
        SentencePiece puts a word-start piece first), or None: then token text is looked
        up one id per request, in parallel."""
        ids = self.tokenize(SEPARATOR)
        if ids and self.detokenize(ids[-1:]) == SEPARATOR:
            return ids[-1]
        log.info("vLLM at %s: no separator token; token text is looked up per id", self.url)
        return None

    def _control_tokens(self) -> frozenset[int]:
        """Special tokens named by the server's tokenizer, when it says (an optional
        endpoint); the tokens it stops on are added as they are met."""
        try:
            info = self.client.get("/tokenizer_info")
        except BackendError as e:
            log.info("%s; control tokens are learnt when the server stops on them", e)
            return frozenset()
        return frozenset(special_ids(info)) if isinstance(info, dict) else frozenset()

    # -- completions -------------------------------------------------------------------
    def _complete(self, contexts: list[list[int]], k: int, length: int, stops=()) -> list[Chain]:
        """Top-k at each of `length` greedy positions, for every context, in one request;
        a path ends early on a token whose text holds one of `stops` (that token's
        log-probs still come back)."""
        chains = self._stream(contexts, k, length, stops)
        try:
            return [list(chain) for chain in chains]
        finally:
            for chain in chains:
                chain.close()

    def greedy_chains(self, contexts, k, lengths, *, stops=()):
        """Chains whose positions arrive as the server makes them (`StreamedChain`): one
        request per distinct length (a search's depth asks one length for all)."""
        chains: list = [None] * len(contexts)
        for length in sorted(set(lengths)):
            rows = [i for i, n in enumerate(lengths) if n == length]
            streamed = self._stream([contexts[i] for i in rows], k, length, stops)
            for i, chain in zip(rows, streamed, strict=True):
                chains[i] = chain
        return chains

    def _stream(self, contexts: list[list[int]], k: int, length: int, stops=()) -> list:
        """One streamed request for all `contexts`; a `StreamedChain` for each."""
        if not contexts:
            return []
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
            return self._stream(contexts, k, length, stops)
        self.stats.add(forward_calls=1)
        reply = _StreamedReply(self, contexts, k, events)
        return [StreamedChain(reply, row) for row in range(len(contexts))]

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
        usage = reply.get("usage") if isinstance(reply, dict) else None
        self._count_tokens(usage)
        self.stats.add(forward_calls=1)

    def _count_tokens(self, usage: object) -> None:
        usage = usage if isinstance(usage, dict) else {}
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else 0
        prompt = max(_count_of(usage.get("prompt_tokens")) - _count_of(cached), 0)
        completion = _count_of(usage.get("completion_tokens"))
        self.stats.add(model_tokens=prompt + completion, prefill_tokens=prompt)

    def _ranked(self, position: object, k: int) -> list[Candidate]:
        expect(isinstance(position, dict) and position, self.client, "an empty top_logprobs entry")
        out = []
        for key, value in position.items():
            logprob = replies.logprob(value, self.client.error, f"top_logprobs[{key!r}]")
            if logprob is not None:  # -inf: a token the model rules out
                out.append(Candidate(self._token_id(key), "", logprob))
        expect(bool(out), self.client, "no finite log-probability in a top_logprobs entry")
        out.sort(key=lambda c: (-c.logprob, c.token_id))  # ties: the lower id, as argmax
        return out[:k]  # the sampled token may come on top of the k asked for

    def _token_id(self, key: object) -> int:
        match = TOKEN_KEY.match(str(key))
        expect(match is not None, self.client, f"token {key!r} is not 'token_id:N'")
        return replies.token_id(int(match.group(1)), self.client.error, f"token {key!r}",
                                MAX_VOCAB)  # fmt: skip

    # -- token text ----------------------------------------------------------------------
    def _spell(self, contexts: list[list[int]], chains: list[Chain]) -> list[Chain]:
        """Give every candidate its text: look-ups only for ids never seen (a block at a
        time) and for the rare open runs (a context ending mid-character)."""
        ids = {c.token_id for chain in chains for top in chain for c in top}
        ids.update(i for ctx in contexts for i in ctx[-MAX_RUN:])
        self._look_up_pieces(ids)
        steps = [
            list(zip(chain, self._runs(ctx, chain), strict=True))
            for ctx, chain in zip(contexts, chains, strict=True)
        ]  # (top-k, open run before it) at every position
        runs = {run for chain in steps for _, run in chain if run}
        runs |= {run + (c.token_id,) for chain in steps for top, run in chain if run for c in top}
        todo = sorted(run for run in runs if run not in self._run_texts)
        if todo:
            self._run_texts.update(zip(todo, self._decode_each(todo), strict=True))
        return [[[self._spelled(run, c) for c in top] for top, run in chain] for chain in steps]

    def _runs(self, context: list[int], chain: Chain) -> list[Ids]:
        """The open run before each position of a chain: the trailing tokens whose text
        ends inside a character (empty almost always)."""
        run: Ids = ()
        for i in context[-MAX_RUN:]:
            run = self._extended(run, i)
        out = []
        for top in chain:
            out.append(run)
            run = self._extended(run, top[0].token_id)
        return out

    def _extended(self, run: Ids, token_id: int) -> Ids:
        if self._pieces[token_id].endswith(REPLACEMENT):
            return (run + (token_id,))[-MAX_RUN:]
        return ()

    def _spelled(self, run: Ids, candidate: Candidate) -> Candidate:
        """The text `candidate` adds after `run`: complete characters only."""
        if run:
            before = _settled(self._run_texts[run])
            after = _settled(self._run_texts[run + (candidate.token_id,)])
            text = after[len(before) :] if after.startswith(before) else after
        else:
            text = _settled(self._pieces[candidate.token_id])
        return Candidate(candidate.token_id, text, candidate.logprob, text.encode("utf-8"))

    def _prefetch(self) -> None:
        """Every token's text, a block at a time from the commonest (a vocabulary numbers
        them first), looked up while the backend waits for its first search or alongside
        that search's first request, until a block ends past the vocabulary (ids there
        have no text). A failure is left to a search's own look-up, which reports it."""
        try:
            for start in range(0, MAX_VOCAB, VOCAB_BLOCK):
                self._look_up_pieces({start})
                if not self._pieces.get(start + VOCAB_BLOCK - 1):
                    return
        except BackendError as e:
            log.debug("token texts not fetched ahead: %s", e)

    def _look_up_pieces(self, ids: set[int]) -> None:
        """Texts for the ids not seen before, with every other id of their blocks (a
        vocabulary is numbered from 0; its end is not advertised), in one request."""
        if all(i in self._pieces for i in ids):
            return
        with self._lookups:
            self._look_up_blocks(ids)

    def _look_up_blocks(self, ids: set[int]) -> None:
        unseen = sorted(i for i in ids if i not in self._pieces)
        if not unseen:
            return
        blocks = sorted({i // VOCAB_BLOCK for i in unseen})  # ids are < MAX_VOCAB: checked
        wanted = [
            i
            for block in blocks
            for i in range(block * VOCAB_BLOCK, (block + 1) * VOCAB_BLOCK)
            if i not in self._pieces and i != self._separator
        ]
        texts = self._decode_joined([(i,) for i in wanted]) if self._separator is not None else None
        if texts is None:  # a token in the block holds the separator: only the ids needed
            wanted = unseen
            texts = self._decode_each([(i,) for i in wanted])
        self._pieces.update(zip(wanted, texts, strict=True))
        if self._separator is not None:
            self._pieces[self._separator] = SEPARATOR
        # A server that skips control tokens when decoding shows them as nothing (and so
        # are ids past the vocabulary, which no reply names).
        empty = {i for i in wanted if not self._pieces[i]}
        if empty:
            self.special_token_ids = self.special_token_ids | empty

    def _decode_each(self, sequences: list[Ids]) -> list[str]:
        """Each sequence's text: in one request where the separator allows, else one
        request per sequence, in parallel."""
        texts = self._decode_joined(sequences) if self._separator is not None else None
        if texts is None:
            with ThreadPoolExecutor(PARALLEL_LOOKUPS) as pool:
                texts = list(pool.map(lambda s: self.detokenize(list(s)), sequences))
            self._spent_lookups(len(sequences))
        return texts

    def _spent_lookups(self, round_trips: int) -> None:
        self.stats.add(forward_calls=round_trips)
        self._local.lookups = self.text_lookups + round_trips

    def _decode_joined(self, sequences: list[Ids]) -> list[str] | None:
        """One /detokenize for all: separator, seq, separator, seq, ..., separator.
        None when the text does not split back into as many parts."""
        joined = [self._separator]
        for sequence in sequences:
            joined += [*sequence, self._separator]
        parts = self.detokenize(joined).split(SEPARATOR)
        self._spent_lookups(1)
        if len(parts) != len(sequences) + 2 or parts[0] or parts[-1]:
            return None  # a token held the separator character
        return parts[1:-1]

    # -- sampling (ramify) -------------------------------------------------------------
    def sample(self, context, *, n, temperature, min_p, max_tokens, seed=None):
        """One request with `n` choices: the prefix cache reads the story once, and with a
        seed choice i is drawn with seed + i. vLLM's own sampler scales by temperature
        before min-p (llama.cpp and MLX filter first: at temperatures below 1 vLLM keeps
        fewer tokens). `logprobs: 0` gives each drawn token's raw log-prob (the server's
        default `--logprobs-mode raw_logprobs`)."""
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
        for i, choice in enumerate(choices):
            replies.of_type(choice, dict, self.client.error, f"choices[{i}]")
            replies.of_type(choice.get("index", 0), int, self.client.error, f"choices[{i}].index")
        return [self._continuation(c) for c in sorted(choices, key=lambda c: c.get("index", 0))]

    def _continuation(self, choice: dict) -> Continuation:
        """A choice's tokens up to the first control token; its text is the server's,
        or looked up when a control token cut it short. A drawn token's log-prob must be
        finite (one the model ruled out, -inf, cannot have been drawn)."""
        logprobs = choice.get("logprobs")
        logprobs = logprobs if isinstance(logprobs, dict) else {}
        tokens = [self._token_id(t) for t in logprobs.get("tokens") or []]
        values = logprobs.get("token_logprobs") or []
        expect(isinstance(values, list) and len(values) == len(tokens), self.client,
               "a choice without the drawn tokens' log-probs")  # fmt: skip
        values = [replies.drawn_logprob(v, self.client.error, f"token_logprobs[{i}]")
                  for i, v in enumerate(values)]  # fmt: skip
        if choice.get("finish_reason") == "stop" and tokens:  # it stopped on a control token
            self.special_token_ids = self.special_token_ids | {tokens[-1]}
        kept = next((i for i, t in enumerate(tokens) if t in self.special_token_ids), len(tokens))
        if kept < len(tokens) or not isinstance(choice.get("text"), str):
            text = self.detokenize(tokens[:kept])
            self.stats.add(forward_calls=1)
        else:
            text = choice["text"]
        return Continuation(tuple(tokens[:kept]), text, float(sum(values[:kept])))


class _StreamedReply:
    """One completions request's reply as it arrives: each prompt's positions (top-k
    without text), checked as they come. Everything here runs on the thread that asked
    (a reader thread only receives the events), so usage is counted where it belongs.

    A reply is a stream of chunks (one choice each, `index` naming its prompt) or, from
    a server that ignores `stream`, one JSON body holding every choice whole."""

    def __init__(self, backend: VLLMBackend, contexts: list[list[int]], k: int, events):
        self.backend, self.contexts, self.k, self.events = backend, contexts, k, events
        rows = len(contexts)
        self.positions: list[Chain] = [[] for _ in range(rows)]
        self.ended = [False] * rows  # the server finished the prompt's path
        self.diverged = [False] * rows  # its path left our top token (a tie): no more
        self.last: list[int | None] = [None] * rows  # the last token drawn
        self.open = rows  # chains not yet closed
        self.usage: object = None
        self.error = backend.client.error

    def over(self, row: int) -> bool:
        return self.ended[row] or self.diverged[row] or self.events.over

    def pull(self) -> None:
        """Take the next event (waiting for it); at the reply's end, check every prompt
        was answered."""
        event = self.events.next()
        if event is None:
            for row in range(len(self.contexts)):
                self._check_answered(row)
            return
        replies.of_type(event, dict, self.error, "a /v1/completions reply")
        if "usage" in event:
            self.usage = event["usage"]
        choices = event.get("choices")
        if not self.events.streamed:  # one body: every choice, in index order
            expect(isinstance(choices, list) and len(choices) == len(self.contexts),
                   self.backend.client, f"expected {len(self.contexts)} choices")  # fmt: skip
        replies.of_type(choices, list, self.error, "choices")
        for i, choice in enumerate(choices):
            replies.of_type(choice, dict, self.error, f"choices[{i}]")
            replies.of_type(choice.get("index", 0), int, self.error, f"choices[{i}].index")
        ordered = sorted(choices, key=lambda c: c.get("index", 0))
        for i, choice in enumerate(ordered):
            row = choice.get("index", 0) if self.events.streamed else i
            expect(0 <= row < len(self.contexts), self.backend.client,
                   f"choices[{i}].index {row} names no prompt sent")  # fmt: skip
            self._take(row, choice)

    def _take(self, row: int, choice: dict) -> None:
        logprobs = choice.get("logprobs")
        logprobs = logprobs if isinstance(logprobs, dict) else {}
        positions = logprobs.get("top_logprobs")
        expect(isinstance(positions, list) and (positions or self.events.streamed),
               self.backend.client,
               "a choice without top_logprobs: does the server allow logprobs?")  # fmt: skip
        tops = [self.backend._ranked(position, self.k) for position in positions]
        tokens = replies.field(logprobs, "tokens", list, self.error, "a choice's logprobs")
        expect(len(tokens) == len(positions), self.backend.client,
               f"{len(tokens)} logprobs.tokens for {len(positions)} top_logprobs")  # fmt: skip
        for top, token in zip(tops, tokens, strict=True):
            drawn = self.backend._token_id(token)
            self.last[row] = drawn
            if self.diverged[row]:
                continue
            self.positions[row].append(top)
            if drawn != top[0].token_id:  # a tie broken the other way: the path went on
                self.diverged[row] = True  # from another token than our top one
        if choice.get("finish_reason") is not None:
            self.ended[row] = True
            self._check_answered(row)
            stopped_on_token = choice["finish_reason"] == "stop" and not isinstance(
                choice.get("stop_reason"), str
            )
            if stopped_on_token and self.last[row] is not None:  # a control token, not one
                self.backend.special_token_ids |= {self.last[row]}  # of our stop strings

    def _check_answered(self, row: int) -> None:
        expect(bool(self.positions[row]), self.backend.client,
               "a choice without top_logprobs: does the server allow logprobs?")  # fmt: skip

    def release(self) -> None:
        """One chain is done with; once all are, the reply is settled: read to its end
        when the server has finished every path (its usage comes last), else dropped,
        which stops the server computing paths no beam will use."""
        self.open -= 1
        if self.open:
            return
        if all(self.ended[row] or self.diverged[row] for row in range(len(self.contexts))):
            while not self.events.over:
                self.pull()
        self.events.close()
        if isinstance(self.usage, dict):
            self.backend._count_tokens(self.usage)
        else:  # dropped before its usage came: what was sent and received, none cached
            prompt = sum(len(ctx) for ctx in self.contexts)
            completion = sum(len(p) for p in self.positions)
            self.backend.stats.add(model_tokens=prompt + completion, prefill_tokens=prompt)


class StreamedChain(Sequence):
    """The top-k at successive positions of one prompt's greedy path, spelled, as they
    arrive: indexing or iterating waits for the positions needed and no more, and
    `len()` waits for the path's end. `close()` when done with it (a search drops a
    beam's chain once the beam ends or leaves the path)."""

    def __init__(self, reply: _StreamedReply, row: int):
        self.reply, self.row = reply, row
        self.spelled: Chain = []
        self.closed = False

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        arrived = self.reply.positions[self.row]
        while index >= len(arrived) and not self.reply.over(self.row):
            self.reply.pull()
        if not 0 <= index < len(arrived):
            raise IndexError(index)
        if index >= len(self.spelled):
            context = self.reply.contexts[self.row] + [top[0].token_id for top in self.spelled]
            new = arrived[len(self.spelled) : index + 1]
            [spelled] = self.reply.backend._spell([context], [new])
            self.spelled += spelled
        return self.spelled[index]

    def __len__(self) -> int:
        while not self.reply.over(self.row):
            self.reply.pull()
        return len(self.reply.positions[self.row])

    def known_length(self) -> int | None:
        """The path's length once its end has arrived, else None (this does not wait)."""
        return len(self.reply.positions[self.row]) if self.reply.over(self.row) else None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.reply.release()


def special_ids(info: dict) -> set[int]:
    """Ids of the special tokens that `/tokenizer_info` names; its `added_tokens_decoder`
    maps ids to their text (or to {content, special})."""
    names = {name for key in SPECIAL_KEYS for name in _names(info.get(key))}
    added = info.get("added_tokens_decoder")
    out = set()
    for token_id, entry in added.items() if isinstance(added, dict) else ():
        flagged = isinstance(entry, dict) and entry.get("special") is True
        if (flagged or set(_names(entry)) & names) and str(token_id).isdigit():
            out.add(int(token_id))
    return out


def _names(value: object) -> list[str]:
    """Token texts in a tokenizer-config value: a string, {content}, or lists/maps of them."""
    if isinstance(value, dict):
        return _names(value["content"]) if "content" in value else _names(list(value.values()))
    if isinstance(value, list):
        return [name for item in value for name in _names(item)]
    return [value] if isinstance(value, str) and value else []


def _settled(text: str) -> str:
    """Text less a trailing incomplete character (shown as U+FFFD)."""
    return text.rstrip(REPLACEMENT)


def _count_of(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0
