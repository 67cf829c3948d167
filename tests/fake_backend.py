"""A deterministic fake model for the search's unit tests, and `StoryFake`, the same model
reading any story, under the page's AppTest tests (the page on the real model is tested in
the browser tests and tests/test_desk.py).

Its vocabulary is a short list of strings; its next-token distribution is either given
per context by a table (hand-checked cases) or drawn from a seeded generator keyed by
the context (property tests). No tokenizer subtleties: text maps to ids greedily.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from backends.base import Backend, Candidate, Continuation
from backends.errors import BackendError
from backends.greedy_path import WholeChain

VOCAB = ["a", "b", "c", ".", ",", "ab", " ", "x", "<eos>", " the", "é"]
EOS = VOCAB.index("<eos>")

Distribution = dict[str, float]


class FakeBackend(Backend):
    """`table(beam_text_tokens) -> {token: probability}`; unlisted tokens share the rest."""

    name = "fake"

    def __init__(
        self,
        table: Callable[[tuple[str, ...]], Distribution] | None = None,
        *,
        seed: int = 0,
        chains: bool = False,
        context_length: int | None = None,
        reach: bool = True,
    ):
        super().__init__()
        self.table = table
        self.seed = seed
        self.chains = chains
        self.reach = reach  # it weighs ids beyond its top-k (`top_logprobs_also`), as MLX does
        self._context_length = context_length
        self.special_token_ids = frozenset({EOS})
        self.calls: list[int] = []  # contexts per call, for asserting on batching
        self.chained = 0  # greedy-chain requests answered

    @property
    def model_name(self) -> str:
        return "fake-model"

    @property
    def context_length(self) -> int | None:
        return self._context_length

    def tokenize(self, text: str) -> list[int]:
        ids, i = [], 0
        while i < len(text):
            match = max((t for t in VOCAB if text.startswith(t, i)), key=len)
            ids.append(VOCAB.index(match))
            i += len(match)
        return ids

    def detokenize(self, ids: list[int]) -> str:
        return "".join(VOCAB[i] for i in ids)

    def top_logprobs(self, contexts: list[list[int]], k: int) -> list[list[Candidate]]:
        self.calls.append(len(contexts))
        self.stats.add(forward_calls=1, model_tokens=len(contexts))
        return [self.distribution(ctx)[:k] for ctx in contexts]

    def top_logprobs_also(self, contexts, k, also):
        if not self.reach:
            return None
        self.calls.append(len(contexts))
        self.stats.add(forward_calls=1, model_tokens=len(contexts))
        out = []
        for ctx, asked in zip(contexts, also, strict=True):
            ranked = self.distribution(ctx)
            out.append(ranked[:k] + [c for c in ranked[k:] if c.token_id in set(asked)])
        return out

    def greedy_chains(self, contexts, k, lengths, *, stops=()):
        if not self.chains:
            return None
        self.calls.append(len(contexts))
        self.chained += 1
        out = []
        for ctx, length in zip(contexts, lengths, strict=True):
            chain, ctx = [], list(ctx)
            for _ in range(length):
                top = self.distribution(ctx)[:k]
                chain.append(top)
                ctx.append(top[0].token_id)
            self.stats.add(forward_calls=1, model_tokens=length)
            out.append(WholeChain(chain))
        return out

    def sample(self, context, *, n, temperature, min_p, max_tokens, seed=None):
        """Draws by the same rules as the real backends (min-p, then temperature; a
        control token ends a draw), from a generator seeded by `seed`; each drawn token
        counts as one forward."""
        rng = random.Random(seed)
        drawn = []
        for _ in range(n):
            ids, logprob = [], 0.0
            while len(ids) < max_tokens:
                options = self.distribution(list(context) + ids)
                self.stats.add(forward_calls=1, model_tokens=1)
                top = options[0].logprob
                kept = [c for c in options if min_p == 0 or c.logprob >= top + math.log(min_p)]
                if temperature == 0:
                    choice = kept[0]
                else:
                    weights = [math.exp((c.logprob - top) / temperature) for c in kept]
                    choice = rng.choices(kept, weights)[0]
                if choice.token_id in self.special_token_ids:
                    break
                ids.append(choice.token_id)
                logprob += choice.logprob
            drawn.append(Continuation(tuple(ids), self.detokenize(ids), logprob))
        return drawn

    def distribution(self, ctx: list[int]) -> list[Candidate]:
        """All tokens, most likely first (ties broken by id, as a real top-k would)."""
        probs = self._probs(ctx)
        ranked = sorted(range(len(VOCAB)), key=lambda i: (-probs[i], i))
        return [Candidate(i, VOCAB[i], math.log(probs[i])) for i in ranked]

    def _probs(self, ctx: list[int]) -> list[float]:
        if self.table is not None:
            given = self.table(tuple(VOCAB[i] for i in ctx[1:]))  # ctx[0] is the story
            rest = [t for t in VOCAB if t not in given]
            left = max(0.0, 1.0 - sum(given.values()))
            return [given.get(t, left / len(rest) if rest else 0.0) or 1e-12 for t in VOCAB]
        rng = random.Random(hash((self.seed, tuple(ctx))))
        weights = [rng.random() ** 3 for _ in VOCAB]
        total = sum(weights)
        return [w / total for w in weights]


class StoryFake(FakeBackend):
    """The fake model, reading any story (unknown characters read as 'x'); `down` makes
    it fail as an unreachable server would."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.down = False

    def tokenize(self, text: str) -> list[int]:
        return super().tokenize("".join(c if c in "abc., xé" else "x" for c in text))

    def top_logprobs(self, contexts, k):
        self.answer()
        return super().top_logprobs(contexts, k)

    def sample(self, context, **draw):
        self.answer()
        return super().sample(context, **draw)

    def answer(self) -> None:
        if self.down:
            raise BackendError("connection refused; is the server running?", backend="fake",
                               url="http://127.0.0.1:9")  # fmt: skip
