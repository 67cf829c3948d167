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

Both reply shapes are read: the current `completion_probabilities: [{id, token, bytes,
logprob, top_logprobs: [...]}]` (token bytes kept, so split UTF-8 characters join), and
the pre-Dec-2024 `[{content, probs: [{tok_str, prob}]}]`, whose token strings are mapped
back to ids with `/tokenize`.

Every field read from a reply is checked where it is read (`backends.replies`): a token
id must lie in the vocabulary (its size from `/v1/models`, where the server says), a
log-probability must be finite (-inf candidates are dropped), and a wrong shape is an
error naming the server and the field.

Owns: request shapes and parsing. Not: the search, slot planning
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
from backends.errors import BackendError
from backends.greedy_path import GreedyPathBackend
from backends.http import JsonClient, expect
from backends.llamacpp_reading import read
from backends.llamacpp_slots import SlotBook
from weave.redaction import redacted

log = logging.getLogger(__name__)

HEAL_N_PROBS = 1000  # candidates a healed depth asks for (`heal_k`)
LIFT = 20.0  # the logit bias that lifts a bias's ids into a reply (a bias weighs -20..20)
MAX_SLOTS = 1024  # a server's parallel slots (-np); past it /props is not believed
READ_APART = 512  # prompt tokens a slot has yet to read before a page reads them apart
FA_HINT = "null probabilities: restart llama-server without -fa (flash attention)"


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
        self.vocab_size = self._vocab_size()
        self._bos = self._token_ids("", add_special=True)  # [] unless the model wants a BOS
        self._plain = self._token_ids("a")[:1]  # a token that is a whole character
        self.special_token_ids = frozenset(self._specials())
        self._old_ids: dict[str, int] = {}
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
        settings = self._props.get("default_generation_settings")
        settings = settings if isinstance(settings, dict) else {}
        n_ctx = settings.get("n_ctx") or self._props.get("n_ctx")
        return replies.count(
            n_ctx or None, self.client.error, "/props n_ctx", least=replies.MIN_CONTEXT
        )

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
        return self._token_ids(text)

    def detokenize(self, ids: list[int]) -> str:
        self.check_ids(ids)
        reply = self.client.post("/detokenize", {"tokens": list(ids)})
        return replies.field(reply, "content", str, self.client.error, "/detokenize")

    def close(self) -> None:
        self.client.close()

    # -- a long story read apart -----------------------------------------------------
    def unread(self, context: list[int]) -> int:
        """The tokens the slot that would take `context` has yet to read, as far as this
        client knows (`SlotBook.unread`), when over READ_APART; else 0."""
        self.check_ids(context)
        left = self.slots.unread(self._bos + list(context))
        return left if left > READ_APART else 0

    def read_ahead(self, context: list[int], k: int, report: Callable[[int, int], None]) -> None:
        """The slot a search would use reads `context` now, one greedy token after it,
        the server's progress going to `report` (`backends.llamacpp_reading`); the search
        then finds it read. Stops, and so does the server, once this thread's
        `cancellable` block no longer wants it. READ_APART tokens or fewer left to read
        are left to the search: there is no progress to show."""
        if not self.unread(context):
            return
        prompt = self._bos + list(context)
        [work] = self.slots.plan([prompt])
        body = {"prompt": prompt, "n_predict": 1, "n_probs": k, "cache_prompt": True,
                "samplers": ["top_k"], "top_k": 1, "return_tokens": True}  # fmt: skip
        if work.slot is not None:
            body["id_slot"] = work.slot
        last = read(self.client, body, report, self._callers.wanted)
        timings = last.get("timings") if last else None
        if isinstance(timings, dict):
            prompt_n = _count_of(timings.get("prompt_n"))
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
        texts = self._texts(ids, start)
        return [
            TokenAlternatives(
                i, ids[i], text, next((c.logprob for c in top if c.token_id == ids[i]), None), top
            )
            for i, top, text in zip(positions, tops, texts, strict=True)
        ]

    def _texts(self, ids: list[int], start: int) -> list[str]:
        """The own text of ids[start:], from the bytes `/tokenize` gives for each piece of
        the ids' text (when that text tokenizes back to the same ids; else each id alone)."""
        lead = max(0, start - 4)
        body = {"content": self.detokenize(list(ids[lead:])), "with_pieces": True}
        reply = self.client.post("/tokenize", body)
        tokens = reply.get("tokens") if isinstance(reply, dict) else None
        pieced = isinstance(tokens, list) and all(isinstance(t, dict) for t in tokens)
        if pieced and [t.get("id") for t in tokens] == list(ids[lead:]):
            error = self.client.error
            pieces = [_piece_bytes(t.get("piece"), error, f"/tokenize tokens[{i}].piece")
                      for i, t in enumerate(tokens)]  # fmt: skip
        else:  # a text that tokenizes otherwise: each id decoded alone
            pieces = [self.detokenize([i]).encode("utf-8") for i in ids[lead:]]
        return token_texts(pieces, start - lead)

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
        prompts = [self._bos + list(ctx) for ctx in contexts]

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
        [result] = _ordered(self.client.post("/completion", body), 1, self.client.error)
        timings = result.get("timings")
        timings = timings if isinstance(timings, dict) else {}
        prompt_n = _count_of(timings.get("prompt_n"))
        usage = Usage(forward_calls=1, model_tokens=prompt_n + 1, prefill_tokens=prompt_n)
        self._held(prompt, result, prompt_n)
        positions = result.get("completion_probabilities")
        if not isinstance(positions, list) or not positions:
            return [], usage  # a drawn token inside a character: the server held them back
        what = "/completion completion_probabilities[0].top_probs"
        replies.of_type(positions[0], dict, self.client.error, "/completion position")
        entries = replies.of_type(positions[0].get("top_probs"), list, self.client.error, what)
        shown = {}
        for j, option in enumerate(entries):
            replies.of_type(option, dict, self.client.error, f"{what}[{j}]")
            lq = replies.probability(option.get("prob"), self.client.error, f"{what}[{j}].prob")
            if lq is not None:
                shown[option.get("id")] = (lq, option)
        asked = set(ids)
        reference = next((c for c in top if c.token_id in shown and c.token_id not in asked), None)
        if reference is None:
            return [], usage
        log_z = reference.logprob - shown[reference.token_id][0]
        extra = []
        for token_id in asked & shown.keys():
            lq, option = shown[token_id]
            logprob = min(0.0, lq + log_z - LIFT)
            extra.append(self._current({**option, "logprob": logprob}, what))
        extra.sort(key=lambda c: -c.logprob)
        return extra, usage

    # -- requests --------------------------------------------------------------------
    def _complete(
        self, contexts: list[list[int]], k: int, length: int, stops=()
    ) -> list[Positions]:
        """Top-k at `length` greedy positions per context (fewer where the text reached one
        of `stops`): one request per slot used, in parallel."""
        for context in contexts:
            self.check_ids(context)
        prompts = [self._bos + list(ctx) for ctx in contexts]
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
        if length == 1 and self._plain:
            # The server holds back the probabilities of a sampled token that ends inside a
            # UTF-8 character. Sampling is forced onto a whole character; the probabilities
            # reported (raw logits, before any sampler) are unaffected.
            body["logit_bias"] = [[self._plain[0], 1000]]
        if stops and length > 1:
            # The server stops after the token whose text holds a stop string. Only a
            # stream reports that token's probabilities (a whole reply drops them).
            body["stop"], body["stream"] = list(stops), True
            events = self.client.post_events("/completion", body)
            results = _gathered(events, len(group), self.client.error)
        else:
            results = _ordered(self.client.post("/completion", body), len(group),
                               self.client.error)  # fmt: skip
        expect(len(results) == len(group), self.client, f"expected {len(group)} results")
        usage = Usage(forward_calls=1)
        chains = []
        for prompt, result in zip(group, results, strict=True):
            chains.append(self._chain(result, k))
            timings = result.get("timings")
            timings = timings if isinstance(timings, dict) else {}
            prompt_n, predicted_n = (
                _count_of(timings.get("prompt_n")),
                _count_of(timings.get("predicted_n")),
            )
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

    # -- parsing ---------------------------------------------------------------------
    def _chain(self, result: dict, k: int) -> Positions:
        """The positions of a greedy path, up to the first the server merged away.

        While generated text ends inside a UTF-8 character the server holds back that
        position's probabilities and later reports only the character's last token, its
        `bytes` being the whole character. The chain stops before such a merge.
        """
        positions = result.get("completion_probabilities")
        if not positions and _count_of(result.get("tokens_predicted")) > 0:
            return []
        expect(isinstance(positions, list) and positions, self.client,
               "no completion_probabilities: does this server support n_probs?")  # fmt: skip
        chain = []
        for j, position in enumerate(positions):
            what = f"/completion completion_probabilities[{j}]"
            replies.of_type(position, dict, self.client.error, what)
            if _merged(position):
                break
            chain.append(self._position(position, k, what))
        return chain

    def _position(self, position: dict, k: int, what: str) -> list[Candidate]:
        if "top_logprobs" in position:
            key, read = "top_logprobs", self._current
        elif "probs" in position:
            key, read = "probs", self._old
        else:
            raise self.client.error("unknown completion_probabilities shape")
        entries = replies.of_type(position[key] or [], list, self.client.error, f"{what}.{key}")
        options = [read(o, f"{what}.{key}[{i}]") for i, o in enumerate(entries)]
        options = [o for o in options if o is not None]  # -inf: ruled out by the model
        expect(bool(options), self.client, "an empty list of probabilities")
        options.sort(key=lambda c: -c.logprob)
        return options[:k]

    def _current(self, option: object, what: str) -> Candidate | None:
        error = self.client.error
        replies.of_type(option, dict, error, what)
        if option.get("logprob") is None or "id" not in option:
            raise error(FA_HINT)
        logprob = replies.logprob(option["logprob"], error, f"{what}.logprob")
        token_id = replies.token_id(option["id"], error, f"{what}.id", self.vocab_size)
        raw = replies.token_bytes(option.get("bytes"), error, f"{what}.bytes")
        token = replies.of_type(option.get("token", ""), str, error, f"{what}.token")
        text = raw.decode("utf-8", errors="replace") if raw is not None else token
        return None if logprob is None else Candidate(token_id, text, logprob, raw)

    def _old(self, option: object, what: str) -> Candidate | None:
        """Pre-Dec-2024 servers give token strings and probabilities, no ids."""
        error = self.client.error
        replies.of_type(option, dict, error, what)
        prob, text = option.get("prob"), option.get("tok_str")
        if prob is None or text is None:
            raise error(FA_HINT)
        logprob = replies.probability(prob, error, f"{what}.prob")
        text = replies.of_type(text, str, error, f"{what}.tok_str")
        return None if logprob is None else Candidate(self._old_id(text), text, logprob)

    def _old_id(self, text: str) -> int:
        if text not in self._old_ids:
            ids = self._token_ids(text)
            expect(len(ids) == 1, self.client, f"token {text!r} does not tokenize to one id")
            self._old_ids[text] = ids[0]
        return self._old_ids[text]

    # -- tokens ----------------------------------------------------------------------
    def _token_ids(self, text: str, *, add_special: bool = False, special: bool = False):
        body = {"content": text, "add_special": add_special, "parse_special": special}
        reply = self.client.post("/tokenize", body)
        tokens = replies.field(reply, "tokens", list, self.client.error, "/tokenize")
        error, vocab = self.client.error, self.vocab_size
        return [
            replies.token_id(
                t.get("id") if isinstance(t, dict) else t, error, f"/tokenize tokens[{i}].id", vocab
            )
            for i, t in enumerate(tokens)
        ]

    def _vocab_size(self) -> int | None:
        """The vocabulary's size, from `/v1/models` where the server names it (n_vocab)."""
        try:
            reply = self.client.get("/v1/models")
        except BackendError as e:
            log.info("%s; token ids are checked against no vocabulary size", e)
            return None
        models = reply.get("data") if isinstance(reply, dict) else None
        first = models[0] if isinstance(models, list) and models else None
        meta = first.get("meta") if isinstance(first, dict) else None
        n_vocab = meta.get("n_vocab") if isinstance(meta, dict) else None
        return replies.count(n_vocab, self.client.error, "/v1/models meta.n_vocab")

    def _specials(self) -> set[int]:
        """End-of-text and BOS ids, from the token texts /props names."""
        ids: set[int] = set(self._bos)
        for key in ("eos_token", "bos_token"):
            text = self._props.get(key)
            if text:
                found = self._token_ids(text, special=True)
                if len(found) == 1:
                    ids.add(found[0])
        return ids

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
                "prompt": self._bos + list(context),
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
            results = _ordered(self.client.post("/completion", body), body["n_cmpl"],
                               self.client.error)  # fmt: skip
            expect(bool(results), self.client, "no completions")
            self.stats.add(forward_calls=1, **_sampling_usage(results))
            drawn += [self._continuation(result) for result in results]
        return drawn[:n]

    def _continuation(self, result: dict) -> Continuation:
        """A completion's tokens up to the first control token, or up to the first
        character the server reported as one entry for several tokens (its log-probs are
        not all known: the sample ends before it). A drawn token's log-prob must be finite."""
        error = self.client.error
        tokens = result.get("tokens")
        positions = result.get("completion_probabilities") or []
        expect(isinstance(tokens, list), self.client, "no tokens: does it know return_tokens?")
        replies.of_type(positions, list, error, "/completion completion_probabilities")
        ids, logprob, pieces = [], 0.0, []
        for j, (token, position) in enumerate(zip(tokens, positions, strict=False)):
            what = f"/completion completion_probabilities[{j}]"
            token = replies.token_id(token, error, f"/completion tokens[{j}]", self.vocab_size)
            if token in self.special_token_ids:
                break
            replies.of_type(position, dict, error, what)
            if position.get("id") != token:
                break
            if position.get("logprob") is None:
                raise error(FA_HINT)
            ids.append(token)
            logprob += replies.drawn_logprob(position["logprob"], error, f"{what}.logprob")
            raw = replies.token_bytes(position.get("bytes"), error, f"{what}.bytes")
            text = replies.of_type(position.get("token", ""), str, error, f"{what}.token")
            pieces.append(raw if raw is not None else text.encode("utf-8"))
        text = b"".join(pieces).decode("utf-8", errors="replace")
        return Continuation(tuple(ids), text, logprob)


def _sampling_usage(results: list[dict]) -> dict[str, int]:
    """Prompt and drawn tokens of one request's completions, from the server's timings.
    The prompt is read once, for the first; the others copy its state and repeat its
    prompt figures."""
    timings = [r.get("timings") if isinstance(r.get("timings"), dict) else {} for r in results]
    prompt = _count_of(timings[0].get("prompt_n"))
    drawn = sum(_count_of(t.get("predicted_n")) for t in timings)
    return {"model_tokens": prompt + drawn, "prefill_tokens": prompt}


def _piece_bytes(piece: object, error: replies.Error, what: str) -> bytes:
    """A `/tokenize` piece: text, or a list of byte values where it is not valid UTF-8."""
    if isinstance(piece, list):
        return replies.token_bytes(piece, error, what)
    return replies.of_type(piece, str, error, what).encode("utf-8")


def _merged(position: dict) -> bool:
    """Whether an entry stands for several tokens: its bytes are not its own token's, nor
    the part of them before a stop string (the server cuts the text of a stop token)."""
    options = position.get("top_logprobs")
    options = options if isinstance(options, list) else []
    own = next(
        (o for o in options if isinstance(o, dict) and o.get("id") == position.get("id")), None
    )
    if own is None:
        return False
    mine, shown = own.get("bytes") or [], position.get("bytes") or []
    return not (isinstance(mine, list) and isinstance(shown, list) and mine[: len(shown)] == shown)


def _ordered(reply: object, asked: int, error: replies.Error) -> list[dict]:
    """A `/completion` reply's results (one object, or a list of them) in `index` order:
    at most `asked`, each index (its place where absent) naming a distinct prompt."""
    results = reply if isinstance(reply, list) else [reply]
    if len(results) > asked:
        raise error(f"unexpected reply: /completion gave {len(results)} results, {asked} asked")
    indices = [
        _index(replies.of_type(result, dict, error, f"/completion result {i}").get("index", i),
               asked, error, f"/completion result {i} index")
        for i, result in enumerate(results)
    ]  # fmt: skip
    if len(set(indices)) < len(indices):
        raise error(f"unexpected reply: /completion results share an index ({indices})")
    return [result for _, result in sorted(zip(indices, results, strict=True))]


def _index(value: object, asked: int, error: replies.Error, what: str) -> int:
    """A result's `index`: which of the `asked` prompts (or completions) it answers."""
    replies.of_type(value, int, error, what)
    if not 0 <= value < asked:
        raise replies.wrong(error, what, value, f"an index in 0..{asked - 1}")
    return value


def _gathered(events: list, asked: int, error: replies.Error) -> list[dict]:
    """A stream's events made into one result per prompt, as a whole reply gives them:
    its positions in order, its generated tokens, and the final event's fields."""
    results: dict[int, dict] = {}
    for event in events:
        if not isinstance(event, dict):
            continue
        index = _index(event.get("index", 0), asked, error, "/completion (streamed) index")
        result = results.setdefault(index, {"completion_probabilities": [], "tokens": []})
        for key in ("completion_probabilities", "tokens"):
            part = event.get(key)
            result[key] += part if isinstance(part, list) else []
        if event.get("stop"):
            result.update({key: event[key] for key in ("timings", "id_slot", "tokens_cached",
                           "index", "tokens_predicted") if key in event})  # fmt: skip
    return [results[i] for i in sorted(results)]


def _count_of(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
