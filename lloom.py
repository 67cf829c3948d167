"""LLooM's page: weave a story with a language model, a few tokens at a time.

`streamlit run lloom.py`. The page lays out widgets and calls the engine: the story is a
loom (`weave.loom`, kept by `weave.loom_store`), and each browser tab is a cursor over it
(`weave.session.Workspace`); the search is `weave.search.expand`, the graphs are
`weave.render` (a search's token tree) and `weave.story_graph` (the story tree, each node a
link); what the page says about suggestions is `weave.present`'s. The URL names the
story and the node. The model is loaded once per process (`shared_backend`)
and shared by every session. No algorithm lives here.
"""

from __future__ import annotations

import json
import shutil
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace

import streamlit as st
from graphviz import Digraph  # the type of the page's graph
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

import backends
import lloom_steering
from backends import Backend, BackendError, choose_backend, openblas
from backends.mlx_batching import Cancelled
from weave import access, present, session
from weave.bounds import bound_of, problem, shown
from weave.config import ConfigError, Settings, load_settings
from weave.library import open_store
from weave.loom_store import LoomStore, StoryInfo
from weave.loom_view import node_label, story_tree
from weave.offers import Alternatives, Draw, Offer, Piece, branch_text
from weave.present import code, md
from weave.ramify import RamifyParams, RamifyResult
from weave.render import render_tree
from weave.search import SearchParams, SearchStats
from weave.tree import Suggestion

OWN_STORY = "✍️ Write my own"
SCORES = bound_of(SearchParams, "score").options
ACCEPT = "➜"  # the accept arrow: a glyph DejaVu has (no emoji font needed)
STORY_END = 600  # characters; a longer story's end is shown above the suggestions
STORY_TAIL = 300  # characters of it shown there
ALTERNATIVE_TOKENS = 256  # the story's last tokens offered for alternatives
ALTERNATIVES_K = 8  # alternatives per token
CONFIG_KEYS = {  # widget key -> SearchParams field
    "cfg_auto_stop": "auto_stop",
    "cfg_max_depth": "max_depth",
    "cfg_max_suggestions": "max_suggestions",
    "cfg_cutoff": "cutoff",
    "cfg_multiplier": "multiplier",
    "cfg_split_limit": "split_limit",
    "cfg_score": "score",
}
SLIDERS = {  # widget key -> label, step, help; bounds: SearchParams' field's
    "cfg_max_depth": ("Max Depth", 1, "Tokens per suggestion at most"),
    "cfg_max_suggestions": ("Max Suggestions", 1, "Suggestions at most"),
    "cfg_cutoff": ("Cutoff", 0.01, "The least probability a token needs to start a new beam"),
    "cfg_multiplier": ("Multiplier", 0.05,
                       "Cutoff scale per token (below 1: split more as beams grow)"),
    "cfg_split_limit": ("Split Limit", 1, "Children per beam at most (0: no limit)"),
}  # fmt: skip
DISPLAY_KEYS = {"cfg_prefix_space": "prefix_space", "cfg_shading": "shading"}  # page-only
SAMPLE_SLIDERS = {  # widget key -> RamifyParams field, label, step, help; bounds: the field's
    "smp_n": ("n", "Samples", 1, "Continuations to draw"),
    "smp_temperature": ("temperature", "Temperature", 0.05, "0: always the most likely token"),
    "smp_min_p": ("min_p", "Min-p", 0.01,
                  "Drop tokens below this share of the top token's probability"),
    "smp_max_tokens": ("max_tokens", "Max tokens", 1, "Tokens per sample at most"),
}  # fmt: skip


# -- shared, once per process ---------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def shared_settings() -> Settings:
    return load_settings()


def release(backend: Backend) -> None:
    """Close a backend whose cache entry is cleared (tests do; `Backend.close` would be
    the base class's no-op, hence this function)."""
    backend.close()


@st.cache_resource(
    show_spinner="Loading the model (the first time converts it)…", on_release=release
)
def shared_backend() -> Backend:
    """The one backend every session uses (the MLX backend serialises its own work)."""
    return backends.create_backend(shared_settings())


@st.cache_resource(show_spinner=False)
def shared_store() -> tuple[LoomStore, str | None]:
    """The story store in the data folder, or a temporary one with the reason it failed."""
    return open_store(shared_settings().data_dir)


# -- the page -------------------------------------------------------------------------------
def main() -> None:
    st.set_page_config(page_title="LLooM", page_icon="🧶", layout="wide")
    settings = settings_or_stop()
    writer = writer_or_stop(settings)  # before any story or the model
    store, problem = shared_store()
    ws = workspace(store.as_writer(writer))
    backend = backend_or_none()
    open_from_url(ws)
    ws.refresh()  # the other tabs' nodes, this tab's cursor
    sync_url(ws)  # before any search, so a refresh during a long one finds the node
    storage_ui(ws, problem)
    start_page = st.empty()  # on the story page an empty slot: the start page is gone at once
    offer, graph = None, None
    if ws.started:
        offer, graph = story_page(settings, ws, backend)
    else:
        with start_page.container():
            start_error_ui()
            start_ui(settings, ws)
            library_ui(ws)
    sidebar_ui(settings, ws, backend, offer, graph)  # last: it shows the search this run made


def story_page(
    settings: Settings, ws: session.Workspace, backend: Backend | None
) -> tuple[Offer | None, Digraph | None]:
    """The story, its moves, this node's suggestions and the graphs; returns the search it
    showed and its graph (built once a run)."""
    st.subheader(f"🧶 LLooM · {md(ws.title)}" if ws.title else "🧶 LLooM")
    params, prefix_space, shading = config_ui(settings, backend, ws)
    steer, seen = st.columns(2)
    with steer.popover("📝 Memory & notes", width="stretch"):
        lloom_steering.steering_ui(ws)  # before the search: it searches under them
    story_ui(ws)
    sampling, alternatives = st.columns(2)
    with sampling:
        draw = sample_ui(settings, ws, backend)
    with alternatives:
        alternatives_ui(ws, backend)
    offer = search_ui(ws, backend, params, prefix_space)
    with seen:
        lloom_steering.context_ui(ws, backend, params.max_depth)
    error_ui(ws)
    lone_ui(ws)
    if offer is not None:
        hint = present.few_suggestions_hint(len(offer.result.suggestions), offer.params)
        if hint:
            st.caption(f"💡 {md(hint)}")
    graph = page_graph(ws, offer) if offer is not None else None
    graphs_ui(ws, graph)
    story_end_ui(ws)
    if draw is not None:
        samples_ui(ws, draw, prefix_space)
    if offer is not None:
        if offer.params != params:
            st.caption("⚠️ These suggestions were made here with other settings.")
        suggestions_ui(ws, offer, prefix_space, shading)
    elif not ws.text:
        st.info("The story is empty here: write something, or go forward (↪ Redo).")
    return offer, graph


def graphs_ui(ws: session.Workspace, graph: Digraph | None) -> None:
    """The story tree and this search's token tree, full width, one tab each."""
    tree_tab, search_tab = st.tabs(["🌳 Story tree", "🔎 This search's token tree"])
    with tree_tab:
        loom_ui(ws)
    with search_tab:
        if graph is not None:
            graph_ui(graph)
        else:
            st.caption("No search at this node yet.")


def settings_or_stop() -> Settings:
    try:
        return shared_settings()
    except ConfigError as e:
        st.error(f"**LLooM's settings cannot be read.** {md(str(e))}", icon="⚙️")
        st.stop()


@dataclass
class PageState:
    """What the page keeps for one browser session besides its widgets' values."""

    ws: session.Workspace
    url_read: bool = False  # the URL's story and node were opened (once per session)
    url_missing: str | None = None  # a story the URL named that is not here (said once)
    backend_error: str | None = None  # why the backend cannot be used (until retried)
    confirm_delete: str | None = None  # the story whose deletion awaits a yes
    confirm_purge: str | None = None
    settings_for: str | None = None  # the story whose settings the sliders hold
    story_shown: tuple[str, str, str] | None = None  # (story, node, text) in the story box
    alternatives: Alternatives | None = None  # the last alternatives asked for
    imports: int = 0  # files imported (each import gets a fresh uploader)
    import_error: str | None = None


def page() -> PageState:
    """This browser session's state (`workspace` makes it)."""
    return st.session_state.page


def writer_or_stop(settings: Settings) -> str:
    """The writer this page is for (`weave.access`); else a login button or the reason."""
    login = st.secrets.load_if_toml_exists() and "auth" in st.secrets
    proxied = any(name in st.context.headers for name in access.PROXY_HEADERS)
    verdict = access.decide(
        address=st.get_option("server.address") or "", proxied=proxied, login=login,
        open_page=settings.sharing.open, logged_in=login and st.user.is_logged_in,
        email=st.user.get("email") if login else None,
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
            st.caption(f"Logged in as **{md(verdict.writer or st.user.get('name') or '')}**")
            if st.button("Log out", key="logout"):
                st.logout()
    if verdict.writer is None:
        st.stop()
    return verdict.writer


def workspace(store: LoomStore) -> session.Workspace:
    """This browser session's workspace, made once (anew when another writer logs in)."""
    if "page" not in st.session_state or page().ws.store.writer != store.writer:
        st.session_state.page = PageState(session.Workspace(store))
    return page().ws


def open_from_url(ws: session.Workspace) -> None:
    """A new session (a refreshed tab) reopens the story and the node its URL names, once."""
    if page().url_read:
        return
    page().url_read = True
    story_id = st.query_params.get("story")
    opened = story_id and ws.open(story_id, st.query_params.get("node"))
    if story_id and not opened and ws.save_error is None:  # else storage_ui says why
        page().url_missing = story_id


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
            f"They are in {code(str(ws.store.folder))} until it is cleaned; download your "
            "story (sidebar) to keep it.",
            icon="💾",
        )
    if ws.save_error:
        st.error(
            f"**The last change could not be saved.** {md(ws.save_error)}  \n"
            "It is kept here and saved at your next change; download your story (sidebar) "
            "to be safe.",
            icon="💾",
        )
    missing, page().url_missing = page().url_missing, None
    if missing:
        st.warning(f"No story {md(missing)} of yours here: it may have been purged, or be "
                   "another writer's.", icon="🔎")  # fmt: skip


def backend_or_none() -> Backend | None:
    """The shared backend, or None with the reason kept for the page to show.

    A failure is not retried on every rerun (a dead server could cost a timeout each
    time): only when the writer asks, with the button `error_ui` shows.
    """
    if page().backend_error:
        return None
    try:
        return shared_backend()
    except BackendError as e:
        page().backend_error = str(e)
        return None


def retry_backend() -> None:
    page().backend_error = None


# -- start ----------------------------------------------------------------------------------
def start_error_ui() -> None:
    """The model's trouble, first on the start page, in words for a page without a story."""
    reason = page().backend_error
    if reason:
        st.error(f"**The model cannot be used.** {md(reason)}\n\nYou can still open your "
                 "saved stories; to write with the model, fix the backend, then try again.",
                 icon="🔌")  # fmt: skip
        st.button("🔌 Try the backend again", on_click=retry_backend, key="retry_backend")


def start_ui(settings: Settings, ws: session.Workspace) -> None:
    st.title("🧶 LLooM")
    st.caption("Weave a story with a language model, a few tokens at a time.")
    choice = st.radio("Start from", [*settings.starting_stories, OWN_STORY], key="start_choice")
    own = st.text_area("Your story", key="start_text", disabled=choice != OWN_STORY)
    text = own if choice == OWN_STORY else choice
    if st.button("Start", type="primary", key="start"):
        if not text.strip():
            st.warning("Write a few words first.")
            return
        if ws.start(text):
            st.rerun()


def library_ui(ws: session.Workspace) -> None:
    """Saved stories to reopen (title, nodes, last edited), each deletable; then the deleted."""
    entries = ws.library.stories()
    if entries:
        st.subheader("Your stories")
    for entry in entries:
        story_row(ws, entry)
    deleted = ws.library.stories(deleted=True)
    if deleted:
        with st.expander(f"Deleted stories ({len(deleted)}): kept until purged"):
            for entry in deleted:
                deleted_row(ws, entry)


def story_row(ws: session.Workspace, entry: StoryInfo) -> None:
    title, edited, delete = st.columns([6, 2, 1], vertical_alignment="center")
    title.button(f"📖 {entry.title}", key=f"open_{entry.id}", on_click=ws.open, args=(entry.id,))
    edited.caption(f"{entry.nodes} nodes · edited {when(entry.updated)}")
    if page().confirm_delete != entry.id:
        delete.button("🗑️ Delete", key=f"delete_{entry.id}",
                      help="Delete (recoverable until purged)",
                      on_click=ask, args=("confirm_delete", entry.id))  # fmt: skip
        return
    st.warning(f"Delete “{md(entry.title)}”? It stays recoverable until you purge it.")
    yes, no = st.columns(2)
    yes.button("Yes, delete", key=f"delete_yes_{entry.id}", on_click=confirm,
               args=("confirm_delete", ws.library.delete, entry.id))  # fmt: skip
    no.button("Cancel", key=f"delete_no_{entry.id}", on_click=ask, args=("confirm_delete", None))


def deleted_row(ws: session.Workspace, entry: StoryInfo) -> None:
    title, restore, purge = st.columns([6, 2, 2], vertical_alignment="center")
    title.markdown(f"{md(entry.title)} · deleted, edited {when(entry.updated)}")
    restore.button(
        "Restore", key=f"restore_{entry.id}", on_click=ws.library.restore, args=(entry.id,)
    )
    if page().confirm_purge != entry.id:
        purge.button("Purge…", key=f"purge_{entry.id}", on_click=ask,
                     args=("confirm_purge", entry.id))  # fmt: skip
        return
    purge.button("Purge forever", key=f"purge_yes_{entry.id}", type="primary",
                 on_click=confirm, args=("confirm_purge", ws.library.purge, entry.id))  # fmt: skip


def ask(flag: str, value: str | None) -> None:
    """Set `flag` ("confirm_delete" or "confirm_purge"): the story awaiting a yes."""
    setattr(page(), flag, value)


def confirm(flag: str, action, story_id: str) -> None:
    setattr(page(), flag, None)
    action(story_id)


def when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))


# -- configuration --------------------------------------------------------------------------
def config_ui(
    settings: Settings, backend: Backend | None, ws: session.Workspace
) -> tuple[SearchParams, bool, bool]:
    """The Configuration expander; returns the search parameters and the display choices.

    The values start from the model's defaults, or from what the story saved; every
    change is saved with the story.
    """
    defaults = settings.search_for(backend.model_name) if backend else settings.search
    if page().settings_for != ws.story_id:
        page().settings_for = ws.story_id
        load_settings_into_widgets(ws, defaults)
    for key, field in CONFIG_KEYS.items():
        st.session_state.setdefault(key, getattr(defaults, field))
    for key in DISPLAY_KEYS:
        st.session_state.setdefault(key, True)
    with st.expander("Configuration"):
        stop, split, show = st.columns(3)
        with stop:
            stop_ui()
        with split:
            split_ui()
        with show:
            prefix_space, shading = display_ui()
    values = {field: st.session_state[key] for key, field in CONFIG_KEYS.items()}
    ws.remember_settings({**values, "prefix_space": prefix_space, "shading": shading})
    return replace(defaults, **values), prefix_space, shading


def load_settings_into_widgets(ws: session.Workspace, defaults: SearchParams) -> None:
    """A reopened story's saved settings set the widgets; one that is not a value its
    widget can take (outside its bounds, say) is named in the story's notice, and the
    default is kept: never clamped."""
    saved, refused = ws.settings, []
    for key, field in CONFIG_KEYS.items():
        if field in saved:
            value = widget_value(field, saved[field], like=getattr(defaults, field))
            if value is None:
                refused.append(f"{field} = {shown(saved[field])}")
            else:
                st.session_state[key] = value
    for key, field in DISPLAY_KEYS.items():
        if isinstance(saved.get(field), bool):
            st.session_state[key] = saved[field]
    if refused:
        unusable = (f"This story's saved {', '.join(refused)} cannot be used (see the bounds "
                    "in Configuration): the defaults are used instead.")  # fmt: skip
        ws.notice = f"{ws.notice} {unusable}" if ws.notice else unusable


def widget_value(field: str, value, *, like):
    """`value` as the widget for SearchParams' `field` takes it (of `like`'s type, an int
    made a float for a float, inside the field's bounds), or None when it cannot be."""
    number = isinstance(like, float) and isinstance(value, int) and not isinstance(value, bool)
    if type(value) is not type(like) and not number:
        return None
    bound = bound_of(SearchParams, field)
    if bound is not None and problem(field, value, bound):
        return None
    return float(value) if number else value


def stop_ui() -> None:
    st.markdown("**Stop conditions**")
    st.checkbox("Auto-Stop", key="cfg_auto_stop", help="End a beam at '.' or ','")
    slider_ui("cfg_max_depth")
    slider_ui("cfg_max_suggestions")


def split_ui() -> None:
    st.markdown("**Split conditions**")
    for key in ("cfg_cutoff", "cfg_multiplier", "cfg_split_limit"):
        slider_ui(key)


def slider_ui(key: str) -> None:
    label, step, help_text = SLIDERS[key]
    bound = bound_of(SearchParams, CONFIG_KEYS[key])
    st.slider(label, bound.low, bound.high, step=step, key=key, help=help_text)


def display_ui() -> tuple[bool, bool]:
    """Scoring, prefix space and token shading; returns (prefix_space, shading)."""
    st.markdown("**Ranking and display**")
    st.radio(
        "Scoring", SCORES, key="cfg_score", horizontal=True,
        help="joint: sum of log-probabilities; lloom: v0.3's sum of probabilities",
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
    """The editable story (Ctrl+Enter applies: a new branch), then the moves in the tree."""
    shown = (ws.story_id, ws.cursor, ws.text)
    if page().story_shown != shown:  # another node, or another tab's edit
        st.session_state.story_text = ws.text
        page().story_shown = shown
    st.text_area("Story", key="story_text", height=170, on_change=apply_edit, args=(ws,),
                 help="Edit freely; Ctrl+Enter applies the edit as a new branch")  # fmt: skip
    moves_ui(ws)


def moves_ui(ws: session.Workspace) -> None:
    """Suggest again; undo/redo (parent, checked-out child); siblings ("2 of 5"); bookmark."""
    loom = ws.loom
    again, undo, redo, back, where, forth, mark = st.columns(
        [2.0, 1.1, 1.1, 1.4, 1.6, 1.1, 1.5], vertical_alignment="center"
    )
    again.button("🔁 Suggest again", on_click=ws.retry, key="again", disabled=not ws.text)
    undo.button("↩ Undo", on_click=ws.undo, disabled=ws.undo_target() is None, key="undo",
                help="Back to the parent: the story before its last piece (before all the "
                "lone suggestions accepted by themselves)")  # fmt: skip
    redo.button("↪ Redo", on_click=ws.redo, disabled=loom.redo_target() is None, key="redo",
                help="Forward to the branch you were on")  # fmt: skip
    back.button("◀ Previous", on_click=ws.sibling, args=(-1,), key="sibling_prev",
                disabled=loom.sibling_target(-1) is None, help="The previous branch")  # fmt: skip
    i, n = loom.sibling_position()
    where.caption(f"branch {i} of {n}", help="Branches that grow from the same place")
    forth.button("Next ▶", on_click=ws.sibling, args=(1,), key="sibling_next",
                 disabled=loom.sibling_target(1) is None, help="The next branch")  # fmt: skip
    marked = ws.cursor in loom.bookmarks
    mark.button("🔖 Unmark" if marked else "🔖 Bookmark", key="bookmark",
                on_click=ws.bookmark, args=(ws.cursor, not marked))  # fmt: skip


def apply_edit(ws: session.Workspace) -> None:
    ws.edit(st.session_state.story_text)


# -- searching ------------------------------------------------------------------------------
def search_ui(
    ws: session.Workspace, backend: Backend | None, params: SearchParams, prefix_space: bool
) -> Offer | None:
    """Search at this node when it has no suggestions for these parameters; a live status.

    Returns the suggestions to show: this node's only (on failure, its earlier ones).
    """
    model = backend.model_name if backend else None
    if backend is not None and ws.offers.needs_search(ws.spot, params, model=model):
        first = present.first_status(ws.text)
        try:
            with st.status(first, expanded=False) as status, while_open(backend):
                report = lambda p: status.update(label=present.live_status(p))  # noqa: E731
                offer = ws.offers.suggest(backend, ws.spot, params, progress=report)
                if offer is None:
                    status.update(label="No suggestions: see below", state="error")
                else:
                    status.update(label=present.search_status(offer.result), state="complete")
        except Cancelled:  # the tab is gone: no one to show anything to
            st.stop()
        if offer is not None and ws.take_lone(offer, prefix_space=prefix_space):
            st.rerun()
        return offer or ws.offers.latest(ws.cursor)
    offer = ws.offers.offer(ws.spot, params, model=model)
    if offer is not None:
        st.caption(f"✔️ {md(present.search_status(offer.result))}")
        return offer
    return ws.offers.latest(ws.cursor)


def while_open(backend: Backend):
    """Within it, a long read or search for a tab that has since closed stops between
    chunks and depths (on MLX, the one backend with `cancellable`), leaving the model to
    the other writers; the script ends quietly."""
    ctx = get_script_run_ctx()
    if ctx is None or not Runtime.exists():
        return nullcontext()
    runtime, session_id = Runtime.instance(), ctx.session_id
    return backend.cancellable(lambda: runtime.is_active_session(session_id))


def error_ui(ws: session.Workspace) -> None:
    reason = page().backend_error
    if reason:
        st.error(f"**The model cannot be used.** {md(reason)}\n\nYour story is kept; "
                 "fix the backend, then try again.", icon="🔌")  # fmt: skip
        st.button("🔌 Try the backend again", on_click=retry_backend, key="retry_backend")
    elif ws.offers.error:
        st.error(f"**The model did not answer.** {md(ws.offers.error)}\n\nYour story and the last "
                 "suggestions are kept; press *Suggest again* to retry.", icon="🔌")  # fmt: skip
    for notice in (ws.notice, ws.offers.notice):
        if notice:
            st.warning(md(notice), icon="⚠️")


# -- samples (n8loom's ramify) ----------------------------------------------------------------
def sample_ui(settings: Settings, ws: session.Workspace, backend: Backend | None) -> Draw | None:
    """🎲 Sample: N continuations drawn by the model at this node; returns this node's draw."""
    with st.expander("🎲 Sample continuations (temperature, min-p)"):
        columns = st.columns(len(SAMPLE_SLIDERS))
        for column, (key, spec) in zip(columns, SAMPLE_SLIDERS.items(), strict=True):
            field, label, step, help_text = spec
            bound = bound_of(RamifyParams, field)
            st.session_state.setdefault(key, getattr(settings.sample, field))
            column.slider(label, bound.low, bound.high, step=step, key=key, help=help_text)
        clicked = st.button("🎲 Sample", key="sample", disabled=backend is None or not ws.text)
    if clicked:
        values = {spec[0]: st.session_state[key] for key, spec in SAMPLE_SLIDERS.items()}
        sample(ws, backend, replace(settings.sample, **values))
    return ws.offers.draw(ws.cursor)


def sample(ws: session.Workspace, backend: Backend, params: RamifyParams) -> None:
    with st.status("Sampling…", expanded=False) as status:
        report = lambda p: status.update(label=present.live_status(p))  # noqa: E731
        draw = ws.offers.sample(backend, ws.spot, params, progress=report)
        if draw is None:
            status.update(label="No samples: see below", state="error")
        else:
            status.update(label=drawn(draw.result), state="complete")


def drawn(result: RamifyResult) -> str:
    s, n = result.stats, len(result.samples)
    rate = s.model_tokens / s.seconds if s.seconds > 0 else 0.0
    return f"{n} sample{'s' if n != 1 else ''} in {s.seconds:.1f} s · {rate:.0f} tokens/s"


def samples_ui(ws: session.Workspace, draw: Draw, prefix_space: bool) -> None:
    """The samples drawn here, each with its log-probability, editable, 📌 and ➡️."""
    st.markdown(f"**🎲 Samples** · {drawn(draw.result)}")
    space = "p" if prefix_space else "n"
    for i, sample in enumerate(draw.result.samples):
        row = Row(ws, draw.piece(sample), f"smp_{draw.tag}_{space}_{i}", prefix_space)
        score, text, keep, go = st.columns([1.3, 6, 1, 1], gap="xsmall",
                                           vertical_alignment="bottom")  # fmt: skip
        score.caption(f"log-p {sample.logprob:.1f}", help="Its tokens' log-probabilities, summed")
        with text:
            text_box(row, "Sample")
        take_buttons(row, keep, go)


# -- alternatives at any token --------------------------------------------------------------
def alternatives_ui(ws: session.Workspace, backend: Backend | None) -> None:
    """The story's last tokens shaded by their probability; pick one, then one of the
    model's alternatives there, and the loom branches at that token."""
    with st.expander("🔍 Alternatives at any token"):
        if st.button("Show the story's tokens", key="alt_show",
                     disabled=backend is None or not ws.text,
                     help=f"The last {ALTERNATIVE_TOKENS} tokens, each with the model's "
                     f"top {ALTERNATIVES_K} there"):  # fmt: skip
            page().alternatives = ws.offers.alternatives(
                backend, ws.spot, k=ALTERNATIVES_K, last=ALTERNATIVE_TOKENS
            )
        shown = page().alternatives
        if shown is None or (shown.story_id, shown.node_id) != (ws.story_id, ws.cursor):
            return
        if shown.unsupported:
            st.info(f"{md(backend.name)} cannot say what the model offered at the story's own "
                    "tokens (its server gives no log-probabilities of a prompt).")  # fmt: skip
            return
        if shown.error is not None:
            st.error(f"**No alternatives here.** {md(shown.error)}", icon="🔌")
            return
        alternatives_picker(ws, shown)


def alternatives_picker(ws: session.Workspace, shown: Alternatives) -> None:
    rows = shown.rows
    st.markdown(present.story_tokens_html(rows), unsafe_allow_html=True)
    st.caption("Shaded by the probability the model gave each token (hover for it and the "
               "likeliest alternatives).")  # fmt: skip
    token, choice, go = st.columns([3, 3, 2], vertical_alignment="bottom")
    at = token.selectbox("Token", range(len(rows)), index=len(rows) - 1, key="alt_token",
                         format_func=lambda i: token_label(rows[i], i))  # fmt: skip
    row = rows[at]
    pick = choice.selectbox(
        "Alternative",
        range(len(row.top)),
        key=f"alt_choice_{at}",
        format_func=lambda i: present.alternative_label(row.top[i]),
    )
    go.button("Branch here", key="alt_branch", type="primary", on_click=branch_at,
              args=(ws, shown, row, row.top[pick]),
              help="A new branch: the story up to this token, then the alternative")  # fmt: skip


def token_label(row, i: int) -> str:
    return f"{i + 1}. {present.editable_text(row.text) or '∅'}"


def branch_at(ws: session.Workspace, shown: Alternatives, row, choice) -> None:
    try:
        ws.edit(branch_text(ws.text, shown.rows, row, choice))
    except ValueError as e:  # the tokens do not spell this story's end
        page().alternatives = shown.failed(str(e))


# -- suggestions ----------------------------------------------------------------------------
def lone_ui(ws: session.Workspace) -> None:
    """Say which lone suggestions were accepted by themselves (one undo takes them back)."""
    chain = ws.lone_chain()
    message = present.auto_accept_message(chain.texts) if chain else None
    if message:
        st.info(f"{md(message)} *↩ Undo* takes {'it' if len(chain.texts) == 1 else 'them all'} "
                "back.", icon="🤖")  # fmt: skip


def story_end_ui(ws: session.Workspace) -> None:
    """The end of a long story, which the story box (showing its beginning) hides."""
    text = ws.text
    if len(text) <= STORY_END:
        return
    tail = text[-STORY_TAIL:]
    tail = tail[tail.find(" ") + 1 :] if " " in tail[:40] else tail  # from a whole word
    st.caption("The story so far ends (the whole text is in the story box above):")
    st.markdown(f"> …{md(tail)}".replace("  \n", "  \n> "))


def suggestions_ui(ws: session.Workspace, offer: Offer, prefix_space: bool, shading: bool) -> None:
    """Ranked suggestions, one row each: the bar, the text (✏️ edits it in place), 📌, ➜.

    The widgets are named after the search and the prefix-space choice, so a box never
    holds the text another search, or the other choice, put there.
    """
    suggestions = offer.result.suggestions
    if not suggestions:
        st.info("No suggestions: the model ended the story here. Edit it, or lower the cutoff.")
        return
    shares = present.bar_shares(suggestions, offer.params.score)
    st.caption(f"{present.bar_caption(offer.params.score)} ✏️ edits one, 📌 keeps one as a "
               f"branch without moving, {ACCEPT} takes it.")  # fmt: skip
    space = "p" if prefix_space else "n"
    for i, (suggestion, share) in enumerate(zip(suggestions, shares, strict=True)):
        row = Row(ws, offer.piece(suggestion), f"sg_{offer.tag}_{space}_{i}", prefix_space)
        suggestion_row(row, suggestion, share, max(shares), shading)


@dataclass(frozen=True)
class Row:
    """One offered continuation on the page: where it came from, and its widgets' key."""

    ws: session.Workspace
    piece: Piece
    key: str
    prefix_space: bool

    def shown(self) -> str | None:
        """The text as the writer left it in the row (None: unedited)."""
        box = st.session_state.get(self.key)
        return None if box is None else present.typed_text(box)


def suggestion_row(row: Row, suggestion: Suggestion, share: float, best: float,
                   shading: bool) -> None:  # fmt: skip
    bar, text, edit, keep, go = st.columns([1.2, 7, 1.1, 1.2, 0.6], gap="xsmall",
                                           vertical_alignment="center")  # fmt: skip
    bar.progress(min(share / best, 1.0) if best else 0.0, text=f"{share:.1%}")
    editing = st.session_state.get(f"{row.key}_editing", False)
    with text:
        if editing:
            shown = present.shown_text(suggestion.text, prefix_space=row.prefix_space)
            st.text_input("Suggestion", value=present.editable_text(shown), key=row.key,
                          label_visibility="collapsed",
                          help="↵ is a new line, ␣ a space at the start")  # fmt: skip
        else:
            html = present.suggestion_html(suggestion, prefix_space=row.prefix_space,
                                           shading=shading)  # fmt: skip
            st.markdown(html, unsafe_allow_html=True)
    edit.button("✕ Close" if editing else "✏️ Edit", key=f"{row.key}_edit", width="stretch",
                on_click=toggle_edit, args=(row,),
                help="Back to the shaded text" if editing else "Edit, then take it")  # fmt: skip
    take_buttons(row, keep, go)


def toggle_edit(row: Row) -> None:
    flag = f"{row.key}_editing"
    st.session_state[flag] = not st.session_state.get(flag, False)
    if not st.session_state[flag]:
        st.session_state.pop(row.key, None)


def text_box(row: Row, label: str) -> None:
    """The offered text, editable (prefix space: shown without its leading space)."""
    shown = present.shown_text(row.piece.text, prefix_space=row.prefix_space)
    st.text_input(label, value=present.editable_text(shown), key=row.key,
                  label_visibility="collapsed")  # fmt: skip


def take_buttons(row: Row, keep, go) -> None:
    """📌 keep as a branch (disabled once kept), ➜ accept."""
    kept = row.ws.loom.child_with_text(row.piece.node_id, row.piece.text) is not None
    keep.button("📌 Keep", key=f"{row.key}_keep", width="stretch", on_click=keep_row,
                args=(row,), disabled=kept,
                help="Kept as a branch" if kept else "Keep as a branch; stay here")  # fmt: skip
    go.button(ACCEPT, key=f"{row.key}_go", help="Accept into the story", width="stretch",
              on_click=accept_row, args=(row,))  # fmt: skip


def accept_row(row: Row) -> None:
    """Without prefix space the box holds the whole text, its leading space included."""
    row.ws.accept(row.piece, row.shown(), prefix_space=row.prefix_space)


def keep_row(row: Row) -> None:
    row.ws.keep(row.piece, row.shown(), prefix_space=row.prefix_space)


# -- the graphs -----------------------------------------------------------------------------
def loom_ui(ws: session.Workspace) -> None:
    """The story tree (current path highlighted, a click on a node goes there) and a
    picker to go to any node, the folded ones too."""
    loom = ws.loom
    st.graphviz_chart(story_tree(loom, ws.story_id))
    ids = list(loom.nodes)
    st.selectbox("Go to", ids, index=ids.index(ws.cursor), key=f"go_{ws.story_id}_{ws.cursor}",
                 format_func=lambda node_id: node_label(loom, node_id),
                 on_change=pick_node, args=(ws, f"go_{ws.story_id}_{ws.cursor}"),
                 help="Any node of the story tree")  # fmt: skip


def pick_node(ws: session.Workspace, key: str) -> None:
    ws.go(st.session_state[key])


def graph_ui(graph: Digraph) -> None:
    st.graphviz_chart(graph)
    dot_button, png_button = st.columns(2)
    dot_button.download_button("DOT", graph.source, "lloom.dot", "text/vnd.graphviz",
                               key="graph_dot", on_click="ignore")  # fmt: skip
    if has_dot():
        png_button.download_button("PNG", lambda: graph.pipe(format="png"), "lloom.png",
                                   "image/png", key="graph_png", on_click="ignore")  # fmt: skip
    else:
        png_button.caption("PNG needs graphviz's `dot` (apt-get install graphviz).")


def page_graph(ws: session.Workspace, offer: Offer) -> Digraph:
    result = offer.result
    best = result.suggestions[0].token_ids if result.suggestions else None
    return render_tree(result.tree, best=best, story_tail=ws.loom.text(offer.node_id)[-60:])


def has_dot() -> bool:
    return shutil.which("dot") is not None


# -- the sidebar ----------------------------------------------------------------------------
def sidebar_ui(
    settings: Settings,
    ws: session.Workspace,
    backend: Backend | None,
    offer: Offer | None,
    graph: Digraph | None,
) -> None:
    """The story's title and bookmarks, the model, this node's search and the downloads."""
    with st.sidebar:
        if ws.started:
            story_info_ui(ws)
            bookmarks_ui(ws)
        backend_info_ui(settings, backend)
        if offer is not None:
            stats_ui("This node's search", offer.result.stats)
        if backend is not None and backend.cache_bytes is not None:
            st.caption(f"KV fragment tree: {backend.cache_bytes / 2**20:,.1f} MiB held, "
                       f"at most {backend.cache_cap_bytes / 2**20:,.0f} MiB")  # fmt: skip
        draw = ws.offers.draw(ws.cursor) if ws.started else None
        if draw is not None:
            stats_ui("This node's samples", draw.result.stats)
        if ws.started:
            downloads_ui(ws, offer, graph)
        import_ui(ws)
        st.caption(f"Stories are saved in {code(str(ws.store.folder))}")


def story_info_ui(ws: session.Workspace) -> None:
    st.subheader("Story")
    key = f"title_{ws.story_id}"
    st.text_input("Title", value=ws.title, key=key, on_change=rename, args=(ws, key))
    st.button("📚 All stories · new story", key="close", on_click=ws.close)


def bookmarks_ui(ws: session.Workspace) -> None:
    """The bookmarked nodes, oldest first; a click goes there."""
    loom = ws.loom
    marked = [node_id for node_id in loom.nodes if node_id in loom.bookmarks]
    if not marked:
        return
    st.subheader("Bookmarks")
    for node_id in marked:
        label = present.shorten(present.one_line(loom.text(node_id)[-40:]), 40)
        st.button(f"🔖 {label}", key=f"mark_{node_id}",
                  on_click=ws.go, args=(node_id,), disabled=node_id == ws.cursor,
                  width="stretch")  # fmt: skip


def rename(ws: session.Workspace, key: str) -> None:
    ws.rename(st.session_state[key])


def import_ui(ws: session.Workspace) -> None:
    """Open an exported story (.json: the loom, or an older session) as a new story."""
    key = f"import_{page().imports}"
    st.file_uploader("Import a story (.json)", type=["json"], key=key,
                     on_change=import_file, args=(ws, key))  # fmt: skip
    problem = page().import_error
    if problem:
        st.error(f"**That file cannot be imported.** {md(problem)}", icon="📄")


def import_file(ws: session.Workspace, key: str) -> None:
    upload = st.session_state.get(key)
    if upload is None:
        return
    problem = ws.import_file(upload.getvalue())
    page().import_error = problem
    if problem is None:
        page().imports += 1  # a fresh uploader


def backend_info_ui(settings: Settings, backend: Backend | None) -> None:
    st.subheader("Model")
    choice = choose_backend(settings)
    if backend is None:
        st.markdown(f"**{choice.name}**: not available")
    else:
        st.markdown(f"**{md(backend.model_name)}** on {backend.name}")
        if backend.url:
            st.caption(f"Server: {code(backend.url)}")
        section = settings.model_section(backend.model_name)
        label = f'[models."{section}"]' if section else "[search]"
        st.caption(f"Search defaults: {code(label)} in the settings")
    st.caption(f"Backend chosen: {choice.reason}")
    if choice.name == "mlx":
        st.caption(md(openblas.NOTE))
    note = backend.note if backend is not None else None
    if note:
        st.info(md(note))


def stats_ui(title: str, s: SearchStats) -> None:
    """The cost of the search (or the sampling) whose results this node shows."""
    st.subheader(title)
    note = present.cache_note(s)
    if note:
        st.caption(md(note))
    st.markdown(
        f"- forward calls: **{s.forward_calls}**\n- model tokens: **{s.model_tokens}**\n"
        f"- prefill tokens: **{s.prefill_tokens}**\n- seconds: **{s.seconds:.2f}**"
    )


def downloads_ui(ws: session.Workspace, offer: Offer | None, graph: Digraph | None) -> None:
    """The story shown (.txt, .md), the whole loom (.json), and this node's search."""
    st.subheader("Downloads")
    text, title = ws.text, ws.title
    one, two = st.columns(2)
    download(one, "Story .txt", text, "story.txt", "text/plain")
    download(two, "Story .md", lambda: f"# {title}\n\n{text}\n", "story.md", "text/markdown")
    if not ws.pending:  # the export is the store's: it holds what is saved
        download(one, "Loom .json", ws.export, "lloom-loom.json", "application/json")
    if offer is None or graph is None:
        return
    tree = lambda: json.dumps(offer.result.tree.to_dict(), ensure_ascii=False, indent=1,  # noqa: E731
                              allow_nan=False)  # fmt: skip
    download(two, "Tree .json", tree, "tree.json", "application/json")
    download(one, "Graph .dot", graph.source, "lloom.dot", "text/vnd.graphviz")
    if has_dot():
        download(two, "Graph .png", lambda: graph.pipe(format="png"), "lloom.png", "image/png")
        download(one, "Graph .svg", lambda: graph.pipe(format="svg"), "lloom.svg",
                 "image/svg+xml")  # fmt: skip
    else:
        st.caption("PNG and SVG need graphviz's `dot` (apt-get install graphviz).")


def download(column, label: str, data, file_name: str, mime: str) -> None:
    """A download that does not rerun the page (data may be a function, run on click)."""
    key = "dl_" + file_name.replace(".", "_").replace("-", "_")
    column.download_button(label, data, file_name, mime, key=key, on_click="ignore")


if __name__ == "__main__":
    main()
