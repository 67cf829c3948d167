"""The suggestions under the status line, one row each (`page.rows`), the first LISTED until
the writer lists them all, the rest of a row taken in part first (`page.part`); the lone
suggestions accepted by themselves, said; and, once the page is drawn, look-ahead
(`weave.desk.lookahead`) searching on while the writer reads, its ⚡ marks redrawn by
themselves (`ahead_marks_ui`, a fragment). Widgets only: the rows' words and shares are
`weave.view.present`'s.
"""

from __future__ import annotations

import streamlit as st

from backends import Backend
from page import part
from page.rows import ACCEPT, Row, offer_row
from page.search import session_alive
from page.state import tab
from weave.config import Settings
from weave.desk import session
from weave.desk.partial import Offered
from weave.desk.spot import Offer
from weave.search.tree import Suggestion
from weave.view import messages, present
from weave.view.present import md

# Look-ahead begins no forward until this long after a script run begins, and after the one
# that drew the suggestions: its forwards took the CPU from the browser still drawing the
# page (bench_page.py).
LOOKAHEAD_AFTER_S = 1.0
MARKS_EVERY_S = 2.0  # how often the ⚡ marks are redrawn while the writer reads
LISTED = 10  # suggestions listed until the writer asks for all: each row costs the browser
# ~3 ms a redraw, and ten fill a laptop's screen (bench_page.py)


def lone_ui(ws: session.Workspace) -> None:
    """Say which lone suggestions were accepted by themselves (one undo takes them back)."""
    chain = ws.lone_chain()
    message = messages.auto_accept_message(chain.texts) if chain else None
    if message:
        st.info(
            f"{md(message)} *↩ Undo* takes {'it' if len(chain.texts) == 1 else 'them all'} back.",
            icon="🤖",
        )


def look_ahead(settings: Settings, ws: session.Workspace, backend: Backend, offer: Offer) -> None:
    """While the writer reads these suggestions, search from the top ones as if each were
    accepted (`weave.desk.lookahead`, on a thread of its own: this returns at once). Not after
    a failed search: the suggestions shown are then an earlier one's; nor while the story is
    read (`Offers.look_ahead` refuses: its own search comes first)."""
    rows = settings.lookahead_rows(backend.name)
    looking = ws.offers.look_ahead(
        backend, ws.spot, offer, rows=rows, alive=session_alive(), after=LOOKAHEAD_AFTER_S
    )
    if looking and rows:
        ahead_marks_ui(ws, backend, offer)


@st.fragment(run_every=MARKS_EVERY_S)
def ahead_marks_ui(ws: session.Workspace, backend: Backend, offer: Offer) -> None:
    """⚡ by the share of each suggestion whose next suggestions look-ahead has made: a style
    rule per such row, redrawn every MARKS_EVERY_S by itself (a fragment: neither the story
    box nor the rows are drawn again, so typing and reading go on undisturbed)."""
    ready = ws.offers.ahead_ready(backend, ws.spot, offer)
    ranks = [i for i, s in enumerate(offer.result.suggestions) if s.token_ids in ready]
    rules = "".join(f'.share[data-rank="{i}"]::before {{content: "⚡"}}' for i in ranks)
    st.html(f"<style>{rules}</style>")


def suggestions_ui(
    ws: session.Workspace, offer: Offer, prefix_space: bool, shading: bool, *, ahead: bool
) -> None:
    """Ranked suggestions, one row each (`page.rows`): the share, the text, ✏️ Edit,
    📌 Keep and ➜ Take, the first nine with their keys (⚡ marks: `ahead_marks_ui`, said
    under the rows when look-ahead is on: `ahead`). The first LISTED, until the writer
    lists them all. A click on a word takes its row up to there; the rest of a row so
    taken comes first, here (`page.part`).

    The widgets are named after the search and the prefix-space choice, so a box never
    holds the text another search, or the other choice, put there.
    """
    suggestions = offer.result.suggestions
    rest = part.rest_here(ws, suggestions)
    if not suggestions and rest is None:
        st.info("No suggestions: the model ended the story here. Edit it, or lower the cutoff.")
        return
    hint = messages.few_suggestions_hint(len(suggestions), offer.params)
    if hint:
        st.caption(f"💡 {md(hint)}")
    shares = present.bar_shares(suggestions, offer.params.score)
    space = "p" if prefix_space else "n"
    rows, takeable = list(zip(suggestions, shares, strict=True)), {}
    with st.container(key="suggestions", gap=None):
        if rest is not None:
            takeable[part.rest_row(ws, rest, prefix_space, shading)] = rest
        for i, (suggestion, share) in enumerate(rows if tab().all_rows else rows[:LISTED]):
            row = Row(ws, offer.piece(suggestion), f"sg_{offer.tag}_{space}_{i}", prefix_space)
            takeable[row.key] = Offered(row.piece, suggestion)
            suggestion_row(row, i, suggestion, (share, share / max(shares)), shading)
    with st.container(horizontal=True, vertical_alignment="center"):
        part.word_ui(ws, next(iter(takeable.values()), None), prefix_space)
        more_rows_ui(len(suggestions))
        bars = messages.bar_caption(offer.params.score, ahead=ahead)
        st.caption(
            f"{bars} A click on a word takes its row up to there, ✏️ edits one in its row "
            f"(Enter takes it), 📌 keeps one as a branch, {ACCEPT} takes it."
        )
    part.pick_ui(ws, takeable, prefix_space)


def more_rows_ui(count: int) -> None:
    """List every suggestion, or the first LISTED again (nothing when all are listed)."""
    if count <= LISTED:
        return
    if tab().all_rows:
        st.button(
            "▴ Fewer",
            key="rows_fewer",
            on_click=list_all,
            args=(False,),
            help=f"List the first {LISTED} suggestions only",
        )
    else:
        st.button(
            f"▾ {count - LISTED} more",
            key="rows_more",
            on_click=list_all,
            args=(True,),
            help=f"List all {count} suggestions (the token tree has them all)",
        )


def list_all(value: bool) -> None:
    tab().all_rows = value


def suggestion_row(
    row: Row, rank: int, suggestion: Suggestion, share: tuple[float, float], shading: bool
) -> None:
    """One suggestion's row (`page.rows`): its share, the figure over a bar as long as
    its part of the best one's; its text, each token shaded by its probability, each
    word a click's target (`page.part`), its variants a "+n" whose tooltip lists them."""
    html = present.suggestion_html(
        suggestion,
        prefix_space=row.prefix_space,
        shading=shading,
        words=part.words(row.key, suggestion.text),
    )
    own, filled = share
    figure = (
        f'<span class="share" data-rank="{rank}" style="--filled: {filled:.0%}" '
        f'title="{present.SHARE_TITLE}">{present.share_html(own)}</span>'
    )
    offer_row(row, html, figure, rank)
