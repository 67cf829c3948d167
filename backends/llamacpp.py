"""The llama.cpp backend: a client of `llama-server`'s native `/completion`.

Prompts go as the server's own token ids (`/tokenize`; ids get no BOS from the server,
so one is prepended when the model wants it), with `n_probs`, `cache_prompt: true` and
`post_sampling_probs: false`, so the probabilities are the model's raw distribution.

Doing only the work the tree needs. A CPU server's cost is the tokens it evaluates
(`timings.prompt_n + predicted_n`); the least a search can cost is the story once plus
one token per tree node. Three levers, measured with bench/bench_llamacpp.py:
- Greedy chains by default (`prefers_chains`): one prompt answers a beam's whole greedy
  path (`top_k: 1`, `n_predict` up to the remaining depth), each of its tokens evaluated
  once, in place, in its slot; only tokens that split start new prompts.
- Chains stop where the beam does: the search's auto-stop strings go as `stop`, so the
  server ends a path on the token holding '.' or ','. A whole reply drops that token's
  probabilities, so chains are streamed (`stream: true`), where every token's come.
  (The search also asks no further than the cap will let beams live.)
- Slots pinned (`id_slot`, `backends.llamacpp_slots`): each prompt goes to the slot that
  holds its parent's path, in an order that keeps shared prefixes in the cache; the
  story is read once per search, not once per slot.
`--cache-reuse` (KV shifting of chunks found later in a prompt) does not fit a tree, whose
prompts differ only at the end; `n_keep` matters only when a context overflows.

Both reply shapes are read: the current `completion_probabilities: [{id, token, bytes,
logprob, top_logprobs: [...]}]` (token bytes kept, so split UTF-8 characters join), and
the pre-Dec-2024 `[{content, probs: [{tok_str, prob}]}]`, whose token strings are mapped
back to ids with `/tokenize`.

Owns: request shapes and parsing. Not: the search, slot planning
(`backends.llamacpp_slots`), HTTP error wording (`backends.http`).
"""

from __future__ import annotations

import math
import secrets
from concurrent.futures import ThreadPoolExecutor

from backends.base import (
    Candidate,
    Chain,
    Continuation,
    GreedyPathBackend,
    TokenAlternatives,
    Usage,
    token_texts,
)
from backends.http import JsonClient, expect
from backends.llamacpp_slots import SlotBook

FA_HINT = "null probabilities: restart llama-server without -fa (flash attention)"


class LlamaCppBackend(GreedyPathBackend):
    """llama-server at `url`."""

    name = "llamacpp"
    prefers_chains = True

    def __init__(self, url: str, *, timeout: float = 60.0):
        super().__init__()
        self.client = JsonClient(url, backend=self.name, timeout=timeout, pool=16)
        props = self.client.get("/props")
        expect(isinstance(props, dict), self.client, "/props is not an object")
        self._props = props
        self.slots = SlotBook(int(props.get("total_slots") or 0))
        self._bos = self._token_ids("", add_special=True)  # [] unless the model wants a BOS
        self._plain = self._token_ids("a")[:1]  # a token that is a whole character
        self.special_token_ids = frozenset(self._specials())
        self._old_ids: dict[str, int] = {}

    # -- Backend ---------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        path = str(self._props.get("model_path") or self._props.get("model_alias") or "?")
        return path.rsplit("/", 1)[-1]

    @property
    def url(self) -> str:
        return self.client.base_url

    @property
    def context_length(self) -> int | None:
        settings = self._props.get("default_generation_settings") or {}
        n_ctx = settings.get("n_ctx") or self._props.get("n_ctx")
        return int(n_ctx) if n_ctx else None

    def tokenize(self, text: str) -> list[int]:
        return self._token_ids(text)

    def detokenize(self, ids: list[int]) -> str:
        reply = self.client.post("/detokenize", {"tokens": list(ids)})
        expect(isinstance(reply, dict) and "content" in reply, self.client, "no detokenized text")
        return reply["content"]

    def close(self) -> None:
        self.client.close()

    def alternatives(self, ids: list[int], k: int, *, start: int = 1) -> list[TokenAlternatives]:
        """llama-server gives no log-probs of a prompt's own tokens (`n_probs` covers
        generated tokens; `echo` is refused), so each position is asked as a prompt of its
        own: one multi-prompt request that the server spreads over its slots, each
        re-reading with `cache_prompt` little more than its slot lacks. The story token's
        log-prob is known only when it is among the top-k (else None)."""
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
            pieces = [_piece_bytes(t.get("piece")) for t in tokens]
        else:  # a text that tokenizes otherwise: each id decoded alone
            pieces = [self.detokenize([i]).encode("utf-8") for i in ids[lead:]]
        return token_texts(pieces, start - lead)

    # -- requests --------------------------------------------------------------------
    def _complete(self, contexts: list[list[int]], k: int, length: int, stops=()) -> list[Chain]:
        """Top-k at `length` greedy positions per context (fewer where the text reached one
        of `stops`): one request per slot used, in parallel."""
        prompts = [self._bos + list(ctx) for ctx in contexts]
        plan = self.slots.plan(prompts)
        with ThreadPoolExecutor(len(plan)) as pool:
            replies = list(
                pool.map(lambda w: self._request(w.slot, [prompts[i] for i in w.rows], k,
                                                 length, stops), plan)
            )  # fmt: skip
        spent = Usage()
        answers: list[Chain] = [[] for _ in contexts]
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

    def _post(self, slot, group, k: int, length: int, stops) -> tuple[list[Chain], Usage]:
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
            results = _gathered(self.client.post_events("/completion", body))
        else:
            reply = self.client.post("/completion", body)
            results = reply if isinstance(reply, list) else [reply]
        expect(len(results) == len(group), self.client, f"expected {len(group)} results")
        expect(all(isinstance(r, dict) for r in results), self.client, "a result is not an object")
        results = sorted(results, key=lambda r: r.get("index", 0))
        usage = Usage(forward_calls=1)
        chains = []
        for prompt, result in zip(group, results, strict=True):
            chains.append(self._chain(result, k))
            timings = result.get("timings") or {}
            prompt_n, predicted_n = (
                int(timings.get("prompt_n", 0)),
                int(timings.get("predicted_n", 0)),
            )
            usage += Usage(model_tokens=prompt_n + predicted_n, prefill_tokens=prompt_n)
            self._held(prompt, result)
        return chains, usage

    def _held(self, prompt: list[int], result: dict) -> None:
        """Record what the result's slot holds now (results of one slot come in order)."""
        slot, cached = result.get("id_slot"), result.get("tokens_cached")
        if isinstance(slot, int) and isinstance(cached, int):
            generated = [int(t) for t in result.get("tokens") or []]
            self.slots.hold(slot, tuple(prompt + generated)[:cached])

    # -- parsing ---------------------------------------------------------------------
    def _chain(self, result: dict, k: int) -> Chain:
        """The positions of a greedy path, up to the first the server merged away.

        While generated text ends inside a UTF-8 character the server holds back that
        position's probabilities and later reports only the character's last token, its
        `bytes` being the whole character. The chain stops before such a merge.
        """
        positions = result.get("completion_probabilities")
        if not positions and int(result.get("tokens_predicted") or 0) > 0:
            return []
        expect(isinstance(positions, list) and positions, self.client,
               "no completion_probabilities: does this server support n_probs?")  # fmt: skip
        chain = []
        for position in positions:
            if _merged(position):
                break
            chain.append(self._position(position, k))
        return chain

    def _position(self, position: dict, k: int) -> list[Candidate]:
        expect(isinstance(position, dict), self.client, "a probabilities entry is not an object")
        if "top_logprobs" in position:
            options = [self._current(o) for o in position["top_logprobs"] or []]
        elif "probs" in position:
            options = [self._old(o) for o in position["probs"] or []]
        else:
            raise self.client.error("unknown completion_probabilities shape")
        expect(bool(options), self.client, "an empty list of probabilities")
        options.sort(key=lambda c: -c.logprob)
        return options[:k]

    def _current(self, option: dict) -> Candidate:
        logprob = option.get("logprob")
        if logprob is None or "id" not in option:
            raise self.client.error(FA_HINT)
        raw = bytes(option["bytes"]) if option.get("bytes") is not None else None
        text = raw.decode("utf-8", errors="replace") if raw is not None else option.get("token", "")
        return Candidate(int(option["id"]), text, float(logprob), raw)

    def _old(self, option: dict) -> Candidate:
        """Pre-Dec-2024 servers give token strings and probabilities, no ids."""
        prob, text = option.get("prob"), option.get("tok_str")
        if prob is None or text is None:
            raise self.client.error(FA_HINT)
        logprob = math.log(prob) if prob > 0 else -math.inf
        return Candidate(self._old_id(text), text, logprob)

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
        tokens = reply.get("tokens") if isinstance(reply, dict) else None
        expect(isinstance(tokens, list), self.client, "/tokenize gave no token list")
        return [int(t["id"]) if isinstance(t, dict) else int(t) for t in tokens]

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
        seed = secrets.randbits(31) if seed is None else seed
        slots = max(1, int(self._props.get("total_slots") or 1))
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
            reply = self.client.post("/completion", body)
            results = reply if isinstance(reply, list) else [reply]
            expect(bool(results) and all(isinstance(r, dict) for r in results), self.client,
                   "no completions")  # fmt: skip
            results.sort(key=lambda r: r.get("index", 0))
            self.stats.add(forward_calls=1, **_sampling_usage(results))
            drawn += [self._continuation(result) for result in results]
        return drawn[:n]

    def _continuation(self, result: dict) -> Continuation:
        """A completion's tokens up to the first control token, or up to the first
        character the server reported as one entry for several tokens (its log-probs are
        not all known: the sample ends before it)."""
        tokens = result.get("tokens")
        positions = result.get("completion_probabilities") or []
        expect(isinstance(tokens, list), self.client, "no tokens: does it know return_tokens?")
        ids, logprob, pieces = [], 0.0, []
        for token, position in zip(tokens, positions, strict=False):
            if token in self.special_token_ids:
                break
            expect(isinstance(position, dict), self.client, "a probabilities entry not an object")
            if position.get("id") != token:
                break
            if position.get("logprob") is None:
                raise self.client.error(FA_HINT)
            ids.append(int(token))
            logprob += float(position["logprob"])
            raw = position.get("bytes")
            pieces.append(bytes(raw) if raw is not None else str(position.get("token")).encode())
        text = b"".join(pieces).decode("utf-8", errors="replace")
        return Continuation(tuple(ids), text, logprob)


def _sampling_usage(results: list[dict]) -> dict[str, int]:
    """Prompt and drawn tokens of one request's completions, from the server's timings.
    The prompt is read once, for the first; the others copy its state and repeat its
    prompt figures."""
    timings = [r.get("timings") or {} for r in results]
    prompt = int(timings[0].get("prompt_n", 0))
    drawn = sum(int(t.get("predicted_n", 0)) for t in timings)
    return {"model_tokens": prompt + drawn, "prefill_tokens": prompt}


def _piece_bytes(piece: object) -> bytes:
    """A `/tokenize` piece: text, or a list of byte values where it is not valid UTF-8."""
    return bytes(piece) if isinstance(piece, list) else str(piece).encode("utf-8")


def _merged(position: dict) -> bool:
    """Whether an entry stands for several tokens: its bytes are not its own token's, nor
    the part of them before a stop string (the server cuts the text of a stop token)."""
    own = next(
        (o for o in position.get("top_logprobs") or [] if o.get("id") == position.get("id")), None
    )
    if own is None:
        return False
    mine, shown = bytes(own.get("bytes") or []), bytes(position.get("bytes") or [])
    return not mine.startswith(shown)


def _gathered(events: list) -> list[dict]:
    """A stream's events made into one result per prompt, as a whole reply gives them:
    its positions in order, its generated tokens, and the final event's fields."""
    results: dict[int, dict] = {}
    for event in events:
        if not isinstance(event, dict):
            continue
        result = results.setdefault(int(event.get("index") or 0), {
            "completion_probabilities": [], "tokens": []})  # fmt: skip
        result["completion_probabilities"] += event.get("completion_probabilities") or []
        result["tokens"] += event.get("tokens") or []
        if event.get("stop"):
            result.update({key: event[key] for key in ("timings", "id_slot", "tokens_cached",
                           "index", "tokens_predicted") if key in event})  # fmt: skip
    return [results[i] for i in sorted(results)]
