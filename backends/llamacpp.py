"""The llama.cpp backend: a client of `llama-server`'s native `/completion`.

Prompts go as the server's own token ids (`/tokenize`; ids get no BOS from the server,
so one is prepended when the model wants it), with `n_probs`, `cache_prompt: true` and
`post_sampling_probs: false`, so the probabilities are the model's raw distribution.

Doing only the work the tree needs. A CPU server's cost is the tokens it evaluates
(`timings.prompt_n + predicted_n`); the least a search can cost is the story once plus
one token per tree node. Three levers, measured with bench/bench_llamacpp.py:
- Greedy chains by default: one prompt answers a beam's whole greedy
  path (`top_k: 1`, `n_predict` up to the remaining depth), each of its tokens evaluated
  once, in place, in its slot; only tokens that split start new prompts.
- Chains stop where the beam does: the search's auto-stop strings go as `stop`, so the
  server ends a path on the token holding '.' or ','. A whole reply drops that token's
  probabilities, so chains are streamed (`stream: true`), where every token's come.
  (The search also asks no further than the cap will let beams live.)
- Slots pinned (`id_slot`, `backends.llamacpp_slots`): each prompt goes to the slot that
  holds its parent's path, in an order that keeps shared prefixes in the cache and lets
  the server's prompt cache (`--cache-ram`) restore paths the slot left; the story is
  read once per search, not once per slot.
`--cache-reuse` (KV shifting of chunks found later in a prompt) does not fit a tree, whose
prompts differ only at the end; `n_keep` matters only when a context overflows.

A bias's ids (`top_logprobs_also`): `n_probs` reaches only the top, and the raw
probabilities ignore `logit_bias`, so each context's top-k request is followed in its
slot by one that lifts the ids by `logit_bias` with `post_sampling_probs` (the lifted
distribution's top), read back on the raw scale through a token both replies hold.

Replies are read, both shapes and every field checked, by `backends.llamacpp_replies`;
a token id must lie in the vocabulary, its size from `/v1/models` where the server says.

Owns: what each request asks, and what it cost. Not: the search, reading replies
(`backends.llamacpp_replies`), the tokenizer (`backends.llamacpp_tokens`), slot planning
(`backends.llamacpp_slots`), HTTP error wording (`backends.http`).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from backends import replies
from backends.base import (
    Candidate,
    Continuation,
    Positions,
    ThreadWanted,
    TokenAlternatives,
    Usage,
    token_texts,
)
from backends.greedy_path import GreedyPathBackend
from backends.http import JsonClient, expect
from backends.llamacpp_reading import read
from backends.llamacpp_replies import (
    chain_of,
    continuation,
    count_of,
    gathered,
    lifted,
    ordered,
    sampling_usage,
    timings_of,
    window_of,
)
from backends.llamacpp_slots import SlotBook
from backends.llamacpp_tokens import ServerTokens
from weave.redaction import redacted

log = logging.getLogger(__name__)

HEAL_N_PROBS = 1000  # candidates a healed depth asks for (`heal_k`)
LIFT = 20.0  # the logit bias that lifts a bias's ids into a reply (a bias weighs -20..20)
MAX_SLOTS = 1024  # a server's parallel slots (-np); past it /props is not believed
READ_APART = 512  # prompt tokens a slot has yet to read before a page reads them apart


class LlamaCppBackend(GreedyPathBackend):
    """llama-server at `url`."""

    name = "llamacpp"

    def __init__(self, url: str, *, timeout: float = 60.0):
        super().__init__()
        self.client = JsonClient(url, backend=self.name, timeout=timeout, pool=16)
        props = self.client.get("/props")
        expect(isinstance(props, dict), self.client, "/props is not an object")
        self._props = props
        self.slots = SlotBook(self._total_slots() or 0)
        self.tokens = ServerTokens(self.client, props)
        self.vocab_size = self.tokens.vocab_size
        self.special_token_ids = self.tokens.specials
        self._callers = ThreadWanted()  # per thread: its `cancellable` block's wanted()

    # -- Backend ---------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        path = str(self._props.get("model_path") or self._props.get("model_alias") or "?")
        return path.rsplit("/", 1)[-1]

    @property
    def url(self) -> str:
        return redacted(self.client.base_url)

    @property
    def context_length(self) -> int | None:
        return window_of(self._props, self.client.error)

    def _total_slots(self) -> int | None:
        return replies.count(
            self._props.get("total_slots"),
            self.client.error,
            "/props total_slots",
            most=MAX_SLOTS,
        )

    @property
    def heal_k(self) -> int:
        """A healed depth asks `n_probs` HEAL_N_PROBS: the tokens that agree with a typed
        word lie well within them. `logit_bias` cannot narrow the candidates instead: the
        probabilities the server reports are the raw distribution's, before any bias."""
        return HEAL_N_PROBS

    def tokenize(self, text: str) -> list[int]:
        return self.tokens.ids(text)

    def detokenize(self, ids: list[int]) -> str:
        self.check_ids(ids)
        return self.tokens.text(ids)

    def close(self) -> None:
        self.client.close()

    # -- a long story read apart -----------------------------------------------------
    def unread(self, context: list[int]) -> int:
        """The tokens the slot that would take `context` has yet to read, as far as this
        client knows (`SlotBook.unread`), when over READ_APART; else 0."""
        self.check_ids(context)
        left = self.slots.unread(self.tokens.bos + list(context))
        return left if left > READ_APART else 0

    def read_ahead(self, context: list[int], k: int, report: Callable[[int, int], None]) -> None:
        """The slot a search would use reads `context` now, one greedy token after it,
        the server's progress going to `report` (`backends.llamacpp_reading`); the search
        then finds it read. Stops, and so does the server, once this thread's
        `cancellable` block no longer wants it. READ_APART tokens or fewer left to read
        are left to the search: there is no progress to show."""
        if not self.unread(context):
            return
        prompt = self.tokens.bos + list(context)
        [work] = self.slots.plan([prompt])
        body = {"prompt": prompt, "n_predict": 1, "n_probs": k, "cache_prompt": True,
                "samplers": ["top_k"], "top_k": 1, "return_tokens": True}  # fmt: skip
        if work.slot is not None:
            body["id_slot"] = work.slot
        last = read(self.client, body, report, self._callers.wanted)
        timings = last.get("timings") if last else None
        if isinstance(timings, dict):
            prompt_n = count_of(timings.get("prompt_n"))
            self.stats.add(forward_calls=1, model_tokens=prompt_n + 1, prefill_tokens=prompt_n)
            self._held(prompt, last, prompt_n)

    def cancellable(self, wanted: Callable[[], bool]):
        """Within this block, this thread's reads ahead stop with `Cancelled` (the
        connection dropped: the server stops too) once wanted() is False."""
        return self._callers.cancellable(wanted)

    def alternatives(self, ids: list[int], k: int, *, start: int = 1) -> list[TokenAlternatives]:
        """llama-server gives no log-probs of a prompt's own tokens (`n_probs` covers
        generated tokens; `echo` is refused), so each position is asked as a prompt of its
        own: one multi-prompt request that the server spreads over its slots, each
        re-reading with `cache_prompt` little more than its slot lacks. The story token's
        log-prob is known only when it is among the top-k (else None)."""
        self.check_ids(ids)
        if not 1 <= start < len(ids):
            raise self.client.error(f"positions {start}..{len(ids) - 1} hold no token after text")
        positions = range(start, len(ids))
        tops = self.top_logprobs([list(ids[:i]) for i in positions], k)
        lead = max(0, start - 4)  # a character split at `start` is whole again
        texts = token_texts(self.tokens.pieces(list(ids[lead:])), start - lead)
        return [
            TokenAlternatives(
                i, ids[i], text, next((c.logprob for c in top if c.token_id == ids[i]), None), top
            )
            for i, top, text in zip(positions, tops, texts, strict=True)
        ]

    def top_logprobs_also(self, contexts, k, also):
        """Each context's top k (as `top_logprobs`), then the asked ids not among them,
        from a second request right after it in the same slot (which then reads one token
        again, not the beam's path): `logit_bias` lifts them by LIFT and
        `post_sampling_probs` reports the top of that lifted distribution (no sampler but
        the bias), so they come from anywhere in the vocabulary. Each one's log-prob is
        its lifted one less LIFT, put back on the raw scale by the likeliest token of the
        raw top k that is not lifted (in both replies: q = p / Z). An id the lifted reply
        leaves out lies below the raw k-th's probability times e^-20, where no bias in
        -20..20 lifts it past the top k: it is left out. `logit_bias` goes per request, so
        each context is a request of its own."""
        for context, ids in zip(contexts, also, strict=True):
            self.check_ids(context)
            self.check_ids(ids)
        prompts = [self.tokens.bos + list(ctx) for ctx in contexts]

        def run(work) -> list:
            out = []
            for i in work.rows:
                [chain], usage = self._request(work.slot, [prompts[i]], k, 1, ())
                top = chain[0]
                missing = sorted(set(also[i]) - {c.token_id for c in top})
                if missing:
                    extra, more = self._lifted(work.slot, prompts[i], top, missing)
                    top, usage = top + extra, usage + more
                out.append((i, top, usage))
            return out

        plan = self.slots.plan(prompts)
        with ThreadPoolExecutor(len(plan)) as pool:
            done = [answer for answers in pool.map(run, plan) for answer in answers]
        found: list[list[Candidate]] = [[] for _ in contexts]
        spent = Usage()
        for i, top, usage in done:
            found[i], spent = top, spent + usage
        self.stats.add(**spent.__dict__)  # on the caller's thread: stats are per thread
        return found

    def _lifted(self, slot, prompt, top: list[Candidate], ids: list[int]):
        """`ids`' raw log-probs after `prompt`, most likely first, read from the top of the
        distribution with `ids` lifted (see `top_logprobs_also`), and what it cost."""
        body = {
            "prompt": prompt,
            "n_predict": 1,
            "n_probs": len(top) + len(ids),
            "cache_prompt": True,
            "samplers": [],  # the logit bias alone: the probabilities are softmax(logits + bias)
            "post_sampling_probs": True,
            "logit_bias": [[i, LIFT] for i in ids],
            "return_tokens": True,
        }
        if slot is not None:
            body["id_slot"] = slot
        [result] = ordered(self.client.post("/completion", body), 1, self.client.error)
        prompt_n, _ = timings_of(result)
        usage = Usage(forward_calls=1, model_tokens=prompt_n + 1, prefill_tokens=prompt_n)
        self._held(prompt, result, prompt_n)
        return lifted(result, top, ids, LIFT, self.client.error, self.vocab_size), usage

    # -- requests --------------------------------------------------------------------
    def _complete(
        self, contexts: list[list[int]], k: int, length: int, stops=()
    ) -> list[Positions]:
        """Top-k at `length` greedy positions per context (fewer where the text reached one
        of `stops`): one request per slot used, in parallel."""
        for context in contexts:
            self.check_ids(context)
        prompts = [self.tokens.bos + list(ctx) for ctx in contexts]
        plan = self.slots.plan(prompts)
        with ThreadPoolExecutor(len(plan)) as pool:
            replies = list(
                pool.map(lambda w: self._request(w.slot, [prompts[i] for i in w.rows], k,
                                                 length, stops), plan)
            )  # fmt: skip
        spent = Usage()
        answers: list[Positions] = [[] for _ in contexts]
        for work, (chains, usage) in zip(plan, replies, strict=True):
            spent += usage
            for i, chain in zip(work.rows, chains, strict=True):
                answers[i] = chain
        self.stats.add(**spent.__dict__)  # on the caller's thread: stats are per thread
        return answers

    def _request(self, slot, group: list[list[int]], k: int, length: int, stops):
        chains, usage = self._post(slot, group, k, length, stops)
        broken = [i for i, chain in enumerate(chains) if not chain]
        if broken:  # a greedy path that starts inside a character: ask that one position
            firsts, more = self._post(slot, [group[i] for i in broken], k, 1, ())
            usage += more
            for i, first in zip(broken, firsts, strict=True):
                chains[i] = first
        return chains, usage

    def _post(self, slot, group, k: int, length: int, stops) -> tuple[list[Positions], Usage]:
        body = {
            "prompt": group,
            "n_predict": length,
            "n_probs": k,
            "cache_prompt": True,
            "samplers": ["top_k"],  # greedy: the path a chain follows is the top token's
            "top_k": 1,
            "post_sampling_probs": False,  # the raw distribution, not the sampler's
            "stop": [],
            "return_tokens": True,  # what the slot now holds, for the next plan
        }
        if slot is not None:
            body["id_slot"] = slot
        if length == 1 and self.tokens.plain:
            # The server holds back the probabilities of a sampled token that ends inside a
            # UTF-8 character. Sampling is forced onto a whole character; the probabilities
            # reported (raw logits, before any sampler) are unaffected.
            body["logit_bias"] = [[self.tokens.plain[0], 1000]]
        if stops and length > 1:
            # The server stops after the token whose text holds a stop string. Only a
            # stream reports that token's probabilities (a whole reply drops them).
            body["stop"], body["stream"] = list(stops), True
            events = self.client.post_events("/completion", body)
            results = gathered(events, len(group), self.client.error)
        else:
            results = ordered(self.client.post("/completion", body), len(group),
                               self.client.error)  # fmt: skip
        expect(len(results) == len(group), self.client, f"expected {len(group)} results")
        usage = Usage(forward_calls=1)
        chains, error = [], self.client.error
        for prompt, result in zip(group, results, strict=True):
            chains.append(chain_of(result, k, error, self.vocab_size, self.tokens.old_id))
            prompt_n, predicted_n = timings_of(result)
            usage += Usage(model_tokens=prompt_n + predicted_n, prefill_tokens=prompt_n)
            self._held(prompt, result, prompt_n)
        return chains, usage

    def _held(self, prompt: list[int], result: dict, read: int) -> None:
        """Record what the result's slot read (`read` prompt tokens) and holds now
        (results of one slot come in order)."""
        slot, cached = result.get("id_slot"), result.get("tokens_cached")
        if isinstance(slot, int) and isinstance(cached, int):
            generated = result.get("tokens") or []
            if all(isinstance(t, int) for t in generated):
                self.slots.hold(slot, tuple(prompt), tuple(prompt + generated)[:cached], read)

    # -- sampling (ramify) -------------------------------------------------------------
    def sample(self, context, *, n, temperature, min_p, max_tokens, seed=None):
        """The server's own sampler: min-p, then temperature, then its draw. One request
        asks `n_cmpl` completions (at most one per slot): the server reads the prompt once
        and copies that slot's state to the others, each child's seed one more than the
        one before. A server that answers fewer is asked again for the rest, seeds going on.
        `n_probs: 1` with raw probabilities gives each drawn token's log-prob."""
        self.check_ids(context)
        seed = secrets.randbits(31) if seed is None else seed
        slots = self._total_slots() or 1
        drawn: list[Continuation] = []
        while len(drawn) < n:
            body = {
                "prompt": self.tokens.bos + list(context),
                "n_predict": max_tokens,
                "n_cmpl": min(n - len(drawn), slots),
                "samplers": ["min_p", "temperature"],
                "min_p": min_p,
                "temperature": temperature,
                "seed": seed + len(drawn),
                "n_probs": 1,
                "post_sampling_probs": False,
                "return_tokens": True,
                "cache_prompt": True,
                "stop": [],
            }
            results = ordered(self.client.post("/completion", body), body["n_cmpl"],
                               self.client.error)  # fmt: skip
            expect(bool(results), self.client, "no completions")
            self.stats.add(forward_calls=1, **sampling_usage(results))
            error, specials = self.client.error, self.special_token_ids
            drawn += [continuation(r, error, self.vocab_size, specials) for r in results]
        return drawn[:n]
