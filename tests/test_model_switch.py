"""The writer's own models on the page (issue 26): the mlx-lm models found on this machine
(`backends.mlx.catalog`), what the page says the model is, switching models without a
restart (`backends.shared`), and a story made under one tokenizer continued under another
whose vocabulary differs: its stored ids are never fed to the other model.

Real models throughout: a tiny llama with a 400-token tokenizer trained here, and the
embedded SmolLM2 (49,152 tokens)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from backends.mlx.backend import MLXBackend
from backends.mlx.catalog import EMBEDDED, cached_repos, local_models
from tests.mlx_models import small_tokenizer, tiny_model
from tests.test_mlx_loading import hub_cache
from weave.search.beams import expand

ROOT = Path(__file__).resolve().parent.parent
SMALL_VOCAB = 400
SMOL = "SmolLM2-135M-Instruct"


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """A tiny llama whose tokenizer has 400 tokens: every id it makes is also an id of the
    embedded model's, meaning another piece there."""
    root = tmp_path_factory.mktemp("small")
    text = (ROOT / "bench" / "long_story.txt").read_text()
    tokenizer = small_tokenizer(root / "tokenizer", text, vocab=SMALL_VOCAB)
    return tiny_model(root / "tiny-small-vocab", "llama", tokenizer_from=tokenizer,
                      vocab=SMALL_VOCAB)  # fmt: skip


# -- the models found here -------------------------------------------------------------------
def test_the_hub_cache_lists_only_models_the_backend_runs(tmp_path, small):
    cache = hub_cache(tmp_path / "hub", "lloom-tests/tiny", small)
    odd = hub_cache(tmp_path / "odd", "lloom-tests/mamba", small)
    (next((odd / "models--lloom-tests--mamba" / "snapshots").iterdir()) / "config.json"
     ).write_text('{"model_type": "mamba"}')  # fmt: skip  # mlx-lm has it; LLooM does not run it
    (odd / "models--lloom-tests--mamba").rename(cache / "models--lloom-tests--mamba")
    no_weights = hub_cache(tmp_path / "bare", "lloom-tests/bare", small)
    for weights in no_weights.rglob("*.safetensors"):
        weights.unlink()
    (no_weights / "models--lloom-tests--bare").rename(cache / "models--lloom-tests--bare")
    renamed = hub_cache(tmp_path / "renamed", "lloom-tests/mistral", small)
    config = next(renamed.rglob("config.json"))
    config.write_text(config.read_text().replace('"llama"', '"mistral"'))  # mlx-lm: llama's
    (renamed / "models--lloom-tests--mistral").rename(cache / "models--lloom-tests--mistral")
    (cache / "models--lloom-tests--no-ref" / "snapshots").mkdir(parents=True)
    assert cached_repos(cache) == ["lloom-tests/mistral", "lloom-tests/tiny"]
    assert cached_repos(tmp_path / "nowhere") == []

    found = local_models("lloom-tests/tiny", "SmolLM2", cache)
    assert [m.name for m in found] == ["lloom-tests/tiny", EMBEDDED, "lloom-tests/mistral"]
    # the settings' one first, and once
    assert found[0].label == "lloom-tests/tiny (settings)"
    assert found[1].label == "SmolLM2 (embedded)"
    assert [m.name for m in local_models("", "SmolLM2", cache)] == [
        EMBEDDED, "lloom-tests/mistral", "lloom-tests/tiny"
    ]  # fmt: skip


# -- the page --------------------------------------------------------------------------------
@pytest.fixture
def page_on_small(small, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LLOOM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LLOOM_MODEL", str(small))
    monkeypatch.setenv("LLOOM_LOOKAHEAD", "0")
    st.cache_resource.clear()
    yield small
    st.cache_resource.clear()


def started() -> AppTest:
    at = AppTest.from_file(str(ROOT / "lloom.py"), default_timeout=120).run()
    at.button(key="start").click().run()
    assert not at.exception
    return at


def picker(at: AppTest):
    [box] = [s for s in at.sidebar.selectbox if s.label == "Switch model"]
    return box


def the_offer(at: AppTest):
    ws = at.session_state["page"].ws
    return ws, ws.offers.latest(ws.cursor)


def test_the_page_says_what_runs_and_a_story_goes_on_under_another_tokenizer(
    page_on_small, embedded_model_path
):
    at = started()
    facts = " ".join(c.value for c in at.sidebar.caption)
    assert re.search(r"[\d,]+ parameters · float32 · [\d.]+ MiB", facts)
    ws, first = the_offer(at)
    small_name = first.result.stats.model
    assert small_name != SMOL
    at.button(key=f"sg_{first.tag}_p_0_go").click().run()  # take the top suggestion
    ws, _ = the_offer(at)
    taken = ws.loom.nodes[ws.cursor]
    assert taken.model == small_name and taken.token_ids  # ids of the 400-token vocabulary
    assert max(taken.token_ids) < SMALL_VOCAB  # valid ids for SmolLM2 too: only the model
    text = ws.text  # tells them apart

    box = picker(at)
    assert box.options[box.index].endswith("(settings)")
    box.set_value(EMBEDDED).run()  # switch: the story stays, the next search is SmolLM2's
    assert not at.exception
    assert SMOL in " ".join(m.value for m in at.sidebar.markdown)
    assert "135M parameters" in " ".join(c.value for c in at.sidebar.caption)
    ws = at.session_state["page"].ws
    assert ws.loom.text(taken.id) == text and taken.id in [n.id for n in ws.loom.path(ws.cursor)]
    [(params, shown)] = [(p, r) for (node, p, *_), r in ws.offers.results.items()
                         if node == taken.id and r.stats.model == SMOL]  # fmt: skip
    smol = MLXBackend(embedded_model_path, display_name=SMOL)  # searched anew there, by SmolLM2
    try:
        own = expand(smol, smol.tokenize(text), params)  # the text re-tokenized
        assert [s.token_ids for s in shown.suggestions] == [s.token_ids for s in own.suggestions]
        fed = expand(smol, list(taken.token_ids), params)  # what feeding the ids would give
        assert [s.token_ids for s in fed.suggestions] != [s.token_ids for s in own.suggestions]
    finally:
        smol.close()

    box = picker(at)  # and back: the story as it was
    box.set_value(str(page_on_small)).run()
    assert not at.exception and ws.loom.text(taken.id) == text
    assert small_name in " ".join(m.value for m in at.sidebar.markdown)
    assert "parameters · float32" in " ".join(c.value for c in at.sidebar.caption)


def test_a_model_that_cannot_load_leaves_the_one_in_use(page_on_small, tmp_path):
    at = started()
    ws, before = the_offer(at)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "llama", "hidden_size": "big"}')
    at.session_state["page"].switch_to = str(broken)  # as picking it would ask
    at.run()
    assert not at.exception
    errors = " ".join(e.value for e in at.sidebar.error)
    assert "That model cannot be used" in errors and "is 'big', not a number" in errors
    at.button(key="again").click().run()  # the small model still answers
    ws, again = the_offer(at)
    assert again is not None and again.result.suggestions


def test_a_quantized_model_over_the_budget_says_on_the_page_that_it_runs_slowly(
    tmp_path, monkeypatch, embedded_model_path
):
    folder = tiny_model(tmp_path / "tiny-4bit", "llama", tokenizer_from=embedded_model_path,
                        bits=4)  # fmt: skip
    settings = tmp_path / "config.toml"
    settings.write_text("[mlx]\ndequantize_mb = 0\n")
    monkeypatch.setenv("LLOOM_CONFIG", str(settings))
    monkeypatch.setenv("LLOOM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LLOOM_MODEL", str(folder))
    st.cache_resource.clear()
    try:
        at = AppTest.from_file(str(ROOT / "lloom.py"), default_timeout=120).run()
        assert not at.exception
        said = " ".join(i.value for i in at.sidebar.info)
        assert "4-bit weights kept" in said and "dequantize\\_mb = 0" in said
        assert " parameters · 4-bit · " in " ".join(c.value for c in at.sidebar.caption)
    finally:
        st.cache_resource.clear()
