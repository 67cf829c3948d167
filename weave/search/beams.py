"""LLooM's threshold-splitting beam search, on tokens.

Breadth-first, depth by depth: each depth's frontier goes to the backend in one batched
call; every candidate that clears the cutoff spawns a beam (the top one always
continues); the cutoff is scaled by the multiplier once per token a beam took after the
text typed. The search is pure: it takes a backend and parameters and returns a token tree
with ranked suggestions. It does no I/O of its own, reads no environment and knows nothing
of pages.

The rules, precisely:
- a beam's first candidate always continues; each further one only while it clears the
  cutoff, the beam has fewer than `split_limit` children (0 = no limit) and there is room;
- what the cutoff is measured against is the `rule`'s: under `relative` (the default) a
  candidate clears it when its probability is at least cutoff x the beam's first
  candidate's, so a beam splits wide where the model is unsure (a writer's first words)
  and not at all where it is sure; under `v03` (LLooM v0.3's) when its probability is at
  least the cutoff;
- at most `max_depth` tokens that reach past the typed text (those that only spell it
  neither count nor scale the cutoff); auto-stop ends a beam once its text after the
  typed text, past any stop strings and whitespace it starts with, holds a word and then
  a '.' or ',' and cuts the text just after it;
- a beam holds at least one word and no half character: one that reaches `max_depth`
  with none, or inside a character (a token holding part of its bytes), goes on for at
  most `OVERRUN` tokens to reach one; a text of punctuation alone is never a suggestion,
  and a beam's text shows whole characters only;
- finished plus live beams never exceed `max_suggestions`: once they reach it no beam
  splits, and under `relative` each live beam goes on to its end; under `v03` each takes
  its top token and finishes, as v0.3's did;
- control tokens (`backend.special_token_ids`) are never offered as text;
- a story that ends inside a word or with whitespace is healed (`weave.search.healing`): the
  search starts at the last token boundary before that end; a beam still inside the
  typed text asks the backend for `heal_k` candidates (no greedy chain) and keeps those
  that agree with it, renormalised; suggestions are what follows the typed text.
- under a guard (`weave.story.bans`), each beam's candidates are screened before the
  choice: one that completes a banned phrase (or repeats the story) is left out, so its
  room goes to the next; `SearchResult.pruned` lists the left-out ones the beam would
  have taken.
- under a bias (the guard's list's biased rules, `weave.story.bias`), each beam asks the
  backend, beside its top-k, for the log-probs of the ids its bias state names
  (`Backend.top_logprobs_also`), so a favoured phrase the model ranks below the top-k can
  come in; its candidates' log-probs become the biased distribution's (renormalised,
  re-sorted) before the guard and the cutoff; a held beam's are narrowed first. While a
  phrase is favoured no greedy chain is asked for: a chain's later positions cannot carry
  the ids a beam's bias names there. A backend that cannot weigh ids outside its top-k
  (OpenAI) leaves a favoured phrase to where the model ranks it among them, and
  `SearchResult.notes` says so.
- the finished beams become rows (`weave.search.tree`, `weave.search.rows`): texts that
  read the same pooled, each opening's best row before any opening's second.

Here the candidates are chosen, screened and grown into the tree, and beams end. The
knobs and their bounds are `weave.search.params`'s; what each depth asks the backend
(chains, healed and biased candidates) is `weave.search.asking`'s.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from backends.base import Backend, Candidate, Usage
from weave.search.asking import Asker, Beam, drop_chain, inside_typed
from weave.search.healing import Constraint, Healing, heal
from weave.search.params import STOP_CHARS, SearchParams
from weave.search.rows import distinct_rows
from weave.search.tree import Suggestion, TreeNode, suggestions_from
from weave.story.bias import BiasState, TokenBias, spelled
from weave.story.guard import Guard, Pruned

OVERRUN = 4  # tokens a beam may take past max_depth to reach its first word or a whole character


@dataclass(frozen=True)
class Progress:
    """Reported after every depth, for a live status; before the first, while a backend
    reads a long story ahead (depth 0: `story_read` of `story_tokens` read)."""

    depth: int
    beams_done: int
    beams_live: int
    tokens_evaluated: int
    seconds: float
    latest: str
    story_read: int = 0
    story_tokens: int = 0


@dataclass(frozen=True)
class SearchStats:
    forward_calls: int
    model_tokens: int
    prefill_tokens: int
    seconds: float
    backend: str
    model: str

    @classmethod
    def of(cls, backend: Backend, usage: Usage, seconds: float) -> SearchStats:
        """What `backend` spent (`usage`, over `seconds`) on one expansion or ramification."""
        return cls(
            forward_calls=usage.forward_calls,
            model_tokens=usage.model_tokens,
            prefill_tokens=usage.prefill_tokens,
            seconds=seconds,
            backend=backend.name,
            model=backend.model_name,
        )

    def to_dict(self) -> dict:
        return {
            "forward_calls": self.forward_calls,
            "model_tokens": self.model_tokens,
            "prefill_tokens": self.prefill_tokens,
            "seconds": round(self.seconds, 3),
            "backend": self.backend,
            "model": self.model,
        }


@dataclass(frozen=True)
class SearchResult:
    suggestions: list[Suggestion]
    tree: TreeNode
    stats: SearchStats
    context_ids: tuple[int, ...]  # the context searched (the story's end if it was too long)
    typed: str = ""  # healed: the text typed after `context_ids`, which suggestions follow
    pruned: tuple[Pruned, ...] = ()  # the branches a guard (bans, repetition) pruned
    notes: tuple[str, ...] = ()  # what the writer should know of this search (bias unreached)


ProgressCallback = Callable[[Progress], None]


def expand(
    backend: Backend,
    context_ids: list[int],
    params: SearchParams,
    *,
    progress: ProgressCallback | None = None,
    healing: bool = True,
    guard: Guard | None = None,
) -> SearchResult:
    """Grow the suggestion tree after `context_ids`, healed (`weave.search.healing`) unless
    `healing` is False (a benchmark's "before"); a `guard` (`weave.story.bans`, compiled
    for the story that ends the context) prunes candidates before the cutoff, and its
    list's bias (`weave.story.bias`) reweighs them.

    Raises ValueError for an empty context or one that leaves no room for `max_depth` in
    the model's window (`check_fits`), and lets `BackendError` through untouched.
    """
    if not context_ids:
        raise ValueError("The story is empty: write a few words first.")
    check_fits(context_ids, backend.context_length, params.max_depth)
    context = list(context_ids)
    started, usage_before = time.perf_counter(), backend.stats.snapshot()
    healed = heal(context, backend.detokenize, backend.tokenize) if healing else None
    if healed is not None:
        context = list(healed.context)
        guard = guard.before(healed.typed) if guard is not None else None
    bias = spelled(guard.bans, backend) if guard is not None else None
    search = _Search(backend, context, params, progress, started, usage_before, healed, guard,
                     bias)  # fmt: skip
    with backend.searching():  # a backend may hold its background work back till the end
        root = search.run()
    usage = backend.stats.snapshot() - usage_before
    typed, tokens = (healed.typed, healed.tokens) if healed else ("", 0)
    pooled = suggestions_from(search.finished, params.score, typed=typed, healed=tokens)
    suggestions = distinct_rows(pooled, params.score)
    return SearchResult(
        suggestions=suggestions[: params.max_suggestions],
        tree=root,
        stats=SearchStats.of(backend, usage, time.perf_counter() - started),
        context_ids=tuple(context),
        typed=typed,
        pruned=tuple(search.pruned),
        notes=search.asker.notes(),
    )


def check_fits(context: Sequence[int], context_length: int | None, room: int) -> None:
    """Raise ValueError unless `context` and `room` more tokens fit the model's window.

    The search never cuts: the one window cut is `weave.story.context.build_context`'s,
    made before the context is sent, so a search's ids are the ids its node's context has.
    """
    if context_length is not None and len(context) + room > context_length:
        raise ValueError(
            f"a context of {len(context):,} tokens and {room} more do not fit the model's "
            f"{context_length:,}: the story was not fitted to the window"
        )


def _has_word(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def stop_cut(text: str) -> int | None:
    """Where auto-stop cuts `text`: just after the first '.' or ',' past its leading ones."""
    body = len(text) - len(text.lstrip(STOP_CHARS + " \t\n"))
    for i in range(body, len(text)):
        if text[i] in STOP_CHARS:
            return i + 1
    return None


class _Search:
    """One expansion's state: the tree, the finished beams, what the guard pruned."""

    def __init__(self, backend, context, params, progress, started, usage_before,
                 healed: Healing | None, guard: Guard | None, bias: TokenBias | None):  # fmt: skip
        self.backend: Backend = backend
        self.context: list[int] = context
        self.params: SearchParams = params
        self.progress: ProgressCallback | None = progress
        self.started: float = started
        self.usage_before: Usage = usage_before
        self.root = TreeNode(None, b"", 0.0)
        self.finished: list[TreeNode] = []
        self.held: Constraint | None = healed.constraint if healed else None
        self.typed: str = healed.typed if healed else ""
        # Past the typed text a beam has max_depth tokens (OVERRUN more to reach a word);
        # spelling the typed text takes at most one token a byte.
        self.depths = params.max_depth + len(self.typed.encode("utf-8")) + OVERRUN
        self.guard: Guard | None = guard
        self.pruned: list[Pruned] = []
        self.bias: TokenBias | None = bias  # the guard's list's bias, if it has one
        self.asker = Asker(backend, context, params, self.held, bool(guard), bias)

    def run(self) -> TreeNode:
        if self.progress is not None:  # a long story's first reading shows progress too
            self.backend.read_ahead(self.context, self.asker.k(0), self._report_reading)
        live = [Beam(self.root, state=self.guard.root() if self.guard else None)]
        if self.bias is not None and self.guard is not None:
            live[0].bias = self.bias.root(self.context, self.guard.story_text)
        try:
            for depth in range(self.depths):
                if not live:
                    break
                candidates = self.asker.candidates(live, len(self.finished))
                capped = len(self.finished) + len(live) >= self.params.max_suggestions
                live = self._grow(live, candidates, capped)
                self._report(depth, live)
        finally:
            for beam in live:  # a search cut short by an error leaves no chain running
                drop_chain(beam)
        return self.root

    def _past_typed(self, node: TreeNode) -> bool:
        """Whether the beam ending at `node` spelled something after the typed text: its
        last token chose a word of its own (" eyes" after a typed " ", not " ey" after
        " ey"), so the next choice is narrower."""
        return len(node.piece_path()) > len(self.typed.encode("utf-8"))

    def _grow(self, live, candidates, capped) -> list[Beam]:
        budget = self.params.max_suggestions - len(self.finished) - len(live)
        next_live: list[Beam] = []
        for beam, options in zip(live, candidates, strict=True):
            room, states = budget if not capped else 0, {}
            cutoff = self.params.cutoff_at(beam.free)
            if self.guard is not None:
                options, states = self._screen(beam, options, room, cutoff)
            chosen = self._choose(options, room, cutoff)
            if not chosen:
                self._finish(beam.node)  # nothing but control tokens: the beam ends here
                drop_chain(beam)
                continue
            budget -= len(chosen) - 1
            # A greedy chain went on through the model's top token (before a ban or a bias
            # passed it over); only that child inherits it.
            on_chain = chosen[0].token_id == beam.greedy
            passed_on = False
            for i, cand in enumerate(chosen):
                child = beam.node.add_child(cand.token_id, cand.piece, cand.logprob, open=cand.open)
                free = beam.free + 1 if self._past_typed(child) else 0
                state = states.get(cand.token_id)
                if self._ends(child, free) or (capped and self.params.rule == "v03"):
                    self._finish(child)
                    continue
                bias = self._bias_after(beam, cand)
                if i == 0 and on_chain and beam.chain is not None:
                    next_live.append(Beam(child, beam.chain, beam.taken, state, free, bias))
                    passed_on = True
                else:
                    next_live.append(Beam(child, state=state, free=free, bias=bias))
            if not passed_on:
                drop_chain(beam)
        return next_live

    def _bias_after(self, beam: Beam, cand: Candidate) -> BiasState | None:
        if self.bias is None or beam.bias is None:
            return None
        return self.bias.step(beam.bias, cand.token_id, cand.piece)

    def _screen(self, beam: Beam, options: list[Candidate], room: int, cutoff: float):
        """The guard's view of a beam's candidates: those it keeps (biased, re-sorted) and
        each one's state. The pruned ones that the beam would have taken are recorded;
        leaving them out gives their room to the next candidates."""
        kept, pruned = self.guard.screen(beam.state, options)
        if pruned:
            biased = sorted([c for c, _ in kept] + [c for c, _ in pruned], key=lambda c: -c.logprob)
            taken = {c.token_id for c in self._choose(biased, room, cutoff)}
            before = beam.node.full_text()
            for cand, why in pruned:
                if cand.token_id in taken:
                    text = before + cand.piece.decode("utf-8", "replace")
                    self.pruned.append(Pruned(text, why))
        return [c for c, _ in kept], {c.token_id: state for c, state in kept}

    def _choose(self, options: list[Candidate], room: int, cutoff: float) -> list[Candidate]:
        """The first usable candidate, then splits while they clear the cutoff and fit:
        under the `relative` rule the cutoff is a share of the first one's probability,
        under `v03` a probability."""
        usable = [c for c in options if c.token_id not in self.backend.special_token_ids]
        if not usable:
            return []
        chosen = [usable[0]]
        least = cutoff
        if self.params.rule == "relative":
            least *= math.exp(usable[0].logprob)
        for cand in usable[1:]:
            if math.exp(cand.logprob) < least or room <= 0:
                break
            if self.params.split_limit and len(chosen) >= self.params.split_limit:
                break
            chosen.append(cand)
            room -= 1
        return chosen

    def _ends(self, node: TreeNode, free: int) -> bool:
        """Whether the beam ending at `node`, `free` of whose tokens reach past the typed
        text, is finished: auto-stop ended it, or it has `max_depth` such tokens, holding a
        word and no half character (else it may go on `OVERRUN` tokens more for them)."""
        if self._stops(node):
            return True
        if free < self.params.max_depth:
            return False
        done = node.whole() and _has_word(self._after(node))
        return done or free >= self.params.max_depth + OVERRUN

    def _after(self, node: TreeNode) -> str:
        """The beam's text after what the writer typed."""
        return node.full_text()[len(self.typed) :]

    def _stops(self, node: TreeNode) -> bool:
        """Auto-stop, read after the typed text: a stop ends a beam once it holds a word."""
        if not self.params.auto_stop or inside_typed(self.held, node):
            return False
        text = self._after(node)
        cut = stop_cut(text)
        if cut is None:
            return False
        if cut < len(text) or not node.whole():
            node.cut = len(self.typed) + cut
        return True

    def _finish(self, node: TreeNode) -> None:
        if node.parent is None:
            return
        node.finished = True
        self.finished.append(node)

    def _report_reading(self, read: int, tokens: int) -> None:
        self._send(0, 0, story_read=read, story_tokens=tokens)

    def _report(self, depth: int, live: list[Beam]) -> None:
        self._send(depth + 1, len(live))

    def _send(self, depth: int, beams_live: int, *, story_read=0, story_tokens=0) -> None:
        if self.progress is None:
            return
        latest = self.finished[-1].text() if self.finished else ""
        self.progress(
            Progress(
                depth=depth,
                beams_done=len(self.finished),
                beams_live=beams_live,
                tokens_evaluated=(self.backend.stats.snapshot() - self.usage_before).model_tokens,
                seconds=time.perf_counter() - self.started,
                latest=latest,
                story_read=story_read,
                story_tokens=story_tokens,
            )
        )
