"""The llama.cpp backend against a real llama-server on the embedded GGUF."""

from __future__ import annotations

import re
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest

from backends.errors import BackendError
from backends.llamacpp import LlamaCppBackend
from tests.http_stubs import serving
from tests.servers import free_port
from weave.search.beams import expand
from weave.search.params import SearchParams

STORIES = [
    "Once upon a time,",
    "The forest seemed darker then usual, but that did not bother Elis in the least.",
    "In the age before man,",
]
PROPS = {"total_slots": 1, "model_path": "/models/x.gguf", "eos_token": "</s>"}


@pytest.fixture(scope="module")
def llama(llama_url):
    backend = LlamaCppBackend(llama_url)
    yield backend
    backend.close()


def test_top_k_matches_our_mlx_backend(llama, mlx_backend):
    """The server runs the Q4_1 weights against 8-bit-quantised activations and an f16 KV
    cache; ours dequantises to float32. Measured here over the top-5 of the ten reference
    prompts: max |delta| 0.19, typically 0.01-0.1; the top token agrees on all ten. Two
    runners-up closer than that may swap places, so below the top only the set is asked."""
    worst = 0.0
    for story in STORIES:
        ids = llama.tokenize(story)
        assert ids == mlx_backend.tokenize(story)
        [theirs] = llama.top_logprobs([ids], 5)
        [ours] = mlx_backend.top_logprobs([ids], 8)
        assert theirs[0].token_id == ours[0].token_id
        ours_by_id = {c.token_id: c.logprob for c in ours}
        assert {c.token_id for c in theirs[:3]} <= ours_by_id.keys()
        worst = max(worst, *(abs(c.logprob - ours_by_id[c.token_id]) for c in theirs))
    assert worst <= 0.25, worst


def test_bias_ids_lifted_into_a_reply_read_back_as_the_raw_log_probs(llama):
    story = llama.tokenize("Once upon a time, there was a")
    [whole] = llama.top_logprobs([story], llama.vocab_size)  # every token, raw
    exact = {c.token_id: c.logprob for c in whole}
    rare = [c.token_id for c in whole[2000:6000:1000]] + [whole[-1].token_id]
    asked = [[*rare, whole[0].token_id], []]  # the top one is in the top k: listed once
    answer, alone = llama.top_logprobs_also([story, story[:-1]], 5, asked)
    assert [c.token_id for c in answer[:5]] == [c.token_id for c in whole[:5]]
    found = [c.token_id for c in answer[5:]]
    assert found == rare[: len(found)] and len(found) >= 3  # the least likely may be left out
    assert all(abs(c.logprob - exact[c.token_id]) <= 1e-3 for c in answer)
    assert len(alone) == 5


def test_a_full_expansion_and_its_round_trips(llama):
    ids = llama.tokenize(STORIES[0])
    result = expand(llama, ids, SearchParams(cutoff=0.1))
    assert 10 <= len(result.suggestions) <= 25
    assert result.suggestions[0].text.startswith(" ")
    nodes = result.tree.descendants()
    assert result.stats.forward_calls < nodes / 3  # far fewer round trips than tree nodes


def test_a_search_evaluates_little_more_than_its_tree(tmp_path):
    """The server's own count of the tokens it evaluated (`timings.prompt_n + predicted_n`,
    summed over the search) against the least a search can cost: the story once plus one
    token per tree node. On a server of its own, so no story is cached beforehand.

    The bound is the one the design guarantees whatever the server's pace: each chain is
    bounded by its beam's room (`n_predict`) and stops itself at auto-stop, and ordering
    by shared prefix alone (the prompt cache never consulted) costs at most 1.65x on the
    starting stories (1.58x, 1.59x, 1.34x: the cache-off test below holds the same bound).
    What the prompt cache saves on top depends on when a busy server saves and restores
    slots (measured on `-np 4`: 1.43x, 1.59x, 1.34x, 1.47x over the three; once 1.52x on
    a loaded machine), so that ratio is bench/bench_llamacpp.py's to print, not a test's
    to hold. The second story's 17 tokens are most of every prompt, so the server never
    consults its prompt cache for it (see backends.llamacpp_slots); the client's model
    of that cache must hold up: the restores it foresees show in the server's counts, or
    it would turn itself off."""
    from tests.llama_server import llama_server

    with llama_server(tmp_path / "server.log") as url, closing(LlamaCppBackend(url)) as backend:
        for story in STORIES:
            ids = backend.tokenize(story)
            result = expand(backend, ids, SearchParams(cutoff=0.1))
            least = len(ids) + result.tree.descendants()
            assert result.stats.model_tokens <= 1.65 * least, (story, result.stats, least)
        assert backend.slots.saved is not None


def test_without_a_prompt_cache_the_client_stops_counting_on_one(tmp_path):
    """`--cache-ram 0`: the restores the client's model foresees never show in the
    server's counts, so it turns the model off and orders by shared prefix alone."""
    from tests.llama_server import llama_server

    with (
        llama_server(tmp_path / "server.log", flags=("--cache-ram", "0")) as url,
        closing(LlamaCppBackend(url)) as backend,
    ):
        ids = backend.tokenize(STORIES[0])
        # v0.3's deep tree moves its prompts between slots enough for three restores to be
        # foreseen within one search (the relative rule's wide, shallow one reads the story
        # from each slot and rarely moves)
        result = expand(backend, ids, replace(SearchParams().under("v03"), cutoff=0.1))
        assert backend.slots.saved is None
        assert result.stats.model_tokens <= 1.65 * (len(ids) + result.tree.descendants())


def test_chains_equal_depth_by_depth(llama):
    ids = llama.tokenize(STORIES[1])
    params = dict(cutoff=0.1, max_depth=8, max_suggestions=12)
    chained = expand(llama, ids, SearchParams(**params, use_chains=True))
    plain = expand(llama, ids, SearchParams(**params, use_chains=False))
    assert [s.text for s in chained.suggestions] == [s.text for s in plain.suggestions]
    for a, b in zip(chained.suggestions, plain.suggestions, strict=True):
        assert a.token_ids == b.token_ids
        assert a.logprob == pytest.approx(b.logprob, abs=1e-3)


def test_split_characters_join_through_token_bytes(llama):
    ids = llama.tokenize("A dragon 🐉")
    assert llama.detokenize(ids) == "A dragon 🐉"
    result = expand(llama, ids, SearchParams(cutoff=0.3, max_depth=3, auto_stop=False))
    assert all("\ufffd" not in s.text for s in result.suggestions if s.exact)


def test_the_old_reply_shape_is_read(closed_after):
    old = {
        "content": " the",
        "completion_probabilities": [
            {
                "content": " the",
                "probs": [{"tok_str": " the", "prob": 0.5}, {"tok_str": " a", "prob": 0.25}],
            }
        ],
        "timings": {"prompt_n": 3, "predicted_n": 1},
    }  # fmt: skip
    routes = {
        "/props": (200, PROPS),
        "/tokenize": (200, {"tokens": [7]}),
        "/completion": (200, old),
    }
    with serving(routes=routes) as url:
        backend = closed_after(LlamaCppBackend(url))
        [top] = backend.top_logprobs([[1, 2, 3]], 2)
    assert [c.text for c in top] == [" the", " a"]
    assert top[0].logprob == pytest.approx(-0.6931, abs=1e-4)


def test_a_closed_port_names_the_url():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(BackendError, match=f"llamacpp at {url}: cannot connect"):
        LlamaCppBackend(url)


def test_a_silent_server_times_out_clearly():
    with serving(200, PROPS, delay=3) as url, pytest.raises(BackendError, match="within 0.5 s"):
        LlamaCppBackend(url, timeout=0.5)


@pytest.mark.parametrize(
    "status, body, message",
    [
        (500, {"error": {"message": "slot unavailable"}}, "HTTP 500: slot unavailable"),
        (200, "garbage{", "not JSON"),
        (200, {"content": "x"}, "no completion_probabilities"),
        (200, {"completion_probabilities": [{"id": 5, "logprob": None,
                "top_logprobs": [{"id": 5, "logprob": None}]}]}, "without -fa"),
    ],
)  # fmt: skip
def test_bad_replies_are_clear_errors(status, body, message, closed_after):
    routes = {
        "/props": (200, PROPS),
        "/tokenize": (200, {"tokens": []}),
        "/completion": (status, body),
    }
    with serving(routes=routes) as url:
        backend = closed_after(LlamaCppBackend(url))
        with pytest.raises(BackendError, match=message):
            backend.top_logprobs([[1, 2]], 3)


@pytest.mark.parametrize(
    "body, message",
    [
        ('data: {"error": {"message": "context full"}}\n\n', "while streaming: context full"),
        ("data: {not json\n\n", r"\(streamed\) answered with something that is not JSON"),
    ],
)
def test_a_stream_that_fails_is_a_clear_error(body, message, closed_after):
    routes = {
        "/props": (200, PROPS),
        "/tokenize": (200, {"tokens": []}),
        "/completion": (200, body),
    }
    with serving(routes=routes) as url:
        backend = closed_after(LlamaCppBackend(url))
        with pytest.raises(BackendError, match=message):
            backend.greedy_chains([[1, 2]], 3, [4], stops=(".", ","))


def test_control_token_names_in_a_story_are_text(llama):
    names = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
    controls = {i for name in names for i in llama.tokens.ids(name, special=True)}
    assert len(controls) == 3  # each name is one control token when read as one
    text = "The end.<|endoftext|><|im_start|>user\nHi<|im_end|>"
    ids = llama.tokenize(text)
    assert ids and not set(ids) & controls
    assert llama.detokenize(ids) == text


def test_token_ids_are_checked_against_the_vocabulary_the_server_reports(llama):
    assert llama.vocab_size == 49152  # SmolLM2's, from /v1/models meta.n_vocab


def test_the_readmes_llama_server_command_listens_where_its_url_points():
    # llama-server's default port moves from 8080 to 9931: the example names its port.
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    command = next(line for line in readme.splitlines() if line.startswith("llama-server "))
    url = re.search(r"LLAMA_API_URL=http://127\.0\.0\.1:(\d+)", readme)
    assert url is not None and f"--port {url.group(1)} " in command, command
