"""LLooM's page: weave a story with a language model, a few tokens at a time.

`streamlit run lloom.py`, which serves `app` below: an `st.App` whose middleware
(`page.hosts`) refuses a request naming a foreign Host first. The page lays out widgets
and calls the engine: the story is a loom (`weave.loom.loom`, kept by `weave.loom.store`),
and each browser tab is a cursor over it (`weave.desk.session.Workspace`); the search is
`weave.search.beams.expand`; what the page says is `weave.view`'s (`messages`, `present`),
its keys are `weave.keys`'; a node's suggestions come through one door, `Offers.show`,
whose answer the page draws. The story page is a desk: the story (its end in view), the
moves and the suggestions on the left, the tools (sampling: `page.sampling`; the
Alternatives dialog: `page.alternatives`; the steering and bans panels: `page.steering`,
`page.bans`) and the graphs (`page.graphs`) on the right; the start page and the library
are `page.library`'s, finding a branch `page.find`'s, a suggestion's or a sample's row
`page.rows`', taking one after an edit `page.take`'s, a session's state `page.state`'s,
sharing a story and its co-writers' branches as they come `page.group`'s, the CSS and
script files in page/static/.
The URL names the story and the node. The model is loaded once per process
(`shared_backend`, `backends.shared`) and shared by every session; on MLX a writer may
switch it. No algorithm lives here.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

import backends
from backends import Backend, BackendError, Choice, choose_backend
from backends.base import Cancelled, always
from backends.shared import SharedBackend
from page import alternatives, bans, files, graphs, group, hosts, library, part, sampling, steering
from page.alternatives import ALTERNATIVE_TOKENS, ALTERNATIVES_K, open_alternatives
from page.find import find_ui
from page.rows import ACCEPT, Row, offer_row
from page.state import PageState, tab
from weave import access, keys
from weave.bounds import bound_of
from weave.config import ConfigError, Settings, load_settings
from weave.desk import session
from weave.desk.partial import Offered
from weave.desk.spot import Draw, Offer
from weave.loom.library import open_store
from weave.loom.store import LoomStore, StoreError
from weave.search.beams import SearchParams, SearchStats
from weave.search.tree import Suggestion
from weave.story.bans import Bans
from weave.view import messages, present
from weave.view.present import code, md

if TYPE_CHECKING:  # the catalog imports mlx: only the MLX backend's page loads it
    from backends.mlx.catalog import LocalModel

SCORES = bound_of(SearchParams, "score").options
# Look-ahead begins no forward until this long after a script run begins, and after the one
# that drew the suggestions: its forwards took the CPU from the browser still drawing the
# page (bench_page.py).
LOOKAHEAD_AFTER_S = 1.0
MARKS_EVERY_S = 2.0  # how often the ⚡ marks are redrawn while the writer reads
READING_EVERY_S = 0.5  # how often a long story's reading redraws its progress
LISTED = 10  # suggestions listed until the writer asks for all: each row costs the browser
# ~3 ms a redraw, and ten fill a laptop's screen (bench_page.py)
CONFIG_KEYS = {  # widget key -> SearchParams field
    "cfg_auto_stop": "auto_stop",
    "cfg_max_depth": "max_depth",
    "cfg_max_suggestions": "max_suggestions",
    "cfg_cutoff": "cutoff",
    "cfg_multiplier": "multiplier",
    "cfg_split_limit": "split_limit",
    "cfg_score": "score",
    "cfg_rule": "rule",
}
RULES = {"relative": "Relative", "v03": "LLooM v0.3"}  # the rule select's labels
SLIDERS = {  # widget key -> label, step, help; bounds: SearchParams' field's
    "cfg_max_depth": ("Max Depth", 1, "Tokens per suggestion at most"),
    "cfg_max_suggestions": ("Max Suggestions", 1, "Suggestions at most"),
    "cfg_cutoff": ("Cutoff", 0.01, "The least probability a token needs to start a new beam: "
                   "under the relative rule, as a share of its beam's likeliest token's"),
    "cfg_multiplier": ("Multiplier", 0.05,
                       "Cutoff scale per token (below 1: split more as beams grow; above "
                       "1: narrower after the first words)"),
    "cfg_split_limit": ("Split Limit", 1, "Children per beam at most (0: no limit)"),
}  # fmt: skip
DISPLAY_KEYS = {"cfg_prefix_space": "prefix_space", "cfg_shading": "shading"}  # page-only


# -- shared, once per process ---------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def shared_settings() -> Settings:
    return load_settings()


def release(shared: SharedBackend) -> None:
    """Close the backend when its cache entry is cleared (tests do)."""
    shared.close()


@st.cache_resource(show_spinner=False, on_release=release)
def shared_backend() -> SharedBackend:
    """The one backend every session uses (the MLX backend serialises its own work), built
    on first use; a writer may switch its MLX model (`switch_model_ui`)."""
    return SharedBackend(shared_settings(), backends.create_backend)


@st.cache_resource(ttl=60, show_spinner=False)  # not cache_data: see page.graphs' docstring
def models_here(configured: str, hub: str) -> tuple[LocalModel, ...]:
    """The mlx-lm models on this machine (`backends.mlx.catalog`): the configured one, the
    embedded one and those in the Hugging Face cache `hub`; read once a minute."""
    from backends.mlx.catalog import local_models

    return tuple(local_models(configured, backends.EMBEDDED_NAME, Path(hub)))


@st.cache_resource(show_spinner=False)
def shared_store() -> tuple[LoomStore, str | None]:
    """The story store (the data folder's, or a database server's), or a temporary folder's
    with the reason the data folder failed. A server that fails raises: the next run tries
    again (`store_or_stop`)."""
    return open_store(shared_settings().stories_at)


@st.cache_resource(show_spinner=False)
def static_text(name: str) -> str:
    """A file of page/static/ (the desk's CSS, the story box's script), read once per process."""
    return (Path(__file__).parent / "page" / "static" / name).read_text()


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
    alternatives_at.button("🔍 Alternatives", key="alt_show", width="stretch",
                           on_click=open_alternatives, disabled=backend is None or not ws.text,
                           help=f"The model's top {ALTERNATIVES_K} at each of the story's last "
                           f"{ALTERNATIVE_TOKENS} tokens: branch at any of them")  # fmt: skip
    return chosen


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
        st.error(f"**The story database cannot be used.** {md(str(e))}  \n"
                 "Nothing was lost; reload this page once it is back.", icon="💾")  # fmt: skip
        st.stop()


def writer_or_stop(settings: Settings) -> access.Access:
    """Whom this page is for (`weave.access`); else a login button or the reason."""
    login = login_configured()
    proxied = any(name in st.context.headers for name in access.PROXY_HEADERS)
    verdict = access.decide(
        address=st.get_option("server.address") or "", proxied=proxied, login=login,
        open_page=settings.sharing.open, logged_in=login and st.user.is_logged_in,
        claims=st.user if login else None,
    )  # fmt: skip
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


def login_configured() -> bool:
    """Whether `.streamlit/secrets.toml` configures st.login (a group's page)."""
    return bool(st.secrets.load_if_toml_exists() and "auth" in st.secrets)


def workspace(store: LoomStore, login: access.Login | None, bans: Bans) -> session.Workspace:
    """This browser session's workspace, made once (anew when another writer logs in, who
    first takes over the stories kept for their address: `LoomStore.sign_in`), `bans`
    (config.toml's [bans]) guarding each story beside its own."""
    if "page" not in st.session_state or tab().ws.store.writer != store.writer:
        if login is not None:
            try:
                store.sign_in(login.email)
            except StoreError as e:
                st.error(f"**The stories kept for {md(login.email)} are not yours yet**: "
                         f"{md(str(e))}. They will be at your next visit.", icon="💾")  # fmt: skip
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
        st.warning(f"{missing[1]} of your stories begin with {md(missing[0])}: copy the "
                   "link's whole story id, or open one below.", icon="🔎")  # fmt: skip
    elif missing:
        st.warning(f"No story {md(missing[0])} of yours here: it may have been purged, or be "
                   "another writer's.", icon="🔎")  # fmt: skip


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


# -- start ----------------------------------------------------------------------------------
def start_error_ui() -> None:
    """The model's trouble, first on the start page, in words for a page without a story."""
    reason = tab().backend_error
    if reason:
        st.error(f"**The model cannot be used.** {md(reason)}\n\nYou can still open your "
                 "saved stories; to write with the model, fix the backend, then try again.",
                 icon="🔌")  # fmt: skip
        st.button("🔌 Try the backend again", on_click=retry_backend, key="retry_backend")


# -- configuration --------------------------------------------------------------------------
def config_ui(
    settings: Settings, backend: Backend | None, ws: session.Workspace
) -> tuple[SearchParams, bool, bool]:
    """The Configuration popover; returns the search parameters and the display choices.

    The values start from the model's defaults (`[search]` and its `[models]` section),
    but for those the writer set, saved with the story (any that differs from the model's
    default): a story continued with another model takes that model's for the rest.
    """
    defaults = settings.search_for(backend.model_name) if backend else settings.search
    if tab().settings_for != (ws.story_id, defaults):  # another story, or another model
        tab().settings_for = (ws.story_id, defaults)
        load_settings_into_widgets(ws, defaults)
    for key, field in CONFIG_KEYS.items():
        st.session_state.setdefault(key, getattr(defaults, field))
    for key in DISPLAY_KEYS:
        st.session_state.setdefault(key, True)
    stop, split, show = st.columns(3)
    with stop:
        stop_ui()
    with split:
        split_ui(defaults)
    with show:
        prefix_space, shading = display_ui()
    values = {field: st.session_state[key] for key, field in CONFIG_KEYS.items()}
    params = replace(defaults, **values)
    chosen = params.to_saved(defaults)
    record = {**chosen, "prefix_space": prefix_space, "shading": shading}
    ws.set_settings(replace(ws.settings, record=record))
    return params, prefix_space, shading


def load_settings_into_widgets(ws: session.Workspace, defaults: SearchParams) -> None:
    """A reopened story's saved settings set the widgets, `defaults` the others; a saved
    one its widget cannot take is named in the story's notice, and the default is used
    (`SearchParams.from_saved`)."""
    record = ws.settings.record
    saved = {field: record[field] for field in CONFIG_KEYS.values() if field in record}
    values, refused = SearchParams.from_saved(saved, defaults)
    st.session_state.update({key: values.get(f, getattr(defaults, f))
                             for key, f in CONFIG_KEYS.items()})  # fmt: skip
    for key, field in DISPLAY_KEYS.items():
        if isinstance(record.get(field), bool):
            st.session_state[key] = record[field]
    if refused:
        unusable = (f"This story's saved {', '.join(refused)} cannot be used (see the bounds "
                    "in Configuration): the defaults are used instead.")  # fmt: skip
        ws.notice = f"{ws.notice} {unusable}" if ws.notice else unusable


def stop_ui() -> None:
    st.markdown("**Stop conditions**")
    st.checkbox("Auto-Stop", key="cfg_auto_stop", help="End a beam at '.' or ','")
    slider_ui("cfg_max_depth")
    slider_ui("cfg_max_suggestions")


def split_ui(defaults: SearchParams) -> None:
    st.markdown("**Split conditions**")
    st.selectbox(
        "Rule", list(RULES), format_func=RULES.get, key="cfg_rule",
        on_change=rule_changed, args=(defaults,),
        help="Relative: the cutoff is a share of the beam's likeliest token's probability, "
             "so the first words spread wide where the model is unsure and the rest stay "
             "narrow. LLooM v0.3: the cutoff is a probability (v0.3's knobs come with it).",
    )  # fmt: skip
    for key in ("cfg_cutoff", "cfg_multiplier", "cfg_split_limit"):
        slider_ui(key)


def rule_changed(defaults: SearchParams) -> None:
    """A rule picked brings its own knobs: the model's defaults for the configured rule,
    LLooM's for the other (`SearchParams.under`)."""
    knobs = defaults.under(st.session_state.cfg_rule)
    for key in ("cfg_cutoff", "cfg_multiplier", "cfg_split_limit"):
        st.session_state[key] = getattr(knobs, CONFIG_KEYS[key])


def slider_ui(key: str) -> None:
    label, step, help_text = SLIDERS[key]
    bound = bound_of(SearchParams, CONFIG_KEYS[key])
    st.slider(label, bound.low, bound.high, step=step, key=key, help=help_text)


def display_ui() -> tuple[bool, bool]:
    """Scoring, prefix space and token shading; returns (prefix_space, shading)."""
    st.markdown("**Ranking and display**")
    st.radio(
        "Scoring", SCORES, key="cfg_score", horizontal=True,
        help="words: log-probability per word, whole clauses first; joint: sum of "
             "log-probabilities (short texts first); lloom: v0.3's sum of probabilities",
    )  # fmt: skip
    prefix_space = st.checkbox(
        "Prefix space", key="cfg_prefix_space",
        help="Show suggestions without their leading space; put it back when accepting",
    )  # fmt: skip
    shading = st.checkbox(
        "Token probabilities", key="cfg_shading",
        help="Shade each token of a suggestion by its probability",
    )  # fmt: skip
    return prefix_space, shading


# -- the story ------------------------------------------------------------------------------
def story_ui(ws: session.Workspace) -> None:
    """The editable story (Ctrl+Enter applies: a new branch), scrolled to its end."""
    shown = (ws.story_id, ws.cursor, ws.text)
    if tab().story_shown != shown:  # another node, or another tab's edit
        st.session_state.story_text = ws.text
        tab().story_shown = shown
    st.text_area("Story", key="story_text", height=130, on_change=apply_edit,
                 args=(ws, ws.story_id, ws.cursor),
                 label_visibility="collapsed", placeholder="Write the story here",
                 help="Edit freely; Ctrl+Enter applies the edit as a new branch")  # fmt: skip
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
    asked, tab().sample_next = tab().sample_next, False  # 🔁 Again's offer (`again_ui`)
    if (clicked or asked) and backend is not None and ws.text:
        sampling.sample(ws, backend, sampling.sample_params(settings))
    return ws.offers.draw(ws.cursor)


def apply_edit(ws: session.Workspace, story_id: str, node_id: str) -> None:
    """The story box's edit, in the story and at the node the box was drawn for: another
    widget's callback in the same run (an import) may have opened another story first."""
    ws.edit(st.session_state.story_text, typed_in=story_id, at=node_id)


# -- searching ------------------------------------------------------------------------------
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
    status = messages.shown_status(shown.offer and shown.offer.result, shown.source,
                                  failed=shown.error is not None)  # fmt: skip
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
            st.button(f"Cutoff {wider:g}", key="again_wider", on_click=set_cutoff,
                      args=(wider,), help="A lower cutoff: more tokens start a suggestion "
                      "of their own")  # fmt: skip


def sample_next() -> None:
    tab().sample_next = True  # drawn in this run's moves (`moves_ui`), under its status


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


def error_ui(ws: session.Workspace) -> None:
    reason = tab().backend_error
    if reason:
        st.error(f"**The model cannot be used.** {md(reason)}\n\nYour story is kept; "
                 "fix the backend, then try again.", icon="🔌")  # fmt: skip
        st.button("🔌 Try the backend again", on_click=retry_backend, key="retry_backend")
    elif ws.offers.error:
        st.error(f"**The model did not answer.** {md(ws.offers.error)}\n\nYour story and the last "
                 "suggestions are kept; press *🔁 Again* to retry.", icon="🔌")  # fmt: skip
    for notice in (ws.notice, ws.offers.notice):
        if notice:
            st.warning(md(notice), icon="⚠️")


# -- suggestions ----------------------------------------------------------------------------
def lone_ui(ws: session.Workspace) -> None:
    """Say which lone suggestions were accepted by themselves (one undo takes them back)."""
    chain = ws.lone_chain()
    message = messages.auto_accept_message(chain.texts) if chain else None
    if message:
        st.info(f"{md(message)} *↩ Undo* takes {'it' if len(chain.texts) == 1 else 'them all'} "
                "back.", icon="🤖")  # fmt: skip


def look_ahead(settings: Settings, ws: session.Workspace, backend: Backend, offer: Offer) -> None:
    """While the writer reads these suggestions, search from the top ones as if each were
    accepted (`weave.desk.lookahead`, on a thread of its own: this returns at once). Not after
    a failed search: the suggestions shown are then an earlier one's; nor while the story is
    read (`Offers.look_ahead` refuses: its own search comes first)."""
    rows = settings.lookahead_rows(backend.name)
    looking = ws.offers.look_ahead(backend, ws.spot, offer, rows=rows, alive=session_alive(),
                                   after=LOOKAHEAD_AFTER_S)  # fmt: skip
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


def suggestions_ui(ws: session.Workspace, offer: Offer, prefix_space: bool,
                   shading: bool, *, ahead: bool) -> None:  # fmt: skip
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
        st.caption(f"{bars} A click on a word takes its row up to there, ✏️ edits one in "
                   f"its row (Enter takes it), 📌 keeps one as a branch, {ACCEPT} takes "
                   "it.")  # fmt: skip
    part.pick_ui(ws, takeable, prefix_space)


def more_rows_ui(count: int) -> None:
    """List every suggestion, or the first LISTED again (nothing when all are listed)."""
    if count <= LISTED:
        return
    if tab().all_rows:
        st.button("▴ Fewer", key="rows_fewer", on_click=list_all, args=(False,),
                  help=f"List the first {LISTED} suggestions only")  # fmt: skip
    else:
        st.button(f"▾ {count - LISTED} more", key="rows_more", on_click=list_all, args=(True,),
                  help=f"List all {count} suggestions (the token tree has them all)")  # fmt: skip


def list_all(value: bool) -> None:
    tab().all_rows = value


def suggestion_row(row: Row, rank: int, suggestion: Suggestion, share: tuple[float, float],
                   shading: bool) -> None:  # fmt: skip
    """One suggestion's row (`page.rows`): its share, the figure over a bar as long as
    its part of the best one's; its text, each token shaded by its probability, each
    word a click's target (`page.part`), its variants a "+n" whose tooltip lists them."""
    html = present.suggestion_html(suggestion, prefix_space=row.prefix_space, shading=shading,
                                   words=part.words(row.key, suggestion.text))  # fmt: skip
    own, filled = share
    figure = (f'<span class="share" data-rank="{rank}" style="--filled: {filled:.0%}" '
              f'title="{present.SHARE_TITLE}">{present.share_html(own)}</span>')  # fmt: skip
    offer_row(row, html, figure, rank)


# -- the sidebar ----------------------------------------------------------------------------
def sidebar_ui(
    settings: Settings, ws: session.Workspace, backend: Backend | None, offer: Offer | None
) -> None:
    """The writer's sidebar: the story, its bookmarks and downloads, importing; the model
    in one line; the diagnostics folded in Details."""
    choice = choose_backend(settings)  # once a run: the line and Details both say it
    with st.sidebar:
        find_ui(ws)
        if ws.started:
            library.story_info_ui(ws)
            group.share_ui(ws)
            library.bookmarks_ui(ws)
            files.downloads_ui(ws, offer)
        files.import_ui(ws)
        backend_line_ui(settings, backend, choice)
        with st.expander("Details"):
            details_ui(settings, ws, backend, offer, choice)


def details_ui(settings: Settings, ws: session.Workspace, backend: Backend | None,
               offer: Offer | None, choice: Choice) -> None:  # fmt: skip
    """How the backend was chosen, what this node's search and samples cost, the KV held."""
    backend_info_ui(settings, backend, choice)
    if offer is not None:
        stats_ui("This node's search", offer.result.stats)
    draw = ws.offers.draw(ws.cursor) if ws.started else None
    if draw is not None:
        stats_ui("This node's samples", draw.result.stats)
    if backend is not None and backend.cache_bytes is not None:
        st.caption(f"KV fragment tree: {backend.cache_bytes / 2**20:,.1f} MiB held, "
                   f"at most {backend.cache_cap_bytes / 2**20:,.0f} MiB")  # fmt: skip
    st.caption(f"Stories are saved in {code(ws.store.where)}")


def backend_line_ui(settings: Settings, backend: Backend | None, choice: Choice) -> None:
    """The model and its backend, one line, and what the model is; on MLX, the models to
    switch to."""
    if backend is None:
        st.markdown(f"🧠 **{choice.name}**: not available")
    else:
        st.markdown(f"🧠 **{md(backend.model_name)}** on {backend.name}")
        if backend.model_facts:
            st.caption(backend.model_facts)
        if backend.note:
            st.info(md(backend.note))
    if choice.name == "mlx" and not login_configured():
        switch_model_ui(settings)


def switch_model_ui(settings: Settings) -> None:
    """A picker of the mlx-lm models on this machine: picking one loads it for every tab
    of this server, the stories untouched (a group's page leaves the model to its owner)."""
    from huggingface_hub import constants  # the MLX page's alone: not loaded for the others

    shared = shared_backend()
    found = models_here(settings.mlx.model, constants.HF_HUB_CACHE)
    names = [m.name for m in found]
    if shared.model not in names:
        return
    labels = {m.name: m.label for m in found}
    key = f"model_{shared.model}"  # a fresh picker once any tab has switched
    st.selectbox("Switch model", names, index=names.index(shared.model), key=key,
                 format_func=labels.get, on_change=switch_model, args=(key,),
                 help="The mlx-lm models found here: the settings' one, the embedded one "
                 "and the local Hugging Face cache's. Every tab on this server switches; "
                 "your stories stay as they are.", disabled=len(names) < 2)  # fmt: skip
    if len(names) < 2:
        st.caption("Only this model is here. To add one, name an mlx-lm folder or hub id in "
                   "`[mlx] model` (config.toml) or `LLOOM_MODEL`, or download one into the "
                   "Hugging Face cache.")  # fmt: skip
    problem = tab().switch_error
    if problem:
        st.error(f"**That model cannot be used.** {md(problem)}", icon="🧠")


def switch_model(key: str) -> None:
    tab().switch_to = st.session_state[key]  # loaded in the run, under a spinner


def backend_info_ui(settings: Settings, backend: Backend | None, choice: Choice) -> None:
    """Where the model runs and why this backend, and where its search defaults come from."""
    if backend is not None:
        if backend.url:
            st.caption(f"Server: {code(backend.url)}")
        section = settings.model_section(backend.model_name)
        label = f'[models."{section}"]' if section else "[search]"
        st.caption(f"Search defaults: {code(label)} in the settings")
    st.caption(f"Backend chosen: {choice.reason}")
    if choice.name == "mlx":
        from backends.mlx import openblas  # on MLX only: a remote backend's page loads none

        st.caption(md(openblas.preload()))


def stats_ui(title: str, s: SearchStats) -> None:
    """The cost of the search (or the sampling) whose results this node shows."""
    st.subheader(title)
    note = messages.cache_note(s)
    if note:
        st.caption(md(note))
    st.markdown(
        f"- forward calls: **{s.forward_calls}**\n- model tokens: **{s.model_tokens}**\n"
        f"- prefill tokens: **{s.prefill_tokens}**\n- seconds: **{s.seconds:.2f}**"
    )


if __name__ == "__main__":
    main()
else:  # `streamlit run lloom.py` serves this app: each request's Host is checked first
    app = st.App(__file__, middleware=hosts.middleware())
