"""Switching models says itself (issue 34, item 8): the sidebar's picker shows with one
model too, and says how to add another (AppTest, the fake model, an empty hub cache)."""

from __future__ import annotations

import streamlit as st
from huggingface_hub import constants

from tests.test_page import started


def test_the_picker_shows_with_one_model_and_says_how_to_add_one(fake, tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    st.cache_data.clear()  # the models found are read once a minute
    at = started()
    [box] = [s for s in at.sidebar.selectbox if s.label == "Switch model"]
    assert box.options == ["SmolLM2-135M-Instruct (embedded)"] and box.disabled
    assert any("Only this model is here" in c.value and "LLOOM_MODEL" in c.value
               for c in at.sidebar.caption)  # fmt: skip
