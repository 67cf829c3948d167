"""Token ids that are not the model's (issue 27): every id that reaches a backend is checked
against its vocabulary first, and a loom's stored ids are only a cache of its text.

On the real embedded model (MLX): an id past the embedding table read garbage rows (49,152,
60,000), crashed the process (1,000,000, 2**40) or raised `std::bad_cast` (10**30). Each
entry point that takes ids now refuses them with one `BackendError` naming the id. A
story whose stored ids are not valid for the model in use is tokenized from its text
instead, so it opens and searches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backends import BackendError
from backends.base import invalid_id
from tests.hostile_servers import VOCAB_SIZE as HOSTILE_VOCAB
from tests.hostile_servers import hostile_server
from tests.test_hostile import backend_for
from weave.desk.session import Workspace
from weave.interop.files import import_file
from weave.loom.store import LoomStore
from weave.search.params import SearchParams
from weave.search.ramify import RamifyParams

ROOT = Path(__file__).resolve().parent.parent
MODEL = "SmolLM2-135M-Instruct"  # the display name of the `mlx_backend` fixture
OUTSIDE = [49_152, 60_000, 1_000_000, 2**40, 10**30, -1, 1.5, True, "7", None]


def test_invalid_id_finds_the_first_id_outside_the_vocabulary():
    assert invalid_id([0, 5, 9], 10) is None and invalid_id([], 10) is None
    assert invalid_id([0, 10, -1], 10) == 1 and invalid_id([0, None], 10) == 1
    assert invalid_id([3, -1], None) == 1 and invalid_id([10**30], None) is None
    assert invalid_id([1, True], 10) == 1 and invalid_id([2.0], 10) == 0


def test_the_mlx_backend_knows_its_vocabulary(mlx_backend):
    assert mlx_backend.vocab_size == 49_152
    assert mlx_backend.tokenize("Once upon a time,")  # all inside it
    assert max(mlx_backend.tokenize("Once upon a time, 🐉 ü")) < mlx_backend.vocab_size


@pytest.mark.parametrize("bad", OUTSIDE, ids=repr)
def test_every_mlx_entry_point_refuses_an_id_outside_the_vocabulary(mlx_backend, bad):
    story = mlx_backend.tokenize("Once upon a time,")
    calls = {
        "top_logprobs": lambda ids: mlx_backend.top_logprobs([story, ids], 5),
        "read_ahead": lambda ids: mlx_backend.read_ahead(ids * 600, 5, lambda done, n: None),
        "alternatives": lambda ids: mlx_backend.alternatives(ids, 5),
        "sample": lambda ids: mlx_backend.sample(
            ids, n=2, temperature=1.0, min_p=0.0, max_tokens=3
        ),
        "detokenize": mlx_backend.detokenize,
    }
    for name, call in calls.items():
        with pytest.raises(BackendError, match=r"token id .* is not one of the model's") as e:
            call([*story, bad])
        assert e.value.backend == "mlx" and repr(bad)[:20] in str(e.value), name
    # the backend still answers afterwards
    assert len(mlx_backend.top_logprobs([story], 3)[0]) == 3


def test_the_last_id_of_the_vocabulary_is_taken(mlx_backend):
    story = mlx_backend.tokenize("Once upon a time,")
    assert len(mlx_backend.top_logprobs([story + [mlx_backend.vocab_size - 1]], 3)[0]) == 3


def oov_loom(ids: list, *, model: str = MODEL) -> dict:
    """A loom file whose second piece holds `ids`, claimed to be `model`'s ids for its text."""

    def node(id, parent, text, token_ids=None, owner=None):
        return {"id": id, "parent": parent, "text": text, "kind": "accepted",
                "token_ids": token_ids, "model": owner, "params": None, "score": None,
                "created": 1.0}  # fmt: skip

    return {"format": "lloom-loom", "version": 1, "id": "x", "title": None, "created": 1.0,
            "updated": 1.0, "settings": {}, "root": "r", "cursor": "b",
            "checkouts": {"r": "a", "a": "b"}, "bookmarks": [], "suggestions": {},
            "nodes": [node("r", None, ""), node("a", "r", "Once upon a time,"),
                      node("b", "a", " there was", ids, model)]}  # fmt: skip


@pytest.mark.parametrize("bad", [1_000_000, 49_152, 2**31 - 1])  # larger: refused at import
def test_a_story_holding_ids_outside_the_vocabulary_opens_and_searches(tmp_path, mlx_backend, bad):
    store = LoomStore(tmp_path)
    story_id = import_file(store, json.dumps(oov_loom([bad, 5])))[0]
    ws = Workspace(store)
    assert ws.open(story_id, "b") and ws.text == "Once upon a time, there was"
    ids = ws.offers.contexts.ids.path_ids(mlx_backend, ws.loom, "b")
    assert ids == tuple(mlx_backend.tokenize("Once upon a time, there was"))
    offer = ws.offers.suggest(mlx_backend, ws.spot, SearchParams(max_depth=3, max_suggestions=5))
    assert ws.offers.error is None and offer is not None and offer.result.suggestions
    draw = ws.offers.sample(mlx_backend, ws.spot, RamifyParams(n=2, max_tokens=3))
    assert ws.offers.error is None and draw is not None and len(draw.result.samples) == 2


def test_valid_stored_ids_are_still_used_as_searched(tmp_path, mlx_backend):
    """Ids an accepted beam brought stay the path's ids (their KV is cached), even where
    tokenizing the text would give others."""
    store = LoomStore(tmp_path)
    beam = mlx_backend.tokenize(" the") + mlx_backend.tokenize("re")  # not how " there" reads
    story_id = import_file(store, json.dumps(oov_loom(beam)))[0]
    ws = Workspace(store)
    assert ws.open(story_id, "b")
    assert ws.offers.contexts.ids.path_ids(mlx_backend, ws.loom, "b")[-len(beam) :] == tuple(beam)


IMPORT_AND_OPEN = """
import sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(sys.argv[1], default_timeout=120)
at.query_params["story"], at.query_params["node"] = sys.argv[2], "b"
at.run()
assert not at.exception, at.exception
print(at.text_area(key="story_text").value)
"""


@pytest.mark.slow
def test_an_imported_loom_with_an_id_outside_the_vocabulary_opens_in_a_fresh_process(tmp_path):
    """The crash of issue 27 as a writer met it (`loom import`, then the story's URL on the
    page), in a process of its own: it died with SIGSEGV before the fix."""
    env = dict(os.environ, LLOOM_DATA_DIR=str(tmp_path))
    loom = tmp_path / "oov.json"
    loom.write_text(json.dumps(oov_loom([1_000_000])))
    run = [sys.executable, "-m", "weave", "loom", "import", str(loom)]
    imported = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
    story_id = imported.stdout.split()[-1]
    page = [sys.executable, "-c", IMPORT_AND_OPEN, str(ROOT / "lloom.py"), story_id]
    opened = subprocess.run(page, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert opened.returncode == 0, opened.stderr[-2000:]
    assert opened.stdout.strip().endswith("Once upon a time, there was")


@pytest.mark.slow
def test_the_llamacpp_backend_refuses_ids_outside_its_vocabulary(llama_url):
    from backends.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend(llama_url)
    try:
        assert backend.vocab_size == 49_152  # from the server's model
        story = backend.tokenize("Once upon a time,")
        for call in (
            lambda ids: backend.top_logprobs([story, ids], 3),
            lambda ids: backend.alternatives(ids, 3),
            lambda ids: backend.sample(ids, n=1, temperature=1.0, min_p=0.0, max_tokens=2),
            backend.detokenize,
        ):
            with pytest.raises(BackendError, match=r"token id 49152 is not one of the model's"):
                call([*story, 49_152])
        assert len(backend.top_logprobs([story], 3)[0]) == 3
    finally:
        backend.close()


REMOTE_OUTSIDE = [-1, -(2**40), 1.5, True, "7", None]  # ints past a vocabulary: below


@pytest.mark.parametrize("flavour", ["llamacpp", "vllm", "openai"])
@pytest.mark.parametrize("bad", REMOTE_OUTSIDE, ids=repr)
def test_every_remote_entry_point_refuses_an_id_that_is_not_one_before_a_request(flavour, bad):
    """vLLM and OpenAI do not say their vocabulary's size, yet nothing that is not a token
    id is sent (vLLM took -1 and "7" and answered as if they were ids; OpenAI read -1 as
    its last interned piece). The server here would answer anything: the error is ours."""
    with hostile_server(flavour) as url:
        backend = backend_for(flavour, url)
        try:
            story = backend.tokenize("Once upon a time,")
            calls = {
                "top_logprobs": lambda ids: backend.top_logprobs([story, ids], 3),
                "greedy_chains": lambda ids: backend.greedy_chains([ids], 3, [2]),
                "alternatives": lambda ids: backend.alternatives(ids, 3),
                "sample": lambda ids: backend.sample(
                    ids, n=2, temperature=1.0, min_p=0.0, max_tokens=2
                ),
                "detokenize": backend.detokenize,
            }
            for name, call in calls.items():
                try:
                    answered = call([*story, bad])
                except BackendError as e:
                    message = str(e)
                else:
                    assert answered is None and name == "alternatives", name  # cannot: fine
                    continue
                assert message.startswith(f"{flavour} at {url}"), (name, message)
                assert "is not one of the model's token ids" in message, (name, message)
            assert backend.top_logprobs([story], 3)[0]  # and it answers after
        finally:
            backend.close()


@pytest.mark.parametrize("flavour", ["llamacpp", "vllm"])
def test_a_server_backend_refuses_an_id_past_the_vocabulary_its_server_names(flavour):
    """llama.cpp names its vocabulary's size in /v1/models; vLLM only in refusing an id
    past it, which its backend asks at start."""
    with hostile_server(flavour) as url:
        backend = backend_for(flavour, url)
        try:
            assert backend.vocab_size == HOSTILE_VOCAB
            with pytest.raises(BackendError, match=r"token id 100 is not one of the model's"):
                backend.top_logprobs([[5, HOSTILE_VOCAB]], 3)
        finally:
            backend.close()


def test_openai_ids_name_the_same_bytes_in_every_instance_and_no_others(tmp_path):
    """OpenAI's ids are its own (interned token bytes); a loom keeps them. A fresh
    instance (a restart) knows the same bytes by the same id, and refuses an id it has
    not met (it read past its table, or another piece, before), so a stored story whose
    ids it does not know is tokenized from its text, and the text sent is the story's."""
    with hostile_server("openai") as url:
        first, again = backend_for("openai", url), backend_for("openai", url)
        try:
            piece = first.tokenize(" there was")
            assert again.tokenize(" there was") == piece and again.detokenize(piece) == " there was"
            store = LoomStore(tmp_path)
            loom = oov_loom(first.tokenize(" once more"), model="hostile")
            ws = Workspace(store)
            assert ws.open(import_file(store, json.dumps(loom))[0], "b")
            fresh = backend_for("openai", url)
            with pytest.raises(BackendError, match="not one of the token texts met here"):
                fresh.detokenize(loom["nodes"][-1]["token_ids"])
            ids = ws.offers.contexts.ids.path_ids(fresh, ws.loom, "b")
            assert fresh.detokenize(list(ids)) == "Once upon a time, there was"
            offer = ws.offers.suggest(fresh, ws.spot, SearchParams(max_depth=2))
            # searched from the last boundary, the story's own last word healed (the stub
            # server's candidates need not spell it, so there may be no suggestion)
            assert ws.offers.error is None and offer is not None and offer.result.typed == " was"
        finally:
            first.close()
            again.close()


@pytest.mark.slow
def test_the_vllm_backend_learns_its_servers_vocabulary_and_refuses_ids_outside_it(vllm_url):
    """vLLM names its vocabulary's size only in refusing an id past it: the backend
    learns it at start, and refuses what is not an id, or an id past it, before a
    request, each as one error naming the server."""
    from backends.vllm import VLLMBackend

    backend = VLLMBackend(vllm_url)
    try:
        assert backend.vocab_size == 49_152  # SmolLM2's
        story = backend.tokenize("Once upon a time,")
        with pytest.raises(BackendError, match=r"token id -1 is not one of the model's") as e:
            backend.top_logprobs([[*story, -1]], 3)
        assert str(e.value).startswith(f"vllm at {vllm_url}")
        for call in (
            lambda ids: backend.top_logprobs([story, ids], 3),
            lambda ids: backend.sample(ids, n=1, temperature=1.0, min_p=0.0, max_tokens=2),
        ):
            with pytest.raises(BackendError, match=r"49152 is not one of .* \(0 to 49,151\)") as e:
                call([*story, 49_152])
            assert str(e.value).startswith(f"vllm at {vllm_url}") and "\n" not in str(e.value)
        assert len(backend.top_logprobs([story], 3)[0]) == 3
    finally:
        backend.close()
