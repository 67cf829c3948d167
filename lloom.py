"""LLooM's page: weave a story with a language model, a few tokens at a time.

`streamlit run lloom.py`, which serves `app` below: an `st.App` whose middleware
(`page.server.middleware`: `page.hosts`) refuses a request naming a foreign Host first.
This file lays the page out; its parts are the modules of page/, which call the engine:
the story is a loom (`weave.loom.loom`, kept by `weave.loom.store`), and each browser tab
is a cursor over it (`weave.desk.session.Workspace`); the search is
`weave.search.beams.expand`; what the page says is `weave.view`'s (`messages`, `present`),
its keys are `weave.keys`'; a node's suggestions come through one door, `Offers.show`,
whose answer the page draws. The story page is a desk: the story (its end in view), the
moves, the status line (`page.search`) and the suggestions (`page.suggestions`) on the
left, the tools (Configuration: `page.configuration`; sampling: `page.sampling`; the
Alternatives dialog: `page.alternatives`; the steering and bans panels: `page.steering`,
`page.bans`) and the graphs (`page.graphs`) on the right; the sidebar is `page.sidebar`'s,
the start page and the library `page.library`'s, a suggestion's or a sample's row
`page.rows`' (taking one after an edit: `weave.desk.take`), a session's state
`page.state`'s, sharing a story and its co-writers' branches as they come `page.group`'s,
the CSS and script files in page/static/. Each run here opens what the page needs, or
stops saying why: the settings, the writer (`weave.access`), the store, the tab's
workspace, the story the URL names, the model. The URL names the story and the node. The
model is loaded once per process (`page.server.shared_backend`, `backends.shared`) and
shared by every session; on MLX a writer may switch it. No algorithm lives here.
"""

from __future__ import annotations

import streamlit as st

from backends import Backend, BackendError
from backends.shared import SharedBackend
from page import alternatives, bans, graphs, group, library, sampling, server, steering
from page.alternatives import ALTERNATIVE_TOKENS, ALTERNATIVES_K, open_alternatives
from page.configuration import config_ui
from page.search import search_ui
from page.server import login_configured, shared_backend, shared_settings, shared_store, static_text
from page.sidebar import sidebar_ui
from page.state import PageState, tab
from page.suggestions import LOOKAHEAD_AFTER_S, lone_ui, look_ahead, suggestions_ui
from weave import access, keys
from weave.config import ConfigError, Settings
from weave.desk import session
from weave.desk.spot import Draw, Offer
from weave.loom.store import LoomStore, StoreError
from weave.search.params import SearchParams
from weave.story.bans import Bans
from weave.view.present import code, md


# -- the page -------------------------------------------------------------------------------
def main() -> None:
    st.set_page_config(
        page_title="LLooM", page_icon="🧶", layout="wide", initial_sidebar_state="collapsed"
    )
    settings = settings_or_stop()
    verdict = writer_or_stop(settings)  # before any story or the model
    store, problem = store_or_stop()
    ws = workspace(store.as_writer(verdict.writer), verdict.login, settings.bans)
    ws.offers.hold_look_ahead(LOOKAHEAD_AFTER_S)  # the CPU is the page's while it draws
    backend = backend_or_none()
    open_from_url(ws)
    ws.refresh()  # the other tabs' nodes, this tab's cursor
    sync_url(ws)  # before any search, so a refresh during a long one finds the node
    storage_ui(ws, problem)
    start_page = st.empty()  # on the story page an empty slot: the start page is gone at once
    offer = None
    if ws.started:
        offer = story_page(settings, ws, backend)
    else:
        with start_page.container():
            start_error_ui()
            library.start_ui(settings, ws)
            library.library_ui(ws)
    sidebar_ui(settings, ws, backend, offer)  # last: it shows the search this run made
    if offer is not None and backend is not None and not ws.offers.error:
        look_ahead(settings, ws, backend, offer)  # the page is drawn: search on while they read


def story_page(settings: Settings, ws: session.Workspace, backend: Backend | None) -> Offer | None:
    """The desk: left the story, the moves and the suggestions (the story's end and the
    first suggestions on the first screen); right the tools, the graphs and Go to. On a
    narrow screen the right column comes after. Returns the search it showed."""
    st.html(f"<style>{static_text('desk.css')}</style>")
    if ws.title:
        st.set_page_config(page_title=f"{ws.title} · LLooM")
    left, right = st.columns(2, gap="medium")
    with right:
        params, prefix_space, shading = tools_ui(settings, ws, backend)
        steer, ban, seen = st.columns(3)
        with steer.popover("📝 Memory & notes", width="stretch"):
            steering.steering_ui(ws)  # before the search: it searches under them
        with ban.popover("🚫 Bans & bias", width="stretch"):
            bans.bans_ui(ws)  # likewise
    with left:
        story_ui(ws)
        draw = moves_ui(settings, ws, backend)
        offer = search_ui(ws, backend, params, prefix_space)
        error_ui(ws)
        lone_ui(ws)
        group.live_ui(ws)  # a shared story: the co-writers' branches, as they come
        if offer is not None:
            if offer.params != params:
                st.caption("⚠️ These suggestions were made here with other settings.")
            ahead = backend is not None and settings.lookahead_rows(backend.name) > 0
            suggestions_ui(ws, offer, prefix_space, shading, ahead=ahead)
        elif not ws.text:
            st.info("The story is empty here: write something, or go forward (↪ Redo).")
        if draw is not None:  # below the suggestions: they stay on the first screen
            sampling.samples_ui(ws, draw, prefix_space)
        st.caption(keys.key_line())
    with right:
        with seen:
            steering.context_ui(ws, backend, params.max_depth)
        graphs.graphs_ui(ws, offer)
    if tab().alternatives_open and backend is not None:
        alternatives.alternatives_dialog(ws, backend)
    return offer


def tools_ui(
    settings: Settings, ws: session.Workspace, backend: Backend | None
) -> tuple[SearchParams, bool, bool]:
    """Configuration and Sampling (popovers) and Alternatives (a dialog), out of the
    story's way; returns the search parameters and the display choices."""
    config_at, sampling_at, alternatives_at = st.columns(3)
    with config_at.popover("⚙️ Configuration", width="stretch"):
        chosen = config_ui(settings, backend, ws)
    with sampling_at.popover("🎲 Sampling", width="stretch"):
        sampling.sample_settings_ui(settings)
    alternatives_at.button(
        "🔍 Alternatives",
        key="alt_show",
        width="stretch",
        on_click=open_alternatives,
        disabled=backend is None or not ws.text,
        help=f"The model's top {ALTERNATIVES_K} at each of the story's last "
        f"{ALTERNATIVE_TOKENS} tokens: branch at any of them",
    )
    return chosen


# -- opening: the settings, the writer, the store, the tab's workspace, the URL, the model
def settings_or_stop() -> Settings:
    try:
        return shared_settings()
    except ConfigError as e:
        st.error(f"**LLooM's settings cannot be read.** {md(str(e))}", icon="⚙️")
        st.stop()


def store_or_stop() -> tuple[LoomStore, str | None]:
    """The shared story store; a database server that cannot be used is said, and the page
    stops there (no story is kept where the group cannot see it) until a rerun finds it."""
    try:
        return shared_store()
    except StoreError as e:
        st.error(
            f"**The story database cannot be used.** {md(str(e))}  \n"
            "Nothing was lost; reload this page once it is back.",
            icon="💾",
        )
        st.stop()


def writer_or_stop(settings: Settings) -> access.Access:
    """Whom this page is for (`weave.access`); else a login button or the reason."""
    login = login_configured()
    proxied = any(name in st.context.headers for name in access.PROXY_HEADERS)
    verdict = access.decide(
        address=st.get_option("server.address") or "",
        proxied=proxied,
        login=login,
        open_page=settings.sharing.open,
        logged_in=login and st.user.is_logged_in,
        claims=st.user if login else None,
    )
    if verdict.ask_login:
        st.title("🧶 LLooM")
        st.write("Your stories are private: log in to see them.")
        if st.button("Log in", type="primary"):
            st.login()
    elif verdict.refusal:
        st.error(verdict.refusal, icon="🔒")
    if login and st.user.is_logged_in:
        with st.sidebar:
            if verdict.login:
                st.caption(f"Logged in as **{md(verdict.login.email)}**")
            if st.button("Log out", key="logout"):
                st.logout()
    if verdict.writer is None:
        st.stop()
    return verdict


def workspace(store: LoomStore, login: access.Login | None, bans: Bans) -> session.Workspace:
    """This browser session's workspace, made once (anew when another writer logs in, who
    first takes over the stories kept for their address: `LoomStore.sign_in`), `bans`
    (config.toml's [bans]) guarding each story beside its own."""
    if "page" not in st.session_state or tab().ws.store.writer != store.writer:
        if login is not None:
            try:
                store.sign_in(login.email)
            except StoreError as e:
                st.error(
                    f"**The stories kept for {md(login.email)} are not yours yet**: "
                    f"{md(str(e))}. They will be at your next visit.",
                    icon="💾",
                )
        st.session_state.page = PageState(session.Workspace(store, default_bans=bans))
    return tab().ws


def open_from_url(ws: session.Workspace) -> None:
    """A new session (a refreshed tab) reopens the story and the node its URL names, once."""
    if tab().url_read:
        return
    tab().url_read = True
    story_id = st.query_params.get("story")
    if not story_id:
        return
    begun = ws.library.ids_starting(story_id)  # an id cut short (sync_url writes it whole)
    opened = ws.open(begun[0] if len(begun) == 1 else story_id, st.query_params.get("node"))
    if not opened and ws.save_error is None:  # else storage_ui says why
        tab().url_missing = (story_id, len(begun))


def sync_url(ws: session.Workspace) -> None:
    """The URL names the open story and node, so a refresh comes back to them."""
    if not ws.started:
        for name in ("story", "node"):
            st.query_params.pop(name, None)
        return
    for name, value in (("story", ws.story_id), ("node", ws.cursor)):
        if st.query_params.get(name) != value:
            st.query_params[name] = value


def storage_ui(ws: session.Workspace, problem: str | None) -> None:
    """Say loudly when stories are not being saved."""
    if problem:
        st.error(
            f"**Stories are kept in a temporary folder, not your data folder.** {md(problem)}  \n"
            f"They are in {code(ws.store.where)} until it is cleaned; download your "
            "story (sidebar) to keep it.",
            icon="💾",
        )
    if ws.save_error and ws.library.failed_reading:
        st.error(
            f"**The story store could not be read.** {md(ws.save_error)}  \n"
            "Nothing was changed; what this tab shows is kept here: download your story "
            "(sidebar) to be safe.",
            icon="💾",
        )
    elif ws.save_error:
        st.error(
            f"**The last change could not be saved.** {md(ws.save_error)}  \n"
            "It is kept here and saved at your next change; download your story (sidebar) "
            "to be safe.",
            icon="💾",
        )
    missing, tab().url_missing = tab().url_missing, None
    if missing and missing[1] > 1:
        st.warning(
            f"{missing[1]} of your stories begin with {md(missing[0])}: copy the "
            "link's whole story id, or open one below.",
            icon="🔎",
        )
    elif missing:
        st.warning(
            f"No story {md(missing[0])} of yours here: it may have been purged, or be "
            "another writer's.",
            icon="🔎",
        )


def backend_or_none() -> Backend | None:
    """The shared backend, or None with the reason kept for the page to show.

    A failure is not retried on every rerun (a dead server could cost a timeout each
    time): only when the writer asks, with the button `error_ui` shows.
    """
    shared = shared_backend()
    if tab().switch_to is not None:
        switch_now(shared, tab().switch_to)
    if tab().backend_error:
        return None
    try:
        if shared.loaded:
            return shared.get()
        with st.spinner("Loading the model (the first time converts it)…"):
            return shared.get()
    except BackendError as e:
        tab().backend_error = str(e)
        return None


def switch_now(shared: SharedBackend, model: str) -> None:
    """Load the picked model; on failure the one in use stays, and the page says why."""
    tab().switch_to, tab().switch_error = None, None
    try:
        with st.spinner(f"Loading {model or 'the embedded model'}…"):
            shared.switch(model)
        tab().backend_error = None
    except BackendError as e:
        tab().switch_error = str(e)


def retry_backend() -> None:
    tab().backend_error = None


# -- the model's trouble --------------------------------------------------------------------
def backend_error_ui(meanwhile: str) -> bool:
    """Why the model cannot be used, what the writer can do `meanwhile`, and a button to
    try it again; False when it can be used."""
    reason = tab().backend_error
    if reason:
        st.error(
            f"**The model cannot be used.** {md(reason)}\n\n{meanwhile}, then try again.",
            icon="🔌",
        )
        st.button("🔌 Try the backend again", on_click=retry_backend, key="retry_backend")
    return bool(reason)


def start_error_ui() -> None:
    """The model's trouble, first on the start page, in words for a page without a story."""
    backend_error_ui(
        "You can still open your saved stories; to write with the model, fix the backend"
    )


def error_ui(ws: session.Workspace) -> None:
    """The model's trouble on the story page (the backend's, or the last search's), and
    what the workspace and its offers have to say (`notice`)."""
    if not backend_error_ui("Your story is kept; fix the backend") and ws.offers.error:
        st.error(
            f"**The model did not answer.** {md(ws.offers.error)}\n\nYour story and the last "
            "suggestions are kept; press *🔁 Again* to retry.",
            icon="🔌",
        )
    for notice in (ws.notice, ws.offers.notice):
        if notice:
            st.warning(md(notice), icon="⚠️")


# -- the story ------------------------------------------------------------------------------
def story_ui(ws: session.Workspace) -> None:
    """The editable story (Ctrl+Enter applies: a new branch), scrolled to its end."""
    shown = (ws.story_id, ws.cursor, ws.text)
    if tab().story_shown != shown:  # another node, or another tab's edit
        st.session_state.story_text = ws.text
        tab().story_shown = shown
    st.text_area(
        "Story",
        key="story_text",
        height=130,
        on_change=apply_edit,
        args=(ws, ws.story_id, ws.cursor),
        label_visibility="collapsed",
        placeholder="Write the story here",
        help="Edit freely; Ctrl+Enter applies the edit as a new branch",
    )
    end_js = static_text("story_end.html").replace("LENGTH", str(len(ws.text)))
    st.html(end_js, unsafe_allow_javascript=True)


def moves_ui(settings: Settings, ws: session.Workspace, backend: Backend | None) -> Draw | None:
    """Suggest again; undo/redo (parent, checked-out child); siblings ("2 of 5"); bookmark;
    sample (with 🎲 Sampling's settings). Each has its key. Returns this node's draw."""
    loom = ws.loom
    i, n = loom.sibling_position()
    marked = ws.cursor in loom.bookmarks
    key = {name: k.shortcut for name, k in keys.MOVES.items()}
    with st.container(horizontal=True, gap="xsmall", vertical_alignment="center"):
        st.button("🔁 Again", on_click=ws.retry, key="again", disabled=not ws.text,
                  shortcut=key["again"], help="Search again here (after a failure); where "
                  "nothing changed, what would give other suggestions")  # fmt: skip
        st.button("↩ Undo", on_click=ws.undo, disabled=ws.undo_target() is None, key="undo",
                  shortcut=key["undo"],
                  help="Back to the parent: the story before its last piece (before all the "
                  "lone suggestions accepted by themselves)")  # fmt: skip
        st.button("↪ Redo", on_click=ws.redo, disabled=loom.redo_target() is None, key="redo",
                  shortcut=key["redo"], help="Forward to the branch you were on")  # fmt: skip
        st.button("◀ Previous", on_click=ws.sibling, args=(-1,), key="sibling_prev",
                  shortcut=key["previous"], disabled=loom.sibling_target(-1) is None,
                  help="The previous branch")  # fmt: skip
        st.button("Next ▶", on_click=ws.sibling, args=(1,), key="sibling_next",
                  shortcut=key["next"], disabled=loom.sibling_target(1) is None,
                  help="The next branch")  # fmt: skip
        st.caption(f"branch {i} of {n}", help="Branches that grow from the same place")
        st.button("🔖 Unmark" if marked else "🔖 Bookmark", key="bookmark",
                  shortcut=key["bookmark"], on_click=ws.bookmark,
                  args=(ws.cursor, not marked))  # fmt: skip
        clicked = st.button("🎲 Sample", key="sample", shortcut=key["sample"],
                            disabled=backend is None or not ws.text,
                            help="Draw continuations (settings: 🎲 Sampling)")  # fmt: skip
    asked, tab().sample_next = tab().sample_next, False  # 🔁 Again's offer (`page.search.again_ui`)
    if (clicked or asked) and backend is not None and ws.text:
        sampling.sample(ws, backend, sampling.sample_params(settings))
    return ws.offers.draw(ws.cursor)


def apply_edit(ws: session.Workspace, story_id: str, node_id: str) -> None:
    """The story box's edit, in the story and at the node the box was drawn for: another
    widget's callback in the same run (an import) may have opened another story first."""
    ws.edit(st.session_state.story_text, typed_in=story_id, at=node_id)


if __name__ == "__main__":
    main()
else:  # `streamlit run lloom.py` serves this app: each request's Host is checked first
    app = st.App(__file__, middleware=server.middleware())
