"""Bias: a writer's favoured and disfavoured phrases, on the tokens that spell them.

A biased rule of a writer's list (`weave.story.bans.BanRule` with a weight, in
log-probability units: + favours, - disfavours) is compiled with the model's tokenizer
into its spellings (`TokenBias`), NovelAI-style: the token ids of each variant of its
text, with and without a leading space, and unless the rule is case-sensitive as written,
in lower case and with its first letter upper case ("sea": "sea", " sea", "Sea", " Sea").
A beam carries a `BiasState`; at each step the bias names the ids it weighs next
(`TokenBias.weights`):
  - the first token of every spelling, where a phrase may start: anywhere for a spelling
    that starts with a space (or one of a rule that is not whole-word, or whose text
    starts with a character that is no letter, digit or underscore), else only where the
    text so far ends at a word edge (the story's start, a space, punctuation);
  - the next token of each spelling the beam has begun, and only that one: after " Pine"
    comes "apple"; "apple" alone, or a token that merely ends like the phrase's start
    ("woman's" for "sea"), is weighed by nothing.
A spelling the story's last ids begin is under way at the search's root (`root`). A
favoured phrase is favoured until the beam has spelled it once; a disfavoured one stays
so. The weights of several rules naming one id add up.

`reweighed` turns a beam's candidates, as a backend gives them (its top-k and, where it
can, the log-probs of the ids the bias named: `Backend.top_logprobs_also`), into those
of the biased distribution, softmax(logits + w) over the whole vocabulary: with p_t the
model's probability of a biased id t, Z = 1 + sum p_t (e^w_t - 1), and each log-prob
becomes lp + w - log Z, so nothing is ever more likely than certain. A biased id the
backend did not weigh counts as unlikely enough to leave Z as it is (its share is below
the top-k's last).

This module knows nothing of searches or pages, and of a backend only its tokenizer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from weave.story.phrases import decode_whole, is_word_char

if TYPE_CHECKING:  # types only: the story layer loads no backend
    from backends.base import Backend, Candidate
    from weave.story.bans import BanRule, Bans


@dataclass(frozen=True)
class Spelling:
    """One variant of a rule's text as the model's token ids; `begun[j - 1]` is the text
    of its first j ids (for the story's end, `TokenBias.root`)."""

    ids: tuple[int, ...]
    rule: int  # its rule's index among the biased rules
    at_edge: bool  # it may start only where the text ends at a word edge
    begun: tuple[str, ...]


@dataclass(frozen=True)
class BiasState:
    """Where a beam stands for the bias: the spellings it has begun, each with the index of
    the id it spells next; whether its text ends at a word edge; the favoured rules it has
    spelled (no longer favoured); a character's bytes split between tokens."""

    going: frozenset[tuple[int, int]] = frozenset()
    edge: bool = True
    spelled: frozenset[int] = frozenset()
    pending: bytes = b""


class TokenBias:
    """A list's biased rules compiled for one tokenizer (see the module docstring)."""

    def __init__(
        self,
        rules: Sequence[BanRule],
        tokenize: Callable[[str], list[int]],
        detokenize: Callable[[list[int]], str],
    ) -> None:
        self.weights = tuple(float(r.weight) for r in rules)
        self.favours = any(w > 0 for w in self.weights)
        self.spellings = tuple(_spellings(rules, tokenize, detokenize))
        self._by_first: dict[int, list[int]] = {}  # first id -> spellings
        self._within: dict[int, list[tuple[int, int]]] = {}  # id -> (spelling, next index)
        for s, spelling in enumerate(self.spellings):
            self._by_first.setdefault(spelling.ids[0], []).append(s)
            for j in range(1, len(spelling.ids)):
                self._within.setdefault(spelling.ids[j - 1], []).append((s, j))
        # Per word edge or not: the first ids a beam may start a spelling with, each with
        # its rules and their summed weight (a beam that spelled no favoured rule yet).
        self._starts = {edge: self._start_rules(edge) for edge in (False, True)}
        self._start_sums = {
            edge: {i: self._sum(rules) for i, rules in starts.items()}
            for edge, starts in self._starts.items()
        }

    def _start_rules(self, edge: bool) -> dict[int, frozenset[int]]:
        starts: dict[int, set[int]] = {}
        for spelling in self.spellings:
            if edge or not spelling.at_edge:
                starts.setdefault(spelling.ids[0], set()).add(spelling.rule)
        return {i: frozenset(rules) for i, rules in starts.items()}

    def root(self, context: Sequence[int], text: str) -> BiasState:
        """The state after `context` (the ids the search continues), whose text ends with
        `text` (the story's, for the word edges): the spellings its last ids begin."""
        edge = not text or not is_word_char(text[-1])
        going = set()
        for s, j in self._within.get(context[-1], ()) if context else ():
            spelling = self.spellings[s]
            if tuple(context[-j:]) != spelling.ids[:j]:
                continue
            if not spelling.at_edge or _edge_before(text, spelling.begun[j - 1]):
                going.add((s, j))
        return BiasState(frozenset(going), edge)

    def weights_at(self, state: BiasState) -> dict[int, float]:
        """{token id: its summed weight} for the ids the bias weighs after `state`."""
        starts = self._starts[state.edge]
        if state.spelled:  # some favoured rules count no more: summed afresh
            named = {i: rules - state.spelled for i, rules in starts.items()}
            weights = {
                i: sum(self.weights[r] for r in rules) for i, rules in named.items() if rules
            }
        else:
            named, weights = starts, dict(self._start_sums[state.edge])
        more: dict[int, set[int]] = {}  # the begun spellings' next ids, rules not counted
        for s, j in state.going:
            spelling = self.spellings[s]
            i, rule = spelling.ids[j], spelling.rule
            if rule not in named.get(i, ()):
                more.setdefault(i, set()).add(rule)
        for i, rules in more.items():
            weights[i] = weights.get(i, 0.0) + self._sum(rules)
        return weights

    def _sum(self, rules: Iterable[int]) -> float:
        return sum(self.weights[r] for r in rules)

    def step(self, state: BiasState, token_id: int, piece: bytes) -> BiasState:
        """The state after a token (its id and bytes)."""
        going, done = set(), set()
        for s, j in state.going:
            spelling = self.spellings[s]
            if spelling.ids[j] == token_id:
                _advance(spelling, s, j + 1, going, done)
        for s in self._by_first.get(token_id, ()):
            spelling = self.spellings[s]
            if (state.edge or not spelling.at_edge) and spelling.rule not in state.spelled:
                _advance(spelling, s, 1, going, done)
        favoured = {r for r in done if self.weights[r] > 0}
        text, pending = decode_whole(state.pending + piece)
        if pending:
            edge = False  # inside a character
        elif text:
            edge = not is_word_char(text[-1])
        else:
            edge = state.edge
        spelled = state.spelled | favoured
        going = {(s, j) for s, j in going if self.spellings[s].rule not in spelled}
        return BiasState(frozenset(going), edge, spelled, pending)


def spelled(bans: Bans, backend: Backend) -> TokenBias | None:
    """`bans`' biased rules compiled for `backend`'s tokenizer, once per list and model
    (kept with the list's compiled phrases); None where the list biases nothing."""
    compiled = bans.compiled()
    if not compiled.biased:
        return None
    key = (backend.name, backend.model_name, backend.url)
    found = compiled.spelled.get(key)
    if found is None:
        made = TokenBias(compiled.biased, backend.tokenize, backend.detokenize)
        found = compiled.spelled.setdefault(key, made)
    return found


def reweighed(options: Sequence[Candidate], weights: Mapping[int, float]) -> list[Candidate]:
    """`options` (a beam's candidates, most likely first) under the bias `weights`
    ({id: weight}): each log-prob that of the biased distribution over the whole
    vocabulary (see the module docstring), most likely first (ties keep their order)."""
    biased = [(c.logprob, weights[c.token_id]) for c in options if c.token_id in weights]
    if not biased:
        return list(options)
    terms = [lp + w for lp, w in biased]
    mass = _logsumexp(lp for lp, _ in biased)  # log of the biased ids' probability
    if mass < 0:
        terms.append(_log1mexp(mass))  # the rest of the vocabulary, unbiased
    log_z = _logsumexp(terms)
    out = [
        replace(c, logprob=min(0.0, c.logprob + weights.get(c.token_id, 0.0) - log_z))
        for c in options
    ]
    out.sort(key=lambda c: -c.logprob)
    return out


def variants(rule: BanRule) -> list[str]:
    """The texts a rule's phrase is spelled as: as written, and unless it is
    case-sensitive in lower case and with its first letter upper case; each also with a
    leading space (where it has none)."""
    forms = [rule.text]
    if not rule.case_sensitive:
        lower = rule.text.lower()
        forms += [lower, lower[:1].upper() + lower[1:]]
    forms += [" " + f for f in forms if not f[:1].isspace()]
    return list(dict.fromkeys(forms))


def _spellings(rules, tokenize, detokenize) -> Iterable[Spelling]:
    seen: set[tuple[int, ...]] = set()
    for r, rule in enumerate(rules):
        for text in variants(rule):
            ids = tuple(tokenize(text))
            if not ids or (ids, r) in seen:
                continue
            seen.add((ids, r))
            at_edge = rule.whole_words and is_word_char(text[0])
            begun = tuple(detokenize(list(ids[:j])) for j in range(1, len(ids)))
            yield Spelling(ids, r, at_edge, begun)


def _advance(spelling: Spelling, s: int, j: int, going: set, done: set) -> None:
    """Spelling `s` has spelled its first `j` ids: under way, or done."""
    if j < len(spelling.ids):
        going.add((s, j))
    else:
        done.add(spelling.rule)


def _edge_before(text: str, begun: str) -> bool:
    """Whether `text` ends with `begun` after a word edge."""
    if not begun or not text.endswith(begun):
        return False
    return len(text) == len(begun) or not is_word_char(text[-len(begun) - 1])


def _logsumexp(values: Iterable[float]) -> float:
    values = list(values)
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def _log1mexp(x: float) -> float:
    """log(1 - e^x) for x < 0, accurate near 0 and far below it."""
    return math.log(-math.expm1(x)) if x > -math.log(2) else math.log1p(-math.exp(x))
