"""LLooM's page: weave a story with a language model, a few tokens at a time.

`streamlit run lloom.py`. The page lays out widgets and calls the engine: the story and
its history live in a `weave.session.Workspace` (one per browser session), the search
is `weave.search.expand`, the graph is `weave.render`. The model is loaded once per
process (`shared_backend`) and shared by every session. No algorithm lives here.
"""

from __future__ import annotations

import shutil
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
CONFIG_KEYS = {  # widget key -> SearchParams field
    "cfg_auto_stop": "auto_stop",
    "cfg_max_depth": "max_depth",
    "cfg_max_suggestions": "max_suggestions",
    "cfg_cutoff": "cutoff",
    "cfg_multiplier": "multiplier",
    "cfg_split_limit": "split_limit",
    "cfg_score": "score",
}


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


# -- the page -------------------------------------------------------------------------------
def main() -> None:
    st.set_page_config(page_title="LLooM", page_icon="🧶", layout="wide")
    settings = settings_or_stop()
    ws = workspace()
    backend = backend_or_none()
    if ws.started:
        story_page(settings, ws, backend)
    else:
        start_ui(settings, ws)
        error_ui(ws)
    sidebar_ui(settings, ws, backend)  # last: it shows the search this run made


def story_page(settings: Settings, ws: session.Workspace, backend: Backend | None) -> None:
    params, prefix_space, shading = config_ui(settings, backend)
    story_ui(ws)
    result = search_ui(ws, backend, params, prefix_space)
    error_ui(ws)
    if result is None:
        return
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


def workspace() -> session.Workspace:
    """This browser session's workspace, made once."""
    if "ws" not in st.session_state:
        st.session_state.ws = session.Workspace()
    return st.session_state.ws


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


# -- configuration --------------------------------------------------------------------------
def config_ui(settings: Settings, backend: Backend | None) -> tuple[SearchParams, bool, bool]:
    """The Configuration expander; returns the search parameters and the display choices."""
    defaults = settings.search_for(backend.model_name) if backend else settings.search
    for key, field in CONFIG_KEYS.items():
        st.session_state.setdefault(key, getattr(defaults, field))
    with st.expander("Configuration"):
        stop, split, show = st.columns(3)
        with stop:
            stop_ui()
        with split:
            split_ui()
        with show:
            prefix_space, shading = display_ui()
    values = {field: st.session_state[key] for key, field in CONFIG_KEYS.items()}
    return replace(defaults, **values), prefix_space, shading


def stop_ui() -> None:
    st.markdown("**Stop conditions**")
    st.checkbox("Auto-Stop", key="cfg_auto_stop", help="End a beam at '.' or ','")
    st.slider("Max Depth", 1, 50, key="cfg_max_depth", help="Tokens per suggestion at most")
    st.slider("Max Suggestions", 5, 100, key="cfg_max_suggestions")


def split_ui() -> None:
    st.markdown("**Split conditions**")
    st.slider(
        "Cutoff", 0.0, 1.0, step=0.01, key="cfg_cutoff",
        help="The least probability a token needs to start a new beam",
    )  # fmt: skip
    st.slider(
        "Multiplier", 0.0, 2.0, step=0.05, key="cfg_multiplier",
        help="Cutoff scale per token (below 1: split more as beams grow)",
    )  # fmt: skip
    st.slider(
        "Split Limit", 0, 10, key="cfg_split_limit", help="Children per beam at most (0: no limit)"
    )


def display_ui() -> tuple[bool, bool]:
    """Scoring, prefix space and token shading; returns (prefix_space, shading)."""
    st.markdown("**Ranking and display**")
    st.radio(
        "Scoring", ["joint", "lloom"], key="cfg_score", horizontal=True,
        help="joint: sum of log-probabilities; lloom: v0.3's sum of probabilities",
    )  # fmt: skip
    prefix_space = st.checkbox(
        "Prefix space", value=True, key="cfg_prefix_space",
        help="Show suggestions without their leading space; put it back when accepting",
    )  # fmt: skip
    shading = st.checkbox(
        "Token probabilities", value=True, key="cfg_shading",
        help="Shade each token of a suggestion by its probability",
    )  # fmt: skip
    return prefix_space, shading


# -- the story ------------------------------------------------------------------------------
def story_ui(ws: session.Workspace) -> None:
    """The editable story (Ctrl+Enter applies) and its buttons."""
    if st.session_state.get("story_revision") != ws.revision:
        st.session_state.story_text = ws.story.text
        st.session_state.story_revision = ws.revision
    st.text_area("Story", key="story_text", height=220, on_change=apply_edit, args=(ws,),
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
        with st.status("Weaving…", expanded=False) as status:
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


def live(p: Progress) -> str:
    latest = f" · latest: “{shorten(p.latest, 60)}”" if p.latest else ""
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
    bar, text, go = st.columns([1.2, 6, 0.9], vertical_alignment="bottom")
    bar.progress(min(share / best, 1.0) if best else 0.0, text=f"{share:.1%}")
    with text:
        if shading:
            st.markdown(suggestion_html(suggestion, strip_space=prefix_space),
                        unsafe_allow_html=True)  # fmt: skip
        shown = display_text(suggestion) if prefix_space else suggestion.text
        st.text_input("Suggestion", value=shown, key=key, label_visibility="collapsed")
    go.button("➡️", key=f"{key}_go", help="Accept into the story",
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
        backend_info_ui(settings, backend)
        if ws.started:
            stats_ui(ws)
            downloads_ui(ws)


def backend_info_ui(settings: Settings, backend: Backend | None) -> None:
    st.subheader("Model")
    choice = choose_backend(settings)
    if backend is None:
        st.markdown(f"**{choice.name}**: not available")
    else:
        st.markdown(f"**{md(backend.model_name)}** on {backend.name}")
        if backend.url:
            st.caption(f"Server: {md(backend.url)}")
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
    text = ws.story.text
    one, two = st.columns(2)
    one.download_button("Story .txt", text, "story.txt", "text/plain", key="dl_txt",
                        on_click="ignore")  # fmt: skip
    two.download_button("Story .md", text, "story.md", "text/markdown", key="dl_md",
                        on_click="ignore")  # fmt: skip
    result = ws.last_result()
    if result is None:
        return
    import json

    tree = json.dumps(result.tree.to_dict(), ensure_ascii=False, indent=1)
    one.download_button("Tree .json", tree, "tree.json", "application/json", key="dl_tree",
                        on_click="ignore")  # fmt: skip
    graph = page_graph(ws, result)
    two.download_button("Graph .dot", graph.source, "lloom.dot", "text/vnd.graphviz",
                        key="dl_dot", on_click="ignore")  # fmt: skip
    if has_dot():
        one.download_button("Graph .png", lambda: graph.pipe(format="png"), "lloom.png",
                            "image/png", key="dl_png", on_click="ignore")  # fmt: skip
        two.download_button("Graph .svg", lambda: graph.pipe(format="svg"), "lloom.svg",
                            "image/svg+xml", key="dl_svg", on_click="ignore")  # fmt: skip


# -- small helpers --------------------------------------------------------------------------
def md(text: str) -> str:
    """Text shown literally inside Streamlit markdown (messages, names, URLs)."""
    escaped = "".join("\\" + ch if ch in MARKDOWN else ch for ch in text)
    lines = ("\\" + line if line[:1] in LINE_START else line for line in escaped.split("\n"))
    return "  \n".join(lines)


MARKDOWN = set("\\`*_[]<>$~|")
LINE_START = set("#-+=")


def shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


if __name__ == "__main__":
    main()
