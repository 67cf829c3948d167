"""LLooM's page: weave a story with a language model, a few tokens at a time.

`streamlit run lloom.py`. The page lays out widgets and calls the engine: the story and
its history live in a `weave.session.Workspace` (one per browser session), the search
is `weave.search.expand`, the graph is `weave.render`. The model is loaded once per
process (`shared_backend`) and shared by every session. No algorithm lives here.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import replace

import streamlit as st

from backends import Backend, BackendError, choose_backend, openblas
from weave import session
from weave.config import ConfigError, Settings, load_settings
from weave.render import render_tree, suggestion_html
from weave.search import Progress, SearchParams, SearchResult
from weave.story import display_text
from weave.tree import Suggestion

OWN_STORY = "✍️ Write my own"
SCORES = ["joint", "lloom"]
LONG_STORY = 8_000  # characters; the first search of a longer story says it will be slow
CONFIG_KEYS = {  # widget key -> SearchParams field
    "cfg_auto_stop": "auto_stop",
    "cfg_max_depth": "max_depth",
    "cfg_max_suggestions": "max_suggestions",
    "cfg_cutoff": "cutoff",
    "cfg_multiplier": "multiplier",
    "cfg_split_limit": "split_limit",
    "cfg_score": "score",
}
SLIDERS = {  # widget key -> label, bounds (LLooM v0.3's), step, help
    "cfg_max_depth": ("Max Depth", 1, 50, 1, "Tokens per suggestion at most"),
    "cfg_max_suggestions": ("Max Suggestions", 5, 100, 1, "Suggestions at most"),
    "cfg_cutoff": ("Cutoff", 0.0, 1.0, 0.01,
                   "The least probability a token needs to start a new beam"),
    "cfg_multiplier": ("Multiplier", 0.0, 2.0, 0.05,
                       "Cutoff scale per token (below 1: split more as beams grow)"),
    "cfg_split_limit": ("Split Limit", 0, 10, 1, "Children per beam at most (0: no limit)"),
}  # fmt: skip
DISPLAY_KEYS = {"cfg_prefix_space": "prefix_space", "cfg_shading": "shading"}  # page-only


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
    return session.make_backend(shared_settings())


@st.cache_resource(show_spinner=False)
def shared_book() -> tuple[session.Book, str | None]:
    """The story store in the data folder, or memory with the reason the store failed."""
    return session.open_book(shared_settings().data_dir)


# -- the page -------------------------------------------------------------------------------
def main() -> None:
    st.set_page_config(page_title="LLooM", page_icon="🧶", layout="wide")
    settings = settings_or_stop()
    book, problem = shared_book()
    ws = workspace(book)
    backend = backend_or_none()
    open_from_url(ws, backend)
    sync_url(ws)  # before any search, so a refresh during a long one finds the story
    storage_ui(ws, problem)
    if ws.started:
        story_page(settings, ws, backend)
    else:
        start_ui(settings, ws)
        library_ui(ws, backend)
        error_ui(ws)
    sidebar_ui(settings, ws, backend)  # last: it shows the search this run made


def story_page(settings: Settings, ws: session.Workspace, backend: Backend | None) -> None:
    params, prefix_space, shading = config_ui(settings, backend, ws)
    story_ui(ws)
    result = search_ui(ws, backend, params, prefix_space)
    error_ui(ws)
    if result is None:
        return
    if result is not ws.result_for(params):
        st.caption("⚠️ These suggestions were made for an earlier state of the story.")
    left, right = st.columns([5, 6], gap="medium")
    with left:
        suggestions_ui(ws, result, prefix_space, shading)
    with right:
        graph_ui(ws, result)


def settings_or_stop() -> Settings:
    try:
        return shared_settings()
    except ConfigError as e:
        st.error(f"**LLooM's settings cannot be read.** {md(str(e))}", icon="⚙️")
        st.stop()


def workspace(book: session.Book) -> session.Workspace:
    """This browser session's workspace, made once."""
    if "ws" not in st.session_state:
        st.session_state.ws = session.Workspace(book)
    return st.session_state.ws


def open_from_url(ws: session.Workspace, backend: Backend | None) -> None:
    """A new session (a refreshed tab) reopens the story its URL names, once."""
    if st.session_state.get("url_read"):
        return
    st.session_state.url_read = True
    story_id = st.query_params.get("story")
    opened = story_id and ws.open(story_id, model=backend.model_name if backend else None)
    if story_id and not opened and ws.save_error is None:  # else storage_ui says why
        st.session_state.url_missing = story_id


def sync_url(ws: session.Workspace) -> None:
    """The URL names the open story, so a refresh comes back to it."""
    if ws.story_id is None:
        st.query_params.pop("story", None)
    elif st.query_params.get("story") != ws.story_id:
        st.query_params["story"] = ws.story_id


def storage_ui(ws: session.Workspace, problem: str | None) -> None:
    """Say loudly when stories are not being saved."""
    if problem:
        st.error(
            f"**Stories are kept in memory only, and lost when LLooM stops.** {md(problem)}  \n"
            "Download your story (sidebar) to keep it.",
            icon="💾",
        )
    if ws.save_error:
        st.error(
            f"**The last change could not be saved.** {md(ws.save_error)}  \n"
            "It is kept here; download your story (sidebar) to be safe.",
            icon="💾",
        )
    missing = st.session_state.pop("url_missing", None)
    if missing:
        st.warning(f"No saved story {md(missing)} here: it may have been purged.", icon="🔎")


def backend_or_none() -> Backend | None:
    """The shared backend, or None with the reason kept for the page to show.

    A failure is not retried on every rerun (a dead server could cost a timeout each
    time): only when the writer asks, with the button `error_ui` shows.
    """
    if st.session_state.get("backend_error"):
        return None
    try:
        return shared_backend()
    except BackendError as e:
        st.session_state.backend_error = str(e)
        return None


def retry_backend() -> None:
    st.session_state.pop("backend_error", None)


# -- start ----------------------------------------------------------------------------------
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
        ws.start(text)
        st.rerun()


def library_ui(ws: session.Workspace, backend: Backend | None) -> None:
    """Saved stories to reopen (title, last edited), each deletable; then the deleted ones."""
    entries = ws.stories()
    if entries:
        st.subheader("Your stories")
    for entry in entries:
        story_row(ws, entry, backend)
    deleted = ws.stories(deleted=True)
    if deleted:
        with st.expander(f"Deleted stories ({len(deleted)}): kept until purged"):
            for entry in deleted:
                deleted_row(ws, entry)


def story_row(ws: session.Workspace, entry: session.Entry, backend: Backend | None) -> None:
    model = backend.model_name if backend else None
    title, edited, delete = st.columns([6, 2, 1], vertical_alignment="center")
    title.button(f"📖 {entry.title}", key=f"open_{entry.id}", on_click=ws.open,
                 args=(entry.id,), kwargs={"model": model})  # fmt: skip
    edited.caption(f"edited {when(entry.updated)}")
    if st.session_state.get("confirm_delete") != entry.id:
        delete.button("🗑️", key=f"delete_{entry.id}", help="Delete (recoverable until purged)",
                      on_click=ask, args=("confirm_delete", entry.id))  # fmt: skip
        return
    st.warning(f"Delete “{md(entry.title)}”? It stays recoverable until you purge it.")
    yes, no = st.columns(2)
    yes.button("Yes, delete", key=f"delete_yes_{entry.id}", on_click=confirm,
               args=("confirm_delete", ws.delete, entry.id))  # fmt: skip
    no.button("Cancel", key=f"delete_no_{entry.id}", on_click=ask, args=("confirm_delete", None))


def deleted_row(ws: session.Workspace, entry: session.Entry) -> None:
    title, restore, purge = st.columns([6, 2, 2], vertical_alignment="center")
    title.markdown(f"{md(entry.title)} · deleted, edited {when(entry.updated)}")
    restore.button("Restore", key=f"restore_{entry.id}", on_click=ws.restore, args=(entry.id,))
    if st.session_state.get("confirm_purge") != entry.id:
        purge.button("Purge…", key=f"purge_{entry.id}", on_click=ask,
                     args=("confirm_purge", entry.id))  # fmt: skip
        return
    purge.button("Purge forever", key=f"purge_yes_{entry.id}", type="primary",
                 on_click=confirm, args=("confirm_purge", ws.purge, entry.id))  # fmt: skip


def ask(flag: str, value: str | None) -> None:
    st.session_state[flag] = value


def confirm(flag: str, action, story_id: str) -> None:
    st.session_state[flag] = None
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
    if st.session_state.get("settings_for") != ws.story_id:
        st.session_state.settings_for = ws.story_id
        load_settings_into_widgets(ws.settings, defaults)
    for key, field in CONFIG_KEYS.items():
        st.session_state.setdefault(key, widget_value(key, getattr(defaults, field)))
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


def load_settings_into_widgets(saved: dict, defaults: SearchParams) -> None:
    """A reopened story's saved settings set the widgets, where they are valid."""
    for key, field in CONFIG_KEYS.items():
        value = widget_value(key, saved.get(field), like=getattr(defaults, field))
        if value is not None:
            st.session_state[key] = value
    for key, field in DISPLAY_KEYS.items():
        if isinstance(saved.get(field), bool):
            st.session_state[key] = saved[field]


def widget_value(key: str, value, *, like=None):
    """`value` as the widget `key` takes it (its type, inside its bounds), or None."""
    like = value if like is None else like
    if isinstance(like, bool | str):
        ok = type(value) is type(like) and (key != "cfg_score" or value in SCORES)
        return value if ok else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    low, high = SLIDERS[key][1:3]
    return type(like)(min(max(value, low), high))


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
    label, low, high, step, help_text = SLIDERS[key]
    st.slider(label, low, high, step=step, key=key, help=help_text)


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
    """The editable story (Ctrl+Enter applies) and its buttons."""
    if st.session_state.get("story_revision") != ws.revision:
        st.session_state.story_text = ws.story.text
        st.session_state.story_revision = ws.revision
    st.text_area("Story", key="story_text", height=170, on_change=apply_edit, args=(ws,),
                 help="Edit freely; Ctrl+Enter applies the edit")  # fmt: skip
    again, undo, redo, count = st.columns([2, 1, 1, 4], vertical_alignment="center")
    again.button("🔁 Suggest again", on_click=ws.retry, key="again")
    undo.button("↩️ Undo", on_click=ws.undo, disabled=not ws.can_undo, key="undo")
    redo.button("↪️ Redo", on_click=ws.redo, disabled=not ws.can_redo, key="redo")
    count.caption(history_line(ws))


def apply_edit(ws: session.Workspace) -> None:
    ws.edit(st.session_state.story_text)


def history_line(ws: session.Workspace) -> str:
    n = len(ws.history)
    return f"History: {n} state{'s' if n != 1 else ''}, at {ws.position + 1} of {n}"


# -- searching ------------------------------------------------------------------------------
def search_ui(
    ws: session.Workspace, backend: Backend | None, params: SearchParams, prefix_space: bool
) -> SearchResult | None:
    """Search when the story or the parameters changed; show a live status.

    Returns the result to show: this story's, or on failure the last one there was.
    """
    if backend is not None and ws.needs_search(params):
        with st.status(first_label(ws), expanded=False) as status:
            result = ws.suggest(backend, params, progress=lambda p: status.update(label=live(p)))
            if result is None:
                status.update(label="No suggestions: see below", state="error")
            else:
                status.update(label=summary(result), state="complete")
        if result is not None and ws.take_lone(result, prefix_space=prefix_space):
            st.rerun()
        return result or ws.last_result()
    result = ws.result_for(params)
    if result is not None:
        st.caption(f"✔️ {summary(result)}")
        return result
    return ws.last_result()


def first_label(ws: session.Workspace) -> str:
    if len(ws.story.text) < LONG_STORY:
        return "Weaving…"
    return "Weaving… (a long story is read once and then kept: on a CPU this takes a while)"


def live(p: Progress) -> str:
    if p.depth == 0:
        return f"Reading the story… {p.story_read:,} of {p.story_tokens:,} tokens"
    latest = f" · latest: “{md(shorten(p.latest, 60))}”" if p.latest else ""
    return f"Weaving… depth {p.depth}, {p.beams_done} found, {p.beams_live} growing{latest}"


def summary(result: SearchResult) -> str:
    s = result.stats
    rate = s.model_tokens / s.seconds if s.seconds > 0 else 0.0
    n = len(result.suggestions)
    return f"{n} suggestion{'s' if n != 1 else ''} in {s.seconds:.1f} s · {rate:.0f} tokens/s"


def error_ui(ws: session.Workspace) -> None:
    reason = st.session_state.get("backend_error")
    if reason:
        st.error(f"**The model cannot be used.** {md(reason)}\n\nYour story is kept; "
                 "fix the backend, then try again.", icon="🔌")  # fmt: skip
        st.button("🔌 Try the backend again", on_click=retry_backend, key="retry_backend")
    elif ws.error:
        st.error(f"**The model did not answer.** {md(ws.error)}\n\nYour story and the last "
                 "suggestions are kept; press *Suggest again* to retry.", icon="🔌")  # fmt: skip
    if ws.notice:
        st.warning(md(ws.notice), icon="⚠️")


# -- suggestions ----------------------------------------------------------------------------
def suggestions_ui(
    ws: session.Workspace, result: SearchResult, prefix_space: bool, shading: bool
) -> None:
    """Ranked suggestions: a probability bar, the text (editable, Enter), ➡️ to accept."""
    if not result.suggestions:
        st.info("No suggestions: the model ended the story here. Edit it, or lower the cutoff.")
        return
    total = sum(s.probability for s in result.suggestions) or 1.0
    best = max(s.probability for s in result.suggestions) / total
    st.caption("Bars: each suggestion's share of the listed suggestions' probability.")
    tag = f"{abs(hash((result.context_ids, result.stats.seconds)))}"
    for i, suggestion in enumerate(result.suggestions):
        suggestion_row(ws, suggestion, f"sg_{tag}_{i}", suggestion.probability / total, best,
                       prefix_space, shading)  # fmt: skip


def suggestion_row(ws, suggestion: Suggestion, key, share, best, prefix_space, shading) -> None:
    bar, text, go = st.columns([1.2, 6, 1.1], vertical_alignment="bottom")
    bar.progress(min(share / best, 1.0) if best else 0.0, text=f"{share:.1%}")
    with text:
        if shading:
            st.markdown(suggestion_html(suggestion, strip_space=prefix_space),
                        unsafe_allow_html=True)  # fmt: skip
        shown = display_text(suggestion) if prefix_space else suggestion.text
        st.text_input("Suggestion", value=shown, key=key, label_visibility="collapsed")
    go.button("➡️", key=f"{key}_go", help="Accept into the story", width="stretch",
              on_click=accept, args=(ws, suggestion, key, prefix_space))  # fmt: skip


def accept(ws: session.Workspace, suggestion: Suggestion, key: str, prefix_space: bool) -> None:
    """Without prefix space the box holds the whole text, its leading space included."""
    ws.accept(suggestion, st.session_state.get(key), prefix_space=prefix_space)


# -- the graph ------------------------------------------------------------------------------
def graph_ui(ws: session.Workspace, result: SearchResult) -> None:
    graph = page_graph(ws, result)
    st.graphviz_chart(graph, width="stretch")
    dot_button, png_button = st.columns(2)
    dot_button.download_button("DOT", graph.source, "lloom.dot", "text/vnd.graphviz",
                               key="graph_dot", on_click="ignore")  # fmt: skip
    if has_dot():
        png_button.download_button("PNG", lambda: graph.pipe(format="png"), "lloom.png",
                                   "image/png", key="graph_png", on_click="ignore")  # fmt: skip
    else:
        png_button.caption("PNG needs graphviz's `dot` (apt-get install graphviz).")


def page_graph(ws: session.Workspace, result: SearchResult):
    best = result.suggestions[0].token_ids if result.suggestions else None
    return render_tree(result.tree, best=best, story_tail=ws.story.text[-60:])


def has_dot() -> bool:
    return shutil.which("dot") is not None


# -- the sidebar ----------------------------------------------------------------------------
def sidebar_ui(settings: Settings, ws: session.Workspace, backend: Backend | None) -> None:
    with st.sidebar:
        if ws.started:
            story_info_ui(ws)
        backend_info_ui(settings, backend)
        if ws.started:
            stats_ui(ws)
            downloads_ui(ws)
        import_ui(ws, backend)
        where = ws.book.location
        st.caption(f"Stories are saved in {code(where)}" if where else "Stories: in memory only")


def story_info_ui(ws: session.Workspace) -> None:
    st.subheader("Story")
    key = f"title_{ws.story_id}"
    st.text_input("Title", value=ws.title, key=key, on_change=rename, args=(ws, key))
    st.button("📚 All stories · new story", key="close", on_click=ws.close)


def rename(ws: session.Workspace, key: str) -> None:
    ws.rename(st.session_state[key])


def import_ui(ws: session.Workspace, backend: Backend | None) -> None:
    """Open an exported session (.json) as a new story."""
    key = f"import_{st.session_state.get('imports', 0)}"
    model = backend.model_name if backend else None
    st.file_uploader("Import a session (.json)", type=["json"], key=key,
                     on_change=import_file, args=(ws, key, model))  # fmt: skip
    problem = st.session_state.get("import_error")
    if problem:
        st.error(f"**That file cannot be imported.** {md(problem)}", icon="📄")


def import_file(ws: session.Workspace, key: str, model: str | None) -> None:
    upload = st.session_state.get(key)
    if upload is None:
        return
    problem = ws.import_session(upload.getvalue(), model=model)
    st.session_state.import_error = problem
    if problem is None:
        st.session_state.imports = st.session_state.get("imports", 0) + 1  # a fresh uploader


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
    note = getattr(backend, "note", None)
    if note:
        st.info(md(note))


def stats_ui(ws: session.Workspace) -> None:
    result = ws.last_result()
    if result is None:
        return
    s = result.stats
    st.subheader("Last search")
    st.markdown(
        f"- forward calls: **{s.forward_calls}**\n- model tokens: **{s.model_tokens}**\n"
        f"- prefill tokens: **{s.prefill_tokens}**\n- seconds: **{s.seconds:.2f}**"
    )


def downloads_ui(ws: session.Workspace) -> None:
    st.subheader("Downloads")
    text, title = ws.story.text, ws.title
    one, two = st.columns(2)
    download(one, "Story .txt", text, "story.txt", "text/plain")
    download(two, "Story .md", lambda: f"# {title}\n\n{text}\n", "story.md", "text/markdown")
    download(one, "Session .json", lambda: session.export_session(ws), "lloom-session.json",
             "application/json")  # fmt: skip
    result = ws.last_result()
    if result is None:
        return
    tree = lambda: json.dumps(result.tree.to_dict(), ensure_ascii=False, indent=1, allow_nan=False)  # noqa: E731
    download(two, "Tree .json", tree, "tree.json", "application/json")
    graph = page_graph(ws, result)
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


# -- small helpers --------------------------------------------------------------------------
def md(text: str) -> str:
    """Text shown literally inside Streamlit markdown (messages, names, URLs)."""
    escaped = "".join("\\" + ch if ch in MARKDOWN else ch for ch in text)
    lines = ("\\" + line if line[:1] in LINE_START else line for line in escaped.split("\n"))
    return "  \n".join(lines)


def code(text: str) -> str:
    """A path or URL as inline code (shown as it is), or escaped where it holds a backtick."""
    return f"`{text}`" if "`" not in text and "\n" not in text else md(text)


MARKDOWN = set("\\`*_[]<>$~|")
LINE_START = set("#-+=")


def shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


if __name__ == "__main__":
    main()
