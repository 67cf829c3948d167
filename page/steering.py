"""The page's steering panels: "Memory & notes" and "What the model sees".

`steering_ui` edits the story's memory, author's note and depth, and its lorebook (add,
edit, switch off, delete, import a SillyTavern world-info file); every change is saved
with the story at once (`Workspace.set_settings`). `context_ui` shows the context the
search at this node uses: its text with each part marked, its tokens against the
model's window, how much of the story's start was left out, and the entries that fired.
Widgets only: the values are `weave.story.steering`'s, the context `Offers.context`'s.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from backends import Backend, BackendError
from page.state import tab
from weave.desk.session import Workspace
from weave.story.lorebook import parse_lorebook
from weave.story.steering import (
    MAX_ENTRY_CHARS,
    MAX_KEY_CHARS,
    MAX_KEYS,
    MAX_MEMORY_CHARS,
    MAX_NOTE_CHARS,
    MAX_NOTE_DEPTH,
    LoreEntry,
    Steering,
)
from weave.view.present import md


def steering_ui(ws: Workspace) -> None:
    """Memory, note and lorebook, saved with the story as they change."""
    if tab().steering.seen != ws.settings.steering:  # another tab's, or another story's
        _bump(ws)
    steering, rev = ws.settings.steering, _rev(ws)
    memory = st.text_area(
        "Memory", steering.memory, max_chars=MAX_MEMORY_CHARS, key=f"st_memory_{rev}",
        help="Always at the top of what the model reads: who the heroine is, the setting, "
        "the tone.",
    )  # fmt: skip
    note = st.text_area(
        "Author's note", steering.note, max_chars=MAX_NOTE_CHARS, key=f"st_note_{rev}",
        height=68, help="A short instruction the model reads a few lines before the end, "
        'where it weighs most ("[Keep it dark.]").',
    )  # fmt: skip
    depth = st.number_input(
        "Note depth (lines from the end)", 1, MAX_NOTE_DEPTH, steering.note_depth,
        key=f"st_depth_{rev}", help="The note goes before the story's last this many lines "
        "(blank lines do not count).",
    )  # fmt: skip
    lore = tuple(_entry_ui(ws, entry, i, rev) for i, entry in enumerate(steering.lore))
    if None not in lore:  # an entry past a cap said so; the saved steering stays
        _save(ws, replace(steering, memory=memory, note=note, note_depth=int(depth), lore=lore))
    _add_ui(ws, rev)
    _import_ui(ws, rev)


def _entry_ui(ws: Workspace, entry: LoreEntry, i: int, rev: str) -> LoreEntry | None:
    """One lorebook entry's editor; returns the entry as the widgets now hold it, None
    where its keys pass a cap (said in one line)."""
    mark = "" if entry.enabled else " (off)"
    with st.expander(f"📖 {md(entry.label)}{mark}"):
        keys = st.text_input("Keys (comma-separated)", ", ".join(entry.keys),
                             key=f"st_keys_{rev}_{i}")  # fmt: skip
        text = st.text_area("Text", entry.text, max_chars=MAX_ENTRY_CHARS,
                            key=f"st_text_{rev}_{i}")  # fmt: skip
        on, delete = st.columns([3, 1], vertical_alignment="center")
        enabled = on.toggle("On", entry.enabled, key=f"st_on_{rev}_{i}")
        delete.button("🗑️ Delete", key=f"st_delete_{rev}_{i}", on_click=_delete, args=(ws, i))
        problem = _keys_problem(_keys(keys))
        if problem:
            st.error(f"**Not saved.** {problem}", icon="📖")
            return None
    return replace(entry, keys=_keys(keys), text=text, enabled=enabled)


def _add_ui(ws: Workspace, rev: str) -> None:
    with st.form(f"st_add_{rev}", clear_on_submit=True, border=False):
        st.caption("New lorebook entry: its text goes in while a key is in the story's end.")
        keys = st.text_input("Keys (comma-separated)", key=f"st_new_keys_{rev}")
        text = st.text_area("Text", max_chars=MAX_ENTRY_CHARS, key=f"st_new_text_{rev}")
        if st.form_submit_button("➕ Add entry") and (keys.strip() or text.strip()):
            problem = _keys_problem(_keys(keys))
            if problem:
                st.error(f"**Not added.** {problem}", icon="📖")
                return
            steering = ws.settings.steering
            _save(ws, replace(steering, lore=(*steering.lore, LoreEntry(_keys(keys), text))))
            _bump(ws)
            st.rerun()


def _import_ui(ws: Workspace, rev: str) -> None:
    key = f"st_import_{rev}"
    st.file_uploader("Import a lorebook (SillyTavern world info, .json)", type=["json"],
                     key=key, on_change=_import, args=(ws, key))  # fmt: skip
    problem = tab().steering.import_error
    if problem:
        st.error(f"**That lorebook cannot be imported.** {md(problem)}", icon="📖")


def _import(ws: Workspace, key: str) -> None:
    def with_file(data: bytes) -> Steering:  # past a cap on the entries: a ValueError
        return replace(
            ws.settings.steering, lore=(*ws.settings.steering.lore, *parse_lorebook(data))
        )

    steering = tab().steering.uploaded(key, with_file)
    if steering is not None:
        _save(ws, steering)
        _bump(ws)


def _delete(ws: Workspace, i: int) -> None:
    lore = ws.settings.steering.lore
    _save(ws, replace(ws.settings.steering, lore=lore[:i] + lore[i + 1 :]))
    _bump(ws)


def _save(ws: Workspace, steering: Steering) -> None:
    if steering != ws.settings.steering:
        ws.set_settings(replace(ws.settings, steering=steering))
    tab().steering.seen = ws.settings.steering  # this tab's widgets hold it


def _keys(text: str) -> tuple[str, ...]:
    return tuple(k.strip() for k in text.split(",") if k.strip())


def _keys_problem(keys: tuple[str, ...]) -> str | None:
    """The one line that says which cap `keys` pass, if any (`weave.story.steering`'s caps)."""
    if len(keys) > MAX_KEYS:
        return f"An entry holds at most {MAX_KEYS} keys; this one has {len(keys)}."
    long = next((k for k in keys if len(k) > MAX_KEY_CHARS), None)
    if long is not None:
        return (f"A key holds at most {MAX_KEY_CHARS} characters; "
                f"“{md(long[:20])}…” has {len(long):,}.")  # fmt: skip
    return None


def _rev(ws: Workspace) -> str:
    """A name for this story's steering widgets, new after an entry is added, deleted or
    imported (entries' widgets are named by place), and when the steering changed
    elsewhere (another tab, another story), so that they show it instead of their own."""
    return f"{ws.story_id}_{tab().steering.rev}"


def _bump(ws: Workspace) -> None:
    tab().steering.rev += 1


def context_ui(ws: Workspace, backend: Backend | None, room: int) -> None:
    """What the model reads for a search here (`room`: the search's depth), parts marked,
    in a popover; beside it, how much of the story's start was left out, if any."""
    if backend is None or not ws.text:
        return
    try:
        context = ws.offers.context(backend, ws.spot, room=room)
    except (BackendError, ValueError) as e:
        st.error(f"**The context cannot be built.** {md(str(e))}", icon="📝")
        return
    with st.popover("👁️ What the model sees", width="stretch"):
        st.caption(f"{context.token_count:,} tokens{_of_window(backend)}.")
        fired = ", ".join(md(entry.label) for entry in context.fired)
        st.caption(f"Lorebook entries fired: {fired}." if fired else "No lorebook entry fired.")
        st.code(context.marked_text(), language=None, wrap_lines=True)
    if context.left_out:
        st.caption(f"✂️ The story's first {context.left_out:,} tokens are left out: "
                   f"{_why_cut(backend)}.")  # fmt: skip


def _of_window(backend: Backend) -> str:
    window, length = backend.read_window, backend.context_length
    if not window:
        return ""
    if length and window < length:
        return f" of the {window:,} the model reads here (its window: {length:,})"
    return f" of the model's {window:,}"


def _why_cut(backend: Backend) -> str:
    """Why a story's start is left out: the model's window, or the read window."""
    window, length = backend.read_window, backend.context_length
    if window and length and window < length:
        return (f"the model reads at most the story's last {window:,} tokens here, so that "
                "it opens in seconds ([mlx] read_window in config.toml)")  # fmt: skip
    return "the whole does not fit the model's window"
