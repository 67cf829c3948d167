"""The OpenAI backend against real OpenAI-compatible servers (vLLM's), and its key hygiene.

No real OpenAI key exists here, so nothing is sent to openai.com: vLLM's
/v1/chat/completions and /v1/completions answer in OpenAI's shape, and a loopback
server plays the 401 that a rejected key gets.
"""

from __future__ import annotations

import logging

import pytest

from backends import create_backend
from backends.base import BackendError
from backends.openai import OpenAIBackend
from tests.http_stubs import serving
from tests.servers import free_port
from weave.config import load_settings
from weave.search import SearchParams, expand

SECRET = "sk-test-do-not-leak-0123456789abcdef"


def backend(url: str, endpoint: str, key: str = "EMPTY") -> OpenAIBackend:
    return OpenAIBackend(api_key=key, model="smol", base_url=f"{url}/v1", endpoint=endpoint)


def test_legacy_completions_continue_raw_text_like_the_token_backends(vllm_url, mlx_backend):
    openai = backend(vllm_url, "completions")
    [top] = openai.top_logprobs([openai.tokenize("Once upon a time,")], 5)
    [ours] = mlx_backend.top_logprobs([mlx_backend.tokenize("Once upon a time,")], 5)
    assert [c.text for c in top] == [c.text for c in ours]
    for theirs, mine in zip(top, ours, strict=True):
        assert theirs.logprob == pytest.approx(mine.logprob, abs=2e-3)
    assert openai.token_native is False and openai.note is None


def test_chat_models_expand_through_the_search(vllm_url):
    openai = backend(vllm_url, "chat")
    assert "assistant turn" in openai.note
    ids = openai.tokenize("The dragon circled the tower,")
    result = expand(openai, ids, SearchParams(cutoff=0.1, max_depth=5, max_suggestions=6))
    assert 1 <= len(result.suggestions) <= 6
    assert all(s.text for s in result.suggestions)
    assert result.stats.forward_calls >= 1


def test_chains_equal_depth_by_depth(vllm_url):
    openai = backend(vllm_url, "completions")
    ids = openai.tokenize("In the age before man,")
    params = SearchParams(cutoff=0.1, max_depth=6, max_suggestions=8)
    chained = expand(openai, ids, SearchParams(**{**params.__dict__, "use_chains": True}))
    plain = expand(openai, ids, SearchParams(**{**params.__dict__, "use_chains": False}))
    assert [s.text for s in chained.suggestions] == [s.text for s in plain.suggestions]
    assert chained.stats.forward_calls < plain.stats.forward_calls


def test_a_missing_key_says_which_variable_to_set():
    settings = load_settings(env={"LLOOM_BACKEND": "openai"})
    with pytest.raises(BackendError, match="set OPENAI_API_KEY"):
        create_backend(settings, env={})


def test_a_rejected_key_is_clear_and_never_shown(caplog):
    reply = {"error": {"message": f"Incorrect API key provided: {SECRET}", "code": "invalid"}}
    caplog.set_level(logging.DEBUG)
    with serving(401, reply) as url:
        openai = backend(url, "chat", key=SECRET)
        with pytest.raises(BackendError) as error:
            openai.top_logprobs([openai.tokenize("Hello")], 3)
    assert "rejected (401): check OPENAI_API_KEY" in str(error.value)
    for text in (str(error.value), repr(error.value), caplog.text, repr(openai), openai.url):
        assert SECRET not in text and SECRET[:12] not in text


def test_unreachable_and_failing_servers_are_clear_errors():
    openai = backend(f"http://127.0.0.1:{free_port()}", "chat")
    with pytest.raises(BackendError, match="cannot connect"):
        openai.top_logprobs([openai.tokenize("Hello")], 3)
    with serving(500, {"error": {"message": "overloaded"}}) as url:
        failing = backend(url, "completions")
        with pytest.raises(BackendError, match="HTTP 500: overloaded"):
            failing.top_logprobs([failing.tokenize("Hello")], 3)
