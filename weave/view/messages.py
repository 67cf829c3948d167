"""The page's status lines and messages about searches and draws: text, without Streamlit.

What the bars measure (`bar_caption`), a search's status line (live, when done, and
under a node's suggestions: `shown_status`), a draw's, how far a long story is read,
what a cached read saved, and the messages after an automatic accept or a thin search.
How model text itself is shown (escaped, shaded, made literal for markdown) is
`weave.view.present`'s; the page (`lloom.py`) puts these strings into widgets.
"""

from __future__ import annotations

from collections.abc import Sequence

from weave.search.beams import Progress, SearchParams, SearchResult, SearchStats
from weave.search.ramify import RamifyResult
from weave.search.tree import Score, Suggestion
from weave.search.worth import worth
from weave.view.present import md, one_line, quoted, share_text, shorten

FEW = 5  # fewer suggestions than this (or than asked for) bring the hint
LONG_STORY = 8_000  # characters; the first search of a longer story says it will be slow
# how varied: fewer effective choices than each number, these words ("many ways on" past)
VARIETY = (
    (1.5, "one clear favourite"),
    (3.5, "two or three ways on"),
    (8.0, "a handful of ways on"),
)
# how sure: at least this part of the model's probability, these words
SURENESS = ((0.5, "the model is sure of these"), (0.05, "the model finds these likely"))


def bar_caption(score: Score, *, ahead: bool = False) -> str:
    """What the bars measure, in words (`ahead`: and what a ⚡ mark by one says)."""
    said = _bars(score)
    return f"{said} ⚡: its next suggestions are ready (made while you read)." if ahead else said


def _bars(score: Score) -> str:
    if score == "lloom":
        return "Bars: each suggestion's share of LLooM's score (its tokens' probabilities summed)."
    if score == "words":
        return ("Bars: each suggestion's share of the ranking (its probability per word, "
                "an unfinished clause marked down).")  # fmt: skip
    return "Bars: each suggestion's share of all the suggestions' probability (the unlisted too)."


def search_status(result: SearchResult, *, ahead: bool = False, kept: bool = False) -> str:
    """The search's one line as a writer reads it: how many, from where or how long (from
    look-ahead while the writer read, kept from an earlier search, from the cache, or its
    time), what they are worth in words (`worth_words`), then what the search could not do
    (`SearchResult.notes`); the figures behind those words are `search_figures`', a hover
    away."""
    s, n = result.stats, len(result.suggestions)
    found = f"{n} suggestion{'s' if n != 1 else ''}"
    if result.pruned:  # the bans panel lists which
        found += f" · 🚫 {len(result.pruned)} pruned by the bans"
    if ahead:
        line = f"{found} from look-ahead, {s.seconds:.1f} s while you read"
    elif kept:
        line = f"{found} kept from an earlier search here ({s.seconds:.1f} s then)"
    elif from_cache(s):
        line = f"{found} from cache, {s.seconds:.1f} s"
    else:
        line = f"{found} in {s.seconds:.1f} s"
    line = f"{line} · {worth_words(result.suggestions)}" if result.suggestions else line
    return " · ".join([line, *result.notes])


def search_figures(result: SearchResult) -> str:
    """The figures behind a search's line (its tooltip): speed, and what the suggestions
    are worth (`worth_text`)."""
    s = result.stats
    rate = f"{s.model_tokens / s.seconds:,.0f} tokens/s" if s.seconds > 0 else "no time"
    worth_part = f" · {worth_text(result.suggestions)}" if result.suggestions else ""
    return f"{s.model_tokens:,} model tokens, {rate}{worth_part}"


def worth_words(suggestions: Sequence[Suggestion]) -> str:
    """What the suggestions are worth as a writer says it: how varied the ways on are
    (their effective choices) and how sure the model is of them (the part of its
    probability they hold)."""
    w = worth([s.probability for s in suggestions])
    varied = next((said for most, said in VARIETY if w.effective_choices < most), "many ways on")
    sure = next((said for least, said in SURENESS if w.mass_covered >= least),
                "the model could go many other ways")  # fmt: skip
    return f"{varied}; {sure}"


def worth_text(suggestions: Sequence[Suggestion]) -> str:
    """What the suggestions are worth (`weave.search.worth`), in its figures."""
    w = worth([s.probability for s in suggestions])
    return (f"{share_text(w.mass_covered)} of the model's probability in "
            f"{w.effective_choices:.1f} effective choices (sampling: at least about "
            f"{w.sampling_equivalent_n:,} draws for as much)")  # fmt: skip


def shown_status(result: SearchResult | None, source: str, *, failed: bool) -> str | None:
    """The status line (markdown) under a node's suggestions once `Offers.show` answered:
    how they were made (`source`, as `Shown` says), or that the search failed; None when
    there is nothing to say (no suggestions, or the node's earlier ones)."""
    if failed:
        return "⚠️ No suggestions: see below"
    if result is not None and source == "same":
        n = len(result.suggestions)
        return (f"✔️ The same {n} suggestion{'s' if n != 1 else ''}: nothing here changed "
                "since they were made, and the search makes the same tree each time")  # fmt: skip
    if result is None or source not in ("searched", "ahead", "kept"):
        return None
    kind = {"ahead": source == "ahead", "kept": source == "kept"}
    return f"✔️ {md(search_status(result, **kind))}"


def again_hint(cutoff: float, wider: float | None) -> str:
    """What 🔁 Again says when searching again would give the same tree: what would differ
    (`wider`: a lower cutoff to offer, None when the cutoff is as low as it goes)."""
    widen = (f", or widen the tree: cutoff {cutoff:g} → {wider:g} (more beginnings of "
             "suggestions)" if wider is not None else "")  # fmt: skip
    return f"For other suggestions here: draw samples (chance takes other ways on){widen}."


def draw_status(result: RamifyResult, *, asked: int) -> str:
    """A draw's one-line summary: its samples (of the `asked` for, with why any are
    missing: cut by the bans, or not going on from the word being typed) and its time."""
    s, n, cut = result.stats, len(result.samples), len(result.pruned)
    line = f"{n} of {asked} samples" if n < asked else f"{n} sample{'s' if n != 1 else ''}"
    line += f" in {s.seconds:.1f} s"
    if cut:
        line += f" · 🚫 {cut} cut by the bans"
    if (astray := asked - n - cut) > 0:
        line += f" · {astray} did not go on from the word you were typing"
    return line


def first_status(story: str) -> str:
    """The status line before a search's first report (a long story warns it is slow)."""
    if len(story) < LONG_STORY:
        return "Weaving…"
    return "Weaving… (a long story is read once and then kept: on a CPU this takes a while)"


def live_status(p: Progress) -> str:
    """The status line as a search goes: how far the story is read, then the depth, the
    beams found and growing, and the latest beam's text (as markdown, shown literally)."""
    if p.depth == 0:
        return read_so_far(p.story_read, p.story_tokens)
    latest = shorten(one_line(p.latest), 60)
    latest = f" · latest: “{md(latest)}”" if latest else ""
    return f"Weaving… depth {p.depth}, {p.beams_done} found, {p.beams_live} growing{latest}"


def read_so_far(read: int, total: int) -> str:
    return f"Reading the story… {read:,} of {total:,} tokens"


def reading_status(read: int, total: int) -> str:
    """The status line while a long story is read apart from its search: how far, and
    that the page goes on meanwhile."""
    return (f"{read_so_far(read, total)} · write or move on meanwhile: the suggestions "
            "come once it is read")  # fmt: skip


def from_cache(stats: SearchStats) -> bool:
    """Whether the backend computed nothing for this search (its cache held every answer)."""
    return stats.forward_calls == 0 and stats.model_tokens == 0


def cache_note(stats: SearchStats) -> str | None:
    """A line for the search's figures when they are zeros because nothing was computed."""
    if not from_cache(stats):
        return None
    return "No forward calls: every answer came from the cache of an earlier search."


# -- messages -------------------------------------------------------------------------------
def auto_accept_message(texts: Sequence[str]) -> str | None:
    """What accepting lone suggestions by themselves did, naming them; None for none.

    Args:
        texts: the accepted texts, in the order they were appended.
    """
    if not texts:
        return None
    if len(texts) == 1:
        return f"Accepted a lone suggestion by itself: {quoted(texts)}."
    return f"Accepted {len(texts)} lone suggestions, one after another: {quoted(texts)}."


def few_suggestions_hint(count: int, params: SearchParams) -> str | None:
    """LLooM v0.3's hint when a search brings back few suggestions, with the numbers that
    made it so; None when there are enough, or when no setting would give more."""
    if count >= min(FEW, params.max_suggestions):
        return None
    only = f"Only {count} suggestion{'s' if count != 1 else ''}"
    if params.cutoff > 0:
        grows = f", times {params.multiplier:g} per token" if params.multiplier > 1 else ""
        share = " as a share of its beam's likeliest token's" if params.rule == "relative" else ""
        return (
            f"{only} at cutoff {params.cutoff:g}{grows}: lower the cutoff for more variety "
            f"(a token starts a new suggestion only when its probability reaches it{share})."
        )
    if params.split_limit:
        return f"{only} at split limit {params.split_limit}: raise it for more variety."
    return None
