"""The status line over the suggestions: what this node offers, asked of the one door
(`Offers.show`, which decides whether to search), said live while a search runs, which
stops once the tab is closed (`session_alive`, `Backend.cancellable`). A long story is
read in the background meanwhile (`reading_ui`, a fragment that redraws its progress by
itself); a lone suggestion found is taken by itself; where 🔁 Again changed nothing, what
would is offered (`again_ui`: samples, or a lower cutoff). Widgets only: the words are
`weave.view.present`'s.
"""

from __future__ import annotations

from contextlib import nullcontext

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from backends import Backend
from backends.base import Cancelled, always
from page.state import tab
from weave.bounds import bound_of
from weave.desk import session
from weave.desk.spot import Offer
from weave.search.params import SearchParams
from weave.view import messages
from weave.view.present import md

READING_EVERY_S = 0.5  # how often a long story's reading redraws its progress


def search_ui(
    ws: session.Workspace, backend: Backend | None, params: SearchParams, prefix_space: bool
) -> Offer | None:
    """Draw what this node offers (`Offers.show`: it decides whether to search), under a
    status line, live while a search runs. Returns the suggestions to show: this node's
    only (after a failure, its earlier ones)."""
    line = st.empty()  # a line, not `st.status`: that sleeps 50 ms, and the browser animates it
    reading = st.empty()  # drawn first thing, it replaces the last run's reading line at once

    def searching():
        line.caption(f"⏳ {messages.first_status(ws.text)}")
        return lambda p: line.caption(f"⏳ {messages.live_status(p)}")

    alive = session_alive()
    try:
        with nullcontext() if backend is None else backend.cancellable(alive):
            shown = ws.offers.show(backend, ws.spot, params, searching=searching, alive=alive)
    except Cancelled:  # the tab is gone: no one to show anything to
        st.stop()
    if shown.source == "reading":
        with reading.container():
            reading_ui(ws)
    if shown.lone is not None and ws.take_lone(shown.lone, prefix_space=prefix_space):
        st.rerun()
    status = messages.shown_status(
        shown.offer and shown.offer.result, shown.source, failed=shown.error is not None
    )
    if status:
        result = shown.offer.result if shown.offer is not None else None
        line.caption(status, help=messages.search_figures(result) if result else None)
    if shown.source == "same":
        again_ui(params)
    return shown.offer


def again_ui(params: SearchParams) -> None:
    """🔁 Again where nothing changed: the search is exact, so what would give the writer
    something new is offered instead: samples, or a wider tree (a lower cutoff)."""
    low = bound_of(SearchParams, "cutoff").low
    wider = max(low, round(params.cutoff / 2, 2))
    wider = wider if wider < params.cutoff else None
    with st.container(horizontal=True, vertical_alignment="center"):
        st.caption(f"💡 {md(messages.again_hint(params.cutoff, wider))}")
        st.button("🎲 Sample", key="again_sample", on_click=sample_next)
        if wider is not None:
            st.button(
                f"Cutoff {wider:g}",
                key="again_wider",
                on_click=set_cutoff,
                args=(wider,),
                help="A lower cutoff: more tokens start a suggestion of their own",
            )


def sample_next() -> None:
    tab().sample_next = True  # drawn in this run's moves (`lloom.moves_ui`), under its status


def set_cutoff(cutoff: float) -> None:
    st.session_state["cfg_cutoff"] = cutoff


@st.fragment(run_every=READING_EVERY_S)
def reading_ui(ws: session.Workspace) -> None:
    """How far a long story has been read (`weave.desk.reading`), redrawn by itself: a
    fragment, so the writer goes on editing and moving meanwhile. Once it is read (or
    has failed, or stopped) the whole page runs again, and searches or says why."""
    state = ws.offers.reading_state()
    if state is None:
        st.rerun(scope="app")
    st.caption(f"⏳ {messages.reading_status(state.read, state.total)}")


def session_alive():
    """Whether this tab's session is still open (cheap and thread-safe): a long read or
    search for a tab that has since closed stops between chunks and depths
    (`Backend.cancellable`), and look-ahead stops, leaving the model to the other writers."""
    ctx = get_script_run_ctx()
    if ctx is None or not Runtime.exists():
        return always
    runtime, session_id = Runtime.instance(), ctx.session_id
    return lambda: runtime.is_active_session(session_id)
