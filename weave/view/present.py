"""How the page shows model text: text and HTML, without Streamlit.

Owns how model text is shown (whitespace made visible, every character escaped), the
one-row suggestion (tokens shaded by probability, words a click takes it up to, the
texts it stands for), the edit box's text, the story's tokens with their alternatives,
the bars' shares, dates as shown (`when`), and text made literal for markdown (`md`,
`code`). The status lines and messages about searches and draws are
`weave.view.messages`'s. The page (`lloom.py`) puts these strings into widgets; the
plain-text ones go through `md` like any other text. This module does not search, rank
or pool (`weave.search.beams`, `weave.search.tree`) and draws no graph
(`weave.view.render`).
"""

from __future__ import annotations

import math
import re
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from backends.base import TokenAlternatives
from weave.search.tree import Score, Suggestion, without_prefix_space

VISIBLE = {"\n": "↵", "\r": "↵", "\t": "⇥"}
SPACE = "␣"  # a space where a space alone would not be seen
EDIT_MARKS = {"\n": "↵", "\t": "⇥"}  # what an edit box shows for what it cannot hold
QUOTED = 40  # characters of each suggestion quoted in a message
VARIANT_SHOWN = 80  # characters of each variant a row's "+n" lists
ALTERNATIVES_SHOWN = 5  # alternatives named in a story token's tooltip
SMALLEST_SHARE = 1e-6  # the least share `share_text` spells out
SHARE_TITLE = "Its share of the list (see the line under it); ⚡: its next suggestions are ready"
MARKDOWN = set("\\`*_[]<>$~|")  # characters markdown reads as markup
LINE_START = set("#-+=")  # ... and at the start of a line


# -- text -------------------------------------------------------------------------------
def visible(text: str) -> str:
    """Newlines and tabs as symbols, other control characters as U+2400 pictures or \\xNN,
    lone surrogates as U+FFFD: what a label or a line of HTML can show."""
    out = []
    for ch in text:
        if ch in VISIBLE:
            out.append(VISIBLE[ch])
        elif ord(ch) < 0x20:
            out.append(chr(0x2400 + ord(ch)))  # ␀ ␁ ... the Control Pictures block
        elif unicodedata.category(ch) == "Cc":
            out.append(f"\\x{ord(ch):02x}")
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def shown_text(text: str, *, prefix_space: bool) -> str:
    """A suggestion's text as a row shows it: without the prefix space when it is on
    (accepting it puts the space back: `weave.desk.spot.accepted_text`)."""
    return without_prefix_space(text) if prefix_space else text


def editable_text(text: str) -> str:
    """`text` for a one-line edit box: newlines '↵', tabs '⇥', leading spaces (all spaces
    of a text that is only spaces) '␣', so that lookalike suggestions differ visibly.
    `typed_text` reads the box back."""
    marked = "".join(EDIT_MARKS.get(ch, ch) for ch in text)
    body = marked.lstrip(" ")
    return SPACE * (len(marked) - len(body)) + body


def typed_text(box: str) -> str:
    """What an edit box filled by `editable_text` (and maybe edited) means as story text."""
    back = {mark: ch for ch, mark in EDIT_MARKS.items()} | {SPACE: " "}
    return "".join(back.get(ch, ch) for ch in box)


def quoted(texts: Sequence[str]) -> str:
    """Suggestions quoted in a sentence: visible, shortened, “…”, comma separated."""
    return ", ".join(f"“{shorten(visible(text), QUOTED)}”" for text in texts)


# -- one suggestion as one row of HTML ----------------------------------------------------
@dataclass(frozen=True)
class Words:
    """A row whose words a click takes it up to: each word, ending at one of `ends` (in
    the suggestion's text, `weave.desk.partial.word_ends`), posts `row@end` to the hidden
    box `box` (static/token_click.html)."""

    box: str
    row: str
    ends: tuple[int, ...]


def suggestion_html(
    suggestion: Suggestion, *, prefix_space: bool, shading: bool = True, words: Words | None = None
) -> str:
    """The suggestion as one block of HTML that wraps: each token shaded by its probability
    (with it as a tooltip) when `shading`; newlines '↵', tabs '⇥' and leading spaces '·'
    shown faintly, and the spaces of a text that is only whitespace as faint '␣' (the
    prefix space too, when it is all the suggestion is); the texts it stands for
    (`Suggestion.variants`) as a faint "+n" whose tooltip lists them.

    Args:
        suggestion: a ranked suggestion (its text may be cut inside its last token).
        prefix_space: drop one leading space, as the page shows suggestions.
        shading: shade tokens; else the text plainly, with the whitespace still visible.
        words: make each word a target a click takes the row up to (`Words`); the block's
            class is then `take`, each word's `w` (the page's CSS marks what a click takes).
    Returns:
        HTML safe for `st.markdown(..., unsafe_allow_html=True)`: every piece of model text
        is HTML-escaped and markdown's special characters are entities.
    """
    spans, at = token_spans(suggestion), 0
    if prefix_space and shown_text(suggestion.text, prefix_space=True) and spans[0][0][:1] == " ":
        spans[0], at = (spans[0][0][1:], spans[0][1]), 1  # a lone space stays, to be seen
    blank = not "".join(text for text, _ in spans).strip()
    ends = words.ends if words else (len(suggestion.text),)
    groups: list[list[str]] = [[] for _ in ends]  # each word's pieces of HTML
    leading, w = True, 0
    for text, logprob in spans:
        while text:
            while w < len(ends) - 1 and ends[w] <= at:
                w += 1
            n = ends[w] - at if ends[w] > at else len(text)  # the token's part in word w
            piece, text, at = text[:n], text[n:], at + len(text[:n])
            body, leading = _marked_html(piece, leading=leading, blank=blank)
            groups[w].append(_shaded(body, logprob) if shading else body)
    style = "white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.7"
    mark = _variants_html(suggestion.variants, prefix_space=prefix_space)
    if words is None:
        return f'<div style="{style}">{"".join(groups[0])}{mark}</div>'
    targets = "".join(
        f'<span class="w" data-lloom-at="{words.row}@{end}" role="button" '
        f'tabindex="{0 if i == 0 else -1}">{"".join(group)}</span>'
        for i, (end, group) in enumerate(zip(ends, groups, strict=True)) if group
    )  # fmt: skip
    box = f'class="take" data-lloom-box="{words.box}"'
    return f'<div style="{style}" {box}>{targets}{mark}</div>'


def _shaded(body: str, logprob: float) -> str:
    """A token's HTML shaded by its probability, which its tooltip says."""
    p = math.exp(logprob)
    shade = f"background-color: rgba(255, 160, 0, {0.08 + 0.72 * p:.2f}); border-radius: 3px"
    return f'<span title="{p:.1%}" style="{shade}">{body}</span>'


def _variants_html(variants: Sequence[str], *, prefix_space: bool) -> str:
    """A row's variants (the texts it stands for) as a faint "+n", listed in its tooltip."""
    if not variants:
        return ""
    listed = "&#10;".join(
        _attribute(f"“{shorten(shown_text(v, prefix_space=prefix_space), VARIANT_SHOWN)}”")
        for v in variants
    )
    title = f"Read as this row, also offered:&#10;{listed}"
    return f'<span class="variants" title="{title}">+{len(variants)}</span>'


def sample_html(text: str, *, prefix_space: bool) -> str:
    """A sample's text as one block of HTML that wraps, its whitespace marked as in
    `suggestion_html` (a sample has no token probabilities to shade by); the block's class
    is `sample`."""
    shown = shown_text(text, prefix_space=prefix_space) or text  # a lone space stays, to be seen
    body, _ = _marked_html(shown, leading=True, blank=not shown.strip())
    style = "white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.7"
    return f'<div class="sample" style="{style}">{body}</div>'


def token_spans(suggestion: Suggestion) -> list[tuple[str, float]]:
    """The suggestion's text split along its tokens, each with its log-probability.

    Tokens are matched against the text in order; auto-stop's cut shortens the last one.
    Where a piece does not match (a UTF-8 character split across tokens), the rest of
    the text becomes one span with the remaining tokens' joint log-probability.
    """
    text, pos, spans = suggestion.text, 0, []
    pairs = list(zip(suggestion.token_pieces, suggestion.token_logprobs, strict=True))
    for i, (piece, logprob) in enumerate(pairs):
        if pos >= len(text):
            break
        if not piece:  # a token wholly typed before a healed suggestion (`weave.search.healing`)
            continue
        if not text.startswith(piece, pos) and not piece.startswith(text[pos:]):
            rest = sum(lp for _, lp in pairs[i:])
            spans.append((text[pos:], rest))
            return spans
        spans.append((text[pos : pos + len(piece)], logprob))
        pos += len(piece)
    return spans


def _marked_html(text: str, *, leading: bool, blank: bool) -> tuple[str, bool]:
    """A span's text as HTML with its whitespace marked; returns it and whether the
    suggestion's leading spaces go on past it."""
    out = []
    for ch in text:
        if ch == " " and (leading or blank):
            out.append(_FAINT.format(SPACE if blank else "·"))
            continue
        leading = False
        if ch in VISIBLE:
            out.append(_FAINT.format(VISIBLE[ch]))
        else:
            out.append(_html_text(ch))
    return "".join(out), leading


def _html_text(text: str) -> str:
    """Every character HTML and markdown (or LaTeX) could read as syntax, as an entity."""
    return "".join(f"&#{ord(ch)};" if ch in _SPECIAL else ch for ch in visible(text))


_SPECIAL = frozenset("<>&\"'\\`*_{}[]()#+-.!|~$:=")
_FAINT = '<span style="opacity: 0.4">{}</span>'


# -- the story's tokens and their alternatives ----------------------------------------------
def story_tokens_html(
    rows: Sequence[TokenAlternatives], *, box: str, picked: int | None = None
) -> str:
    """The story's tokens (`Backend.alternatives`' rows) shaded by the probability the model
    gave each, with the likeliest alternatives there in its tooltip; a token whose
    probability the backend cannot say is left unshaded. Each token carries its position
    (`data-lloom-at`, which static/token_click.html posts to the hidden box `box` when it
    is clicked); the one at
    position `picked` is outlined and is the one the keyboard reaches (the others are
    reached from it with the arrow keys). Escaped as `suggestion_html` is."""
    parts = []
    for row in rows:
        body = "".join(_FAINT.format(VISIBLE[ch]) if ch in VISIBLE else _html_text(ch)
                       for ch in row.text)  # fmt: skip
        alpha = 0.0 if row.logprob is None else 0.08 + 0.72 * math.exp(row.logprob)
        likeliest = ", ".join(alternative_label(c) for c in row.top[:ALTERNATIVES_SHOWN])
        title = f"{token_probability(row)} · {likeliest}"
        shade = f"background-color: rgba(255, 160, 0, {alpha:.2f}); border-radius: 3px"
        mine = row.position == picked
        if mine:
            shade += "; outline: 2px solid #1c83e1"
        at = f'data-lloom-at="{row.position}" tabindex="{0 if mine else -1}" role="button"'
        parts.append(f'<span {at} title="{_attribute(title)}" style="{shade}">{body}</span>')
    style = "white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.7"
    return f'<div style="{style}" data-lloom-box="{box}">{"".join(parts)}</div>'


def token_probability(row: TokenAlternatives) -> str:
    """The probability the model gave a story token, as its tooltip and the dialog say it
    (two figures however small: "0.021%", never "0.0%")."""
    if row.logprob is None:
        return f"not in the top {len(row.top)}"
    return share_text(math.exp(row.logprob))


def token_word(text: str) -> str:
    """A story token as a writer names it: its words ("grey" for " grey"), or its
    whitespace made visible when it holds nothing else."""
    return " ".join(text.split()) or editable_text(text) or "∅"


def alternative_label(choice) -> str:
    """One alternative as a choice shows it: its visible text and probability."""
    return f"{editable_text(choice.text) or '∅'} {share_text(math.exp(choice.logprob))}"


def _attribute(text: str) -> str:
    """Text inside a double-quoted HTML attribute that markdown leaves alone."""
    return "".join(f"&#{ord(ch)};" if ch in _SPECIAL else ch for ch in visible(text))


# -- numbers ------------------------------------------------------------------------------
def bar_shares(suggestions: Sequence[Suggestion], score: Score) -> list[float]:
    """Each suggestion's share of the ranking score the list is sorted by: of the pooled
    joint probabilities (score "joint"), of LLooM's sums of token probabilities
    ("lloom"), or of the scores' softmax ("words": exp of the log-probability per word,
    a geometric mean, so no row's share is vanishingly small). The shares add up to 1
    and fall in rank order."""
    if not suggestions:
        return []
    if score == "lloom":
        weights = [max(s.score, 0.0) for s in suggestions]
    else:
        top = max(s.score for s in suggestions)
        weights = [math.exp(s.score - top) for s in suggestions]  # shifted: no underflow
    total = sum(weights)
    return [w / total if total > 0 else 1 / len(weights) for w in weights]


def share_text(share: float) -> str:
    """A share (0 to 1) as a percentage with two significant figures ("34%", "3.2%",
    "0.041%"), so that a small one still reads as something; below SMALLEST_SHARE,
    "<0.0001%"."""
    if share <= 0:
        return "0%"
    if share < SMALLEST_SHARE:
        return f"<{SMALLEST_SHARE:.4%}"
    percent = float(f"{share * 100:.2g}")  # rounded first: 9.96 reads "10", not "10.0"
    decimals = max(0, 1 - math.floor(math.log10(percent)))
    return f"{percent:.{decimals}f}%"


def sample_shares(logprobs: Sequence[float]) -> list[float]:
    """Each sample's share of the samples' probability (from its tokens' log-probabilities
    summed), as a row's figure reads: they add up to 1."""
    if not logprobs:
        return []
    top = max(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]  # shifted: no underflow
    return [w / sum(weights) for w in weights]


def share_html(share: float) -> str:
    """`share_text` inside HTML."""
    return share_text(share).replace("<", "&lt;")


def shorten(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, ending in '…' when cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def one_line(text: str) -> str:
    """`text` on one line: each run of whitespace (newlines too) one space, none at the ends."""
    return " ".join(text.split())


def spaced(text: str) -> str:
    """`text` on one line, each run of whitespace one space, its ends' too: a part of a
    line that another part continues ("…her wet " before "grey")."""
    return re.sub(r"\s+", " ", text)


def when(seconds: float) -> str:
    """A time since the epoch as the page shows it: local date, hours and minutes."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))


# -- text in Streamlit's markdown -------------------------------------------------------
def md(text: str) -> str:
    """Text shown literally inside Streamlit markdown (messages, names, URLs)."""
    escaped = "".join("\\" + ch if ch in MARKDOWN else ch for ch in text)
    lines = ("\\" + line if line[:1] in LINE_START else line for line in escaped.split("\n"))
    return "  \n".join(lines)


def code(text: str) -> str:
    """A path or URL as inline code (shown as it is), or escaped where it holds a backtick."""
    return f"`{text}`" if "`" not in text and "\n" not in text else md(text)
