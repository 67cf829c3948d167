"""Ramify (n8loom's `ramify`): N continuations of a context drawn by the model's sampling.

Beside threshold splitting (`weave.search.beams`), a writer may ask for N continuations
sampled from the model: at each position the tokens below `min_p` times the top token's
probability are dropped and the rest drawn at `temperature` (0: always the top token),
up to `max_tokens` tokens; a control token ends a sample. The backend draws them
(`Backend.sample`: MLX in one batched run on its fragment tree, the servers with their
own samplers). This module validates the parameters, checks that the context (fitted by
`weave.story.context.build_context`) leaves the samples room in the model's window,
reports progress and returns the samples, in the order drawn, with the run's stats, as a
search does. It does no I/O of its own and knows nothing of pages.

A story that ends inside a word or with whitespace is healed as a search is
(`weave.search.healing`): each sample's first tokens, while inside the typed text, are
drawn here by the same rules from the allowed candidates (`Backend.heal_k` of them,
renormalised), and the backend draws the rest after them; a sample's text is what
follows the typed text, and its ids replace the story's last `healed` ids.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from dataclasses import dataclass

from backends.base import Backend, Candidate, Continuation
from backends.errors import BackendError
from weave.bounds import Bounded, bounded
from weave.search.beams import Progress, ProgressCallback, SearchStats, check_fits
from weave.search.healing import Healing, heal, narrowed
from weave.story.guard import Guard, Pruned

MAX_SAMPLES = 16
MAX_SAMPLE_TOKENS = 256


@dataclass(frozen=True)
class RamifyParams(Bounded):
    """The knobs of one ramification. Defaults suit the embedded SmolLM2-135M, tried on
    the three starting stories: at temperature 1.0 with min-p 0.1 its samples stay
    coherent and differ from each other (min-p 0.05 let odd words through at 1.0, and
    cooler draws repeated themselves more); 24 tokens is about a sentence. Each number
    carries its bounds (`weave.bounds`), which the page's sliders read."""

    n: int = bounded(4, 1, MAX_SAMPLES)
    temperature: float = bounded(1.0, 0.0, 2.0)
    min_p: float = bounded(0.1, 0.0, 1.0)
    max_tokens: int = bounded(24, 1, MAX_SAMPLE_TOKENS)
    seed: int | None = bounded(None, 0, 2**31 - 1)  # None: a new draw every time


@dataclass(frozen=True)
class Sample:
    """One drawn continuation: `logprob` is the sum of its tokens' raw log-probabilities;
    `stats` are the whole ramification's (every sample of one run shares them)."""

    token_ids: tuple[int, ...]
    text: str
    logprob: float
    stats: SearchStats
    healed: int = 0  # story ids its ids replace (`weave.search.healing`): 0, they follow the story


@dataclass(frozen=True)
class RamifyResult:
    samples: list[Sample]
    stats: SearchStats
    context_ids: tuple[int, ...]  # the context sampled from (the story's end if too long)
    pruned: tuple[Pruned, ...] = ()  # the draws a guard cut


def ramify(
    backend: Backend,
    context: list[int],
    params: RamifyParams,
    progress: ProgressCallback | None = None,
    guard: Guard | None = None,
) -> RamifyResult:
    """Draw `params.n` continuations of `context`.

    `progress` hears of a long story being read (depth 0) and of the finished draw.
    Raises ValueError for an empty context or one that leaves no room for `max_tokens`
    in the model's window, and lets `BackendError` through untouched
    (a backend that cannot sample, whose `sample` answers None, raises one here).
    """
    if not context:
        raise ValueError("The story is empty: write a few words first.")
    check_fits(context, backend.context_length, params.max_tokens)
    fitted = list(context)
    started, usage_before = time.perf_counter(), backend.stats.snapshot()

    def report(depth: int, done: int, latest: str = "", read: int = 0, tokens: int = 0):
        progress(
            Progress(
                depth=depth,
                beams_done=done,
                beams_live=0,
                tokens_evaluated=(backend.stats.snapshot() - usage_before).model_tokens,
                seconds=time.perf_counter() - started,
                latest=latest,
                story_read=read,
                story_tokens=tokens,
            )
        )

    if progress is not None:
        backend.read_ahead(fitted, 1, lambda read, tokens: report(0, 0, read=read, tokens=tokens))
    healed = heal(fitted, backend.detokenize, backend.tokenize)
    if healed is None:
        drawn, typed, given_back = _draw(backend, fitted, params, params.n, params.seed), "", 0
    else:
        drawn = _healed_draw(backend, healed, params)
        typed, given_back = healed.typed, healed.tokens
    stats = SearchStats.of(
        backend, backend.stats.snapshot() - usage_before, time.perf_counter() - started
    )
    samples = [
        Sample(d.token_ids, d.text[len(typed) :], d.logprob, stats, given_back)
        for d in drawn
        if d.text.startswith(typed)  # a healed draw spelled what was typed, as it was typed
    ]
    pruned = []
    if guard is not None:
        read = [(s, guard.step(guard.root(), s.text.encode()).pruned_by) for s in samples]
        pruned = [Pruned(s.text, why) for s, why in read if why is not None]
        samples = [s for s, why in read if why is None]
    if progress is not None:
        longest = max((len(s.token_ids) for s in samples), default=0)
        report(longest, len(samples), samples[0].text if samples else "")
    return RamifyResult(samples, stats, tuple(fitted), tuple(pruned))


def _draw(
    backend: Backend, context: list[int], params: RamifyParams, n: int, seed: int | None
) -> list[Continuation]:
    drawn = backend.sample(context, n=n, temperature=params.temperature, min_p=params.min_p,
                           max_tokens=params.max_tokens, seed=seed)  # fmt: skip
    if drawn is None:
        raise BackendError("this backend cannot sample continuations", backend=backend.name)
    return drawn


def _healed_draw(backend: Backend, healed: Healing, params: RamifyParams) -> list[Continuation]:
    """Each sample's tokens inside the typed text drawn here (one request per depth for
    the distinct beginnings), then the backend's draw after each beginning, as many
    samples as began so; the tokens given back do not count against `max_tokens`."""
    rng = random.Random(params.seed)
    held, context = healed.constraint, list(healed.context)
    starts: list[tuple[Candidate, ...] | None] = [()] * params.n  # None: nothing allowed
    while open_ := sorted({s for s in starts if s is not None and held.active(_spelled(s))},
                          key=len):  # fmt: skip
        answers = backend.top_logprobs([context + [c.token_id for c in s] for s in open_],
                                       backend.heal_k)  # fmt: skip
        options = {s: narrowed(held, _spelled(s), a, backend.heal_k)
                   for s, a in zip(open_, answers, strict=True)}  # fmt: skip
        starts = [_pick(s, options[s], params, rng) if s in options else s for s in starts]
    drawn = []
    for i, (start, count) in enumerate(Counter(s for s in starts if s).items()):
        ids = [c.token_id for c in start]
        logprob = sum(c.logprob for c in start)
        room = max(1, params.max_tokens + healed.tokens - len(ids))
        seed = None if params.seed is None else params.seed + i
        rest = backend.sample(context + ids, n=count, temperature=params.temperature,
                              min_p=params.min_p, max_tokens=room, seed=seed)  # fmt: skip
        if rest is None:
            raise BackendError("this backend cannot sample continuations", backend=backend.name)
        for r in rest:
            full = tuple(ids) + r.token_ids
            drawn.append(Continuation(full, backend.detokenize(list(full)), logprob + r.logprob))
    return drawn


def _spelled(start: tuple[Candidate, ...]) -> bytes:
    return b"".join(c.piece for c in start)


def _pick(
    start: tuple[Candidate, ...], options: list[Candidate], params: RamifyParams, rng: random.Random
) -> tuple[Candidate, ...] | None:
    """`start` and one token drawn by the sampler's rules (min-p, then temperature) from
    `options`, most likely first; None where nothing is allowed (no sample begins so)."""
    if not options:
        return None
    top = options[0].logprob
    kept = [c for c in options
            if params.min_p == 0 or c.logprob >= top + math.log(params.min_p)]  # fmt: skip
    if params.temperature == 0:
        return (*start, kept[0])
    weights = [math.exp((c.logprob - top) / params.temperature) for c in kept]
    return (*start, rng.choices(kept, weights)[0])
