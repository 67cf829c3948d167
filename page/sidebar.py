"""The writer's sidebar: finding a branch (`page.find`); the story's title, sharing,
bookmarks and downloads (`page.library`, `page.group`, `page.files`); importing; the model
in one line and, on MLX, the models here to switch to (`switch_model_ui`: every tab of
the server switches; the run loads it, under a spinner: `lloom.switch_now`); the
diagnostics folded in Details: how the backend was chosen, where its search defaults come
from, what this node's search and samples cost, the KV held, where the stories are kept.
Widgets only.
"""

from __future__ import annotations

import streamlit as st

from backends import Backend, Choice, choose_backend
from page import files, group, library
from page.find import find_ui
from page.server import login_configured, models_here, shared_backend
from page.state import tab
from weave.config import Settings
from weave.desk import session
from weave.desk.spot import Offer
from weave.search.beams import SearchStats
from weave.view import messages
from weave.view.present import code, md


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


def details_ui(
    settings: Settings,
    ws: session.Workspace,
    backend: Backend | None,
    offer: Offer | None,
    choice: Choice,
) -> None:
    """How the backend was chosen, what this node's search and samples cost, the KV held."""
    backend_info_ui(settings, backend, choice)
    if offer is not None:
        stats_ui("This node's search", offer.result.stats)
    draw = ws.offers.draw(ws.cursor) if ws.started else None
    if draw is not None:
        stats_ui("This node's samples", draw.result.stats)
    if backend is not None and backend.cache_bytes is not None:
        st.caption(
            f"KV fragment tree: {backend.cache_bytes / 2**20:,.1f} MiB held, "
            f"at most {backend.cache_cap_bytes / 2**20:,.0f} MiB"
        )
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
    st.selectbox(
        "Switch model",
        names,
        index=names.index(shared.model),
        key=key,
        format_func=labels.get,
        on_change=switch_model,
        args=(key,),
        help="The mlx-lm models found here: the settings' one, the embedded one "
        "and the local Hugging Face cache's. Every tab on this server switches; "
        "your stories stay as they are.",
        disabled=len(names) < 2,
    )
    if len(names) < 2:
        st.caption(
            "Only this model is here. To add one, name an mlx-lm folder or hub id in "
            "`[mlx] model` (config.toml) or `LLOOM_MODEL`, or download one into the "
            "Hugging Face cache."
        )
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
