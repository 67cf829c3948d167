"""The search's knobs: `SearchParams`, each number with its bounds, the two rules and their
splitting knobs (`RULE_KNOBS`), and what a story saves of them and reads back.

The bounds are declared once, on the fields (`weave.bounds`): the page's sliders, the
command line and config.toml all read them here. A story keeps the fields it changed
(`SearchParams.to_saved`); reading them back (`SearchParams.from_saved`) takes what its
fields take and names each value it refuses, never clamping one.

Owns: the parameters and their saved form. Not: the search they steer
(`weave.search.beams`), config.toml (`weave.config`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, get_args

from weave.bounds import Bounded, bound_of, bounded, one_of, problem, shown
from weave.search.tree import Score

MAX_CANDIDATES = 100  # the most candidates asked per beam: max_suggestions' upper bound
STOP_CHARS = ".,"  # what auto-stop ends a beam on

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
class SearchParams(Bounded):
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

    def under(self, rule: Rule) -> SearchParams:
        """These parameters under `rule`: as they are if they are its already, else with
        its splitting knobs as LLooM sets them (`RULE_KNOBS`)."""
        return self if rule == self.rule else replace(self, rule=rule, **RULE_KNOBS[rule])

    def cutoff_at(self, free: int) -> float:
        """The cutoff for a beam `free` of whose tokens reach past the typed text: scaled
        by the multiplier once per such token (the tokens given back to healing, which only
        spell what the writer typed, do not scale it)."""
        return self.cutoff * self.multiplier**free

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
