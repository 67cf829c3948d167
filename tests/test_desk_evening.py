"""An evening at the desk (issue 34) through AppTest on the fake model: messages that go
away (item 7: an import says once what it did) and switching models says itself (item 8:
the sidebar's picker shows with one model too, and says how to add another)."""

from __future__ import annotations

import streamlit as st
from huggingface_hub import constants

from tests.test_page import app, started, story


def test_the_picker_shows_with_one_model_and_says_how_to_add_one(fake, tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    st.cache_data.clear()  # the models found are read once a minute
    at = started()
    [box] = [s for s in at.sidebar.selectbox if s.label == "Switch model"]
    assert box.options == ["SmolLM2-135M-Instruct (embedded)"] and box.disabled
    assert any("Only this model is here" in c.value and "LLOOM_MODEL" in c.value
               for c in at.sidebar.caption)  # fmt: skip


def test_an_import_says_once_what_it_did(fake):
    at = app()
    at.file_uploader[0].set_value(("bad.json", b"not json", "application/json")).run()
    [error] = [e.value for e in at.error]
    assert error.count("cannot be imported") == 1 and "That file" not in error
    assert [t.value for t in at.toast] == [error]  # where the writer is looking, too
    at.button(key="start").click().run()  # the next story: the message has gone
    assert not [e for e in at.error if "cannot be imported" in e.value] and not at.toast
    exported = at.session_state["page"].ws.export()
    [uploader] = [u for u in at.file_uploader if u.key.startswith("import_")]
    uploader.set_value(("story.json", exported.encode(), "application/json")).run()
    assert not at.exception
    assert [t.value for t in at.toast] == ["Imported and opened “Once upon a time, (2)”."]
    assert story(at) == "Once upon a time,"
    at.button(key="bookmark").click().run()
    assert not at.toast  # said once
