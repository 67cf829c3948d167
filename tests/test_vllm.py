"""The vLLM backend against a real vLLM server on the embedded model."""

from __future__ import annotations

import pytest

from backends.base import BackendError
from backends.vllm import VLLMBackend
from tests.http_stubs import serving
from tests.servers import free_port
from weave.search import SearchParams, expand

STORIES = [
    "Once upon a time,",
    "The forest seemed darker then usual, but that did not bother Elis in the least.",
    "In the age before man,",
]
MODELS = {"data": [{"id": "smol", "max_model_len": 2048}]}


@pytest.fixture(scope="module")
def vllm(vllm_url):
    backend = VLLMBackend(vllm_url)
    yield backend
    backend.close()


def test_top_k_matches_our_mlx_backend(vllm, mlx_backend):
    worst = 0.0
    for story in STORIES:
        ids = vllm.tokenize(story)
        assert ids == mlx_backend.tokenize(story)  # the server's own ids agree with ours
        [theirs] = vllm.top_logprobs([ids], 10)
        [ours] = mlx_backend.top_logprobs([ids], 10)
        assert [c.token_id for c in theirs[:5]] == [c.token_id for c in ours[:5]]
        ours_by_id = {c.token_id: c.logprob for c in ours}
        worst = max(worst, *(abs(c.logprob - ours_by_id[c.token_id]) for c in theirs[:5]))
    assert worst <= 2e-3, worst  # both float32; measured about 1e-4


def test_a_depth_is_one_request_carrying_the_whole_frontier(vllm):
    ids = vllm.tokenize("Once upon a time,")
    [first] = vllm.top_logprobs([ids], 4)
    before = vllm.stats.snapshot()
    answers = vllm.top_logprobs([ids + [c.token_id] for c in first], 5)
    assert (vllm.stats.snapshot() - before).forward_calls == 1
    assert len(answers) == 4 and all(len(a) == 5 for a in answers)
    assert all(a[0].logprob >= a[-1].logprob for a in answers)
    assert first[0].text == " the"


def test_chains_equal_depth_by_depth_with_far_fewer_requests(vllm):
    ids = vllm.tokenize(STORIES[1])
    params = SearchParams(cutoff=0.1, max_depth=8, max_suggestions=12)
    plain = expand(vllm, ids, SearchParams(**{**params.__dict__, "use_chains": False}))
    chained = expand(vllm, ids, SearchParams(**{**params.__dict__, "use_chains": True}))
    assert [s.text for s in chained.suggestions] == [s.text for s in plain.suggestions]
    for a, b in zip(chained.suggestions, plain.suggestions, strict=True):
        assert a.token_ids == b.token_ids
        assert a.logprob == pytest.approx(b.logprob, abs=1e-3)
    assert chained.stats.forward_calls < plain.stats.forward_calls


def test_more_logprobs_than_the_server_allows_are_clamped(vllm, caplog):
    ids = vllm.tokenize("Once upon a time,")
    vllm.max_logprobs = 50  # pretend we did not know the server's --max-logprobs 20
    [answer] = vllm.top_logprobs([ids], 30)
    assert len(answer) == 20 and vllm.max_logprobs == 20
    assert "--max-logprobs" in caplog.text


def test_an_unknown_model_names_what_is_served(vllm_url):
    with pytest.raises(BackendError, match="'nope' is not served here.*smol"):
        VLLMBackend(vllm_url, model="nope")


def test_a_closed_port_is_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(BackendError, match=f"vllm at {url}: cannot connect"):
        VLLMBackend(url)


def test_a_silent_server_times_out_clearly():
    with serving(200, MODELS, delay=3) as url, pytest.raises(BackendError, match="within 0.5 s"):
        VLLMBackend(url, timeout=0.5)


@pytest.mark.parametrize(
    "status, body, message",
    [
        (500, {"error": {"message": "engine dead"}}, "HTTP 500: engine dead"),
        (200, "<html>not json</html>", "not JSON"),
        (200, {"choices": []}, "expected 1 choices"),
        (200, {"choices": [{"index": 0, "logprobs": {"top_logprobs": [{"the": -1.0}]}}]},
         "not 'token_id:N'"),
    ],
)  # fmt: skip
def test_bad_replies_are_clear_errors(status, body, message):
    routes = {"/v1/models": (200, MODELS), "/v1/completions": (status, body)}
    with serving(routes=routes) as url:
        backend = VLLMBackend(url)
        with pytest.raises(BackendError, match=message):
            backend.top_logprobs([[1, 2]], 3)
