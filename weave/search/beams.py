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
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, get_args

from backends.base import Backend, Candidate, Chain, Usage
from weave.bounds import bound_of, bounded, check_bounds, one_of, problem, shown
from weave.search.healing import Constraint, Healing, heal, narrowed
from weave.search.rows import distinct_rows
from weave.search.tree import Score, Suggestion, TreeNode, suggestions_from
from weave.story.bias import BiasState, TokenBias, reweighed, spelled
from weave.story.guard import Guard, GuardState, Pruned

STOP_CHARS = ".,"
OVERRUN = 4  # tokens a beam may take past max_depth to reach its first word or a whole character
MAX_CANDIDATES = 100  # the most candidates asked per beam: max_suggestions' upper bound
GUARD_SPARE = 3  # candidates asked beyond the rule's under a guard, to fill pruned room
SPECIAL_SPARE = 2  # the most candidates asked beyond the rule's for control tokens skipped
MOST_ASKED = MAX_CANDIDATES + SPECIAL_SPARE + GUARD_SPARE  # the most one beam's step asks
UNREACHED = (
    "{backend} gives the log-probabilities of its top candidates only: a favoured phrase "
    "is favoured where the model ranks its first token among them, and never brought in "
    "from below"
)

Rule = Literal["relative", "v03"]
# Each rule's splitting knobs, as LLooM sets them. The relative rule's were chosen on real
# authors' prose (bench/bench_authors.py): wide at the first words, where a writer
# chooses (a share of 0.05 lets ~10-25 openings through a small model's flat first
# distribution, one where it is sure), no split from the fourth token on (0.05 x 3^3 > 1).
RULE_KNOBS: dict[str, dict[str, Any]] = {
    "relative": {"cutoff": 0.05, "multiplier": 3.0, "split_limit": 0},
    "v03": {"cutoff": 0.2, "multiplier": 1.0, "split_limit": 3},  # LLooM v0.3's page
}


@dataclass(frozen=True)
class SearchParams:
    """The knobs of one expansion. Each number carries its bounds (`weave.bounds`), which
    the page's sliders and the command line read: LLooM v0.3's page's, but for
    `max_suggestions`, which goes down to 1 (a script may want a few), and `multiplier`,
    up to 10 (the relative rule narrows its later depths by 3 a token).

    `rule` says what the cutoff is measured against: `relative` (the default), a share of
    the probability of the beam's likeliest candidate; `v03`, LLooM v0.3's, a probability
    (and the cap ends every live beam at once, as v0.3's did)."""

    cutoff: float = bounded(RULE_KNOBS["relative"]["cutoff"], 0.0, 1.0)
    multiplier: float = bounded(RULE_KNOBS["relative"]["multiplier"], 0.0, 10.0)
    split_limit: int = bounded(RULE_KNOBS["relative"]["split_limit"], 0, 10)
    max_depth: int = bounded(12, 1, 50)
    max_suggestions: int = bounded(25, 1, MAX_CANDIDATES)
    auto_stop: bool = True
    score: Score = one_of("words", *get_args(Score))
    rule: Rule = one_of("relative", *get_args(Rule))
    use_chains: bool | None = None  # None or True: greedy chains where the backend offers them

    def __post_init__(self) -> None:
        check_bounds(self)

    def under(self, rule: Rule) -> SearchParams:
        """These parameters under `rule`: as they are if they are its already, else with
        its splitting knobs as LLooM sets them (`RULE_KNOBS`)."""
        return self if rule == self.rule else replace(self, rule=rule, **RULE_KNOBS[rule])

    def to_saved(self, defaults: SearchParams) -> dict[str, Any]:
        """The fields a story keeps: those that differ from `defaults`, and the rule with
        any splitting knob, whose value means nothing without it."""
        saved = {f.name: getattr(self, f.name) for f in fields(self)
                 if getattr(self, f.name) != getattr(defaults, f.name)}  # fmt: skip
        if saved.keys() & RULE_KNOBS[self.rule].keys():
            saved["rule"] = self.rule
        return saved

    @classmethod
    def from_saved(
        cls, saved: Mapping[str, Any], defaults: SearchParams
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """What of a story's saved settings can stand in for `defaults`' fields.

        Returns (values, refused): each saved field's value where its field takes it (of
        the default's type, an int made a float for a float, within the field's bounds),
        and "field = value" for each saved one it cannot take, whose default stays: a
        saved value is never clamped. Keys that are not fields are not read; both follow
        `saved`'s order. A splitting knob saved without a rule was set before LLooM had
        one, under v0.3's rule: that rule comes with it.
        """
        values, refused, names = {}, [], {f.name for f in fields(cls)}
        for name, saved_value in saved.items():
            if name in names:
                value = _as_field(name, saved_value, like=getattr(defaults, name))
                if value is None:
                    refused.append(f"{name} = {shown(saved_value)}")
                else:
                    values[name] = value
        if values.keys() & RULE_KNOBS["v03"].keys() and "rule" not in saved:
            values["rule"] = "v03"
        return values, tuple(refused)


def _as_field(name: str, value: Any, *, like: Any) -> Any:
    """`value` as SearchParams' field `name` takes it (of `like`'s type, an int made a
    float for a float, inside the field's bounds), or None when it cannot be."""
    number = isinstance(like, float) and isinstance(value, int) and not isinstance(value, bool)
    if type(value) is not type(like) and not number:
        return None
    bound = bound_of(SearchParams, name)
    if bound is not None and problem(name, value, bound):
        return None
    return float(value) if number else value


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


@dataclass(eq=False)
class _Beam:
    """A live beam: its last node and the greedy chain it is on, if any: the top-k at the
    positions after `taken` of them are the beam's next (a backend may still be making
    them: indexing a chain waits for the positions it needs)."""

    node: TreeNode
    chain: Chain | None = None
    taken: int = 0
    state: GuardState | None = None  # where the beam stands for the guard, if any
    free: int = 0  # its tokens that reach past the typed text (all, when nothing was typed)
    bias: BiasState | None = None  # where the beam stands for the bias, if any
    weights: dict[int, float] = field(default_factory=dict)  # its bias at this depth
    greedy: int | None = None  # the model's top token at this depth (a chain went on by it)


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
        notes=search.notes(),
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


def _next_of(beam: _Beam) -> list[Candidate] | None:
    """The beam's next top-k from its chain (waiting for it), or None where it ran out."""
    if beam.chain is None:
        return None
    try:
        top = beam.chain[beam.taken]
    except IndexError:
        return None
    beam.taken += 1
    return top


def _ran_out(beam: _Beam) -> bool:
    """Whether the beam's chain is known to hold no next position, without waiting: a
    chain still arriving tells its length once its end has come (`known_length`)."""
    if beam.chain is None:
        return False
    length = beam.chain.known_length()
    return length is not None and beam.taken >= length


def _drop_chain(beam: _Beam) -> None:
    """Let go of the beam's chain: a backend may stop making positions no beam will use."""
    if beam.chain is not None:
        beam.chain.close()
    beam.chain = None


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
    """One expansion's state: the frontier, the finished beams, the running cutoff."""

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
        self.reach: bool | None = None  # whether the backend weighs the ids a bias names

    def run(self) -> TreeNode:
        if self.progress is not None:  # a long story's first reading shows progress too
            self.backend.read_ahead(self.context, self._k(0), self._report_reading)
        live = [_Beam(self.root, state=self.guard.root() if self.guard else None)]
        if self.bias is not None and self.guard is not None:
            live[0].bias = self.bias.root(self.context, self.guard.story_text)
        try:
            for depth in range(self.depths):
                if not live:
                    break
                candidates = self._candidates(live)
                capped = len(self.finished) + len(live) >= self.params.max_suggestions
                live = self._grow(live, candidates, capped)
                self._report(depth, live)
        finally:
            for beam in live:  # a search cut short by an error leaves no chain running
                _drop_chain(beam)
        return self.root

    # -- asking the backend ----------------------------------------------------------
    def _cutoff(self, free: int) -> float:
        """The cutoff for a beam `free` of whose tokens reach past the typed text: scaled
        by the multiplier once per such token (the tokens given back to healing, which only
        spell what the writer typed, do not scale it)."""
        return self.params.cutoff * self.params.multiplier**free

    def _k(self, free: int) -> int:
        """How many candidates a beam `free` tokens past the typed text can use."""
        room = self.params.max_suggestions
        limit = self.params.split_limit or room
        cutoff = self._cutoff(free)
        if self.params.rule == "relative":
            if cutoff > 1:
                limit = 1
        elif cutoff * (MAX_CANDIDATES + 1) > 1:  # at most 1/cutoff tokens can clear it
            limit = min(limit, int(1 / cutoff) + 1)
        # Control tokens are skipped, and a guard prunes some: ask for a few more.
        special = min(len(self.backend.special_token_ids), SPECIAL_SPARE)
        spare = special + (GUARD_SPARE if self.guard else 0)
        return max(1, min(limit, room, MAX_CANDIDATES)) + spare

    def _candidates(self, live: list[_Beam]) -> list[list[Candidate]]:
        """Each live beam's top-k: a beam held to the typed text its allowed candidates
        (`_narrowed`), the others theirs (`_free`); under a bias, reweighed."""
        for beam in live:
            beam.weights = self.bias.weights_at(beam.bias) if self.bias is not None else {}
        held = [beam for beam in live if self._held(beam)]
        free = [beam for beam in live if not self._held(beam)]
        found = dict(zip(free, self._free(free), strict=True)) if free else {}
        for beam in free:
            options = found[beam]
            beam.greedy = options[0].token_id if options else None
            if beam.weights:
                found[beam] = reweighed(options, beam.weights)
        found.update(self._narrowed(held))
        return [found[beam] for beam in live]

    def _held(self, beam: _Beam) -> bool:
        return self._inside_typed(beam.node)

    def _past_typed(self, node: TreeNode) -> bool:
        """Whether the beam ending at `node` spelled something after the typed text: its
        last token chose a word of its own (" eyes" after a typed " ", not " ey" after
        " ey"), so the next choice is narrower."""
        return len(node.piece_path()) > len(self.typed.encode("utf-8"))

    def _inside_typed(self, node: TreeNode) -> bool:
        """Whether the beam ending at `node` has not yet spelled all the typed text."""
        return self.held is not None and self.held.active(node.piece_path())

    def _narrowed(self, held: list[_Beam]) -> dict[_Beam, list[Candidate]]:
        """The candidates of beams still inside the typed text that agree with it, in one
        call asking `heal_k` of each (one position: a greedy chain would follow a token
        the constraint may refuse); under a bias, narrowed first, then reweighed."""
        if not held:
            return {}
        assert self.held is not None
        contexts = [self.context + beam.node.token_ids() for beam in held]
        k = self._k(0)
        answers = self._ask(contexts, max(k, self.backend.heal_k), held)
        found = {}
        for beam, options in zip(held, answers, strict=True):
            beam.greedy = None  # no chain
            done = beam.node.piece_path()
            if beam.weights:
                found[beam] = reweighed(narrowed(self.held, done, options, len(options)),
                                        beam.weights)[:k]  # fmt: skip
            else:
                found[beam] = narrowed(self.held, done, options, k)
        return found

    def _free(self, live: list[_Beam]) -> list[list[Candidate]]:
        """Each free beam's top-k: new beams are asked first (a backend that streams its
        chains answers while the server still makes the older ones' next positions),
        then the older beams take theirs from their chains. A beam whose chain is known
        to have run out is asked with the new ones; one found out only on reading (a
        streamed chain that ended unannounced) is asked again after."""
        for beam in live:
            if _ran_out(beam):
                _drop_chain(beam)
        found = self._fill([beam for beam in live if beam.chain is None], len(live))
        ran_out = []
        for beam in live:
            if beam in found:
                continue
            top = _next_of(beam)
            if top is None:
                _drop_chain(beam)
                ran_out.append(beam)
            else:
                found[beam] = top
        found.update(self._fill(ran_out, len(live)))
        return [found[beam] for beam in live]

    def _fill(self, needy: list[_Beam], live: int) -> dict[_Beam, list[Candidate]]:
        """Ask the backend about `needy` beams (of `live`) in one call: greedy chains where
        they pay (each beam keeps its chain, as long as `_chain_length`), else the top-k
        here. Returns each beam's top-k. While a phrase is favoured, and the backend can
        weigh the ids it names, no chain: a chain's later positions would need the ids the
        bias names there, which depend on the path the server has not made yet."""
        if not needy:
            return {}
        contexts = [self.context + beam.node.token_ids() for beam in needy]
        lengths = [self._chain_length(beam, live) for beam in needy]
        favoured = self.bias is not None and self.bias.favours and self.reach is not False
        if self.params.use_chains is not False and max(lengths) > 1 and not favoured:
            least = min(beam.free for beam in needy)
            k = max(self._k(f) for f in range(least, self.params.max_depth))
            stops = tuple(STOP_CHARS) if self.params.auto_stop else ()
            chains = self.backend.greedy_chains(contexts, k, lengths, stops=stops)
            if chains is not None:
                for beam, chain in zip(needy, chains, strict=True):
                    beam.chain, beam.taken = chain, 0
                return {beam: _next_of(beam) or [] for beam in needy}
        answers = self._ask(contexts, max(self._k(b.free) for b in needy), needy)
        return dict(zip(needy, answers, strict=True))

    def _ask(self, contexts: list[list[int]], k: int, beams: list[_Beam]) -> list[list[Candidate]]:
        """Each context's top-k, and beside it the log-probs of the ids its beam's bias
        names where the backend can weigh them (once it said it cannot, never asked again)."""
        if self.reach is not False and any(beam.weights for beam in beams):
            asked = [sorted(beam.weights) for beam in beams]
            answers = self.backend.top_logprobs_also(contexts, k, asked)
            self.reach = answers is not None
            if answers is not None:
                return answers
        return self.backend.top_logprobs(contexts, k)

    def notes(self) -> tuple[str, ...]:
        """What the writer should know of this search: that a favoured phrase could not be
        brought in from below the backend's top candidates."""
        if self.reach is False and self.bias is not None and self.bias.favours:
            return (UNREACHED.format(backend=self.backend.name),)
        return ()

    def _chain_length(self, beam: _Beam, live: int) -> int:
        """How far along its greedy path a beam is worth asking about: to its depth (a
        beam going on past it to reach a word asks again); under v0.3's rule, not far
        past where the cap is likely to end it. There, once finished plus live beams reach
        the cap, every beam takes its top token and ends, so positions asked beyond would
        be computed for nothing; the room left lasts about room / live depths if each beam
        splits once a depth, and the depth that reaches the cap still needs one more
        position. (A path asked too short only costs asking again.)"""
        remaining = max(1, self.params.max_depth - beam.free)
        if self.params.rule != "v03":
            return remaining
        room = self.params.max_suggestions - len(self.finished) - live
        return 1 if room <= 0 else min(remaining, 1 + -(-room // max(live, 1)))

    # -- growing the tree --------------------------------------------------------------
    def _grow(self, live, candidates, capped) -> list[_Beam]:
        budget = self.params.max_suggestions - len(self.finished) - len(live)
        next_live: list[_Beam] = []
        for beam, options in zip(live, candidates, strict=True):
            room, states = budget if not capped else 0, {}
            cutoff = self._cutoff(beam.free)
            if self.guard is not None:
                options, states = self._screen(beam, options, room, cutoff)
            chosen = self._choose(options, room, cutoff)
            if not chosen:
                self._finish(beam.node)  # nothing but control tokens: the beam ends here
                _drop_chain(beam)
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
                    next_live.append(_Beam(child, beam.chain, beam.taken, state, free, bias))
                    passed_on = True
                else:
                    next_live.append(_Beam(child, state=state, free=free, bias=bias))
            if not passed_on:
                _drop_chain(beam)
        return next_live

    def _bias_after(self, beam: _Beam, cand: Candidate) -> BiasState | None:
        if self.bias is None or beam.bias is None:
            return None
        return self.bias.step(beam.bias, cand.token_id, cand.piece)

    def _screen(self, beam: _Beam, options: list[Candidate], room: int, cutoff: float):
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
        if not self.params.auto_stop or self._inside_typed(node):
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

    def _report(self, depth: int, live: list[_Beam]) -> None:
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
