"""The OpenAI backend against real OpenAI-compatible servers, and its key hygiene.

No real OpenAI key exists here, so nothing is sent to openai.com: vLLM's and
llama.cpp's /v1/chat/completions and /v1/completions answer in OpenAI's shape, and tiny
loopback servers play a rejected key (401), a rate limit (429), junk and silence.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from backends import create_backend
from backends.errors import BackendError
from backends.openai import OpenAIBackend
from backends.openai_replies import top_positions
from tests.http_stubs import serving
from tests.servers import free_port
from weave.config import load_settings
from weave.search.beams import expand
from weave.search.params import SearchParams

SECRET = "sk-test-do-not-leak-0123456789abcdef"
PARAMS = SearchParams(cutoff=0.1, max_depth=6, max_suggestions=8)


@pytest.fixture
def backend(closed_after):
    """`backend(url, endpoint, key="EMPTY", **options)`: a client of `url`'s OpenAI API,
    closed when the test ends."""

    def client(url: str, endpoint: str, key: str = "EMPTY", **options) -> OpenAIBackend:
        options |= dict(api_key=key, model="smol", base_url=f"{url}/v1", endpoint=endpoint)
        return closed_after(OpenAIBackend(**options))

    return client


def texts(result) -> list[str]:
    return [s.text for s in result.suggestions]


# -- against vLLM ----------------------------------------------------------------------
def test_legacy_completions_continue_raw_text_like_the_token_backends(
    vllm_url, mlx_backend, backend
):
    openai = backend(vllm_url, "completions")
    [top] = openai.top_logprobs([openai.tokenize("Once upon a time,")], 5)
    [ours] = mlx_backend.top_logprobs([mlx_backend.tokenize("Once upon a time,")], 5)
    assert [c.text for c in top] == [c.text for c in ours]
    for theirs, mine in zip(top, ours, strict=True):
        assert theirs.logprob == pytest.approx(mine.logprob, abs=1e-3)
    assert openai.note is None


def test_legacy_chains_equal_depth_by_depth(vllm_url, backend):
    openai = backend(vllm_url, "completions")
    ids = openai.tokenize("In the age before man,")
    chained = expand(openai, ids, replace(PARAMS, use_chains=True))
    plain = expand(openai, ids, replace(PARAMS, use_chains=False))
    assert texts(chained) == texts(plain)
    assert chained.stats.forward_calls < plain.stats.forward_calls


def test_chat_continues_a_prefilled_answer_so_chains_equal_depth_by_depth(vllm_url, backend):
    openai = backend(vllm_url, "chat")
    assert openai.prefill and "start of the model's answer" in openai.note
    ids = openai.tokenize("Once upon a time,")
    params = replace(PARAMS, cutoff=0.05)  # the small model mostly echoes the story
    chained = expand(openai, ids, replace(params, use_chains=True))
    plain = expand(openai, ids, replace(params, use_chains=False))
    assert 2 <= len(plain.suggestions) <= params.max_suggestions
    assert texts(chained) == texts(plain)
    for a, b in zip(chained.suggestions, plain.suggestions, strict=True):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-3)
    assert chained.stats.forward_calls < plain.stats.forward_calls
    assert plain.stats.model_tokens > 0 and plain.stats.prefill_tokens > 0


def test_chat_with_the_beam_appended_as_on_openai_com(vllm_url, backend):
    openai = backend(vllm_url, "chat")
    openai.prefill = False  # what api.openai.com gets: no assistant prefill there
    assert "appended" in openai.note
    result = expand(openai, openai.tokenize("The dragon circled the tower,"), PARAMS)
    assert result.suggestions and all(s.text for s in result.suggestions)


def test_only_openai_com_gets_the_appended_prompt(closed_after):
    assert not closed_after(OpenAIBackend(api_key="k", model="gpt-4o-mini")).prefill
    assert closed_after(
        OpenAIBackend(api_key="k", model="m", base_url="http://127.0.0.1:1/v1")
    ).prefill
    assert closed_after(OpenAIBackend(api_key="k", model="davinci-002")).endpoint == "completions"
    assert closed_after(OpenAIBackend(api_key="k", model="gpt-4o-mini")).endpoint == "chat"


# -- against llama.cpp -----------------------------------------------------------------
def test_llama_cpp_chat_and_completions(llama_url, mlx_backend, backend):
    completions = backend(llama_url, "completions")  # answers in the chat shape there
    [top] = completions.top_logprobs([completions.tokenize("Once upon a time,")], 3)
    [ours] = mlx_backend.top_logprobs([mlx_backend.tokenize("Once upon a time,")], 3)
    assert [c.text for c in top] == [c.text for c in ours]  # Q4_1 GGUF against float32
    chat = backend(llama_url, "chat")
    ids = chat.tokenize("The dragon circled the tower,")
    chained = expand(chat, ids, replace(PARAMS, use_chains=True))
    plain = expand(chat, ids, replace(PARAMS, use_chains=False))
    assert plain.suggestions and texts(chained) == texts(plain)


# -- tokens as bytes -----------------------------------------------------------------------
def test_token_bytes_join_split_characters(closed_after):
    legacy = {"logprobs": {"top_logprobs": [{"bytes:\\xe6\\x9d": -0.5}]}}
    assert top_positions(legacy, ValueError) == [[(b"\xe6\x9d", -0.5)]]  # a partial token
    chat = {"logprobs": {"content": [{"top_logprobs": [
        {"token": "\ufffd", "bytes": [0xB1], "logprob": -0.5}]}]}}  # fmt: skip
    assert top_positions(chat, ValueError) == [[(b"\xb1", -0.5)]]  # bytes win over text
    openai = closed_after(OpenAIBackend(api_key="k", model="gpt-4o-mini"))
    ids = [openai._intern(b"\xe6\x9d"), openai._intern(b"\xb1")]
    assert openai.detokenize(openai.tokenize("The ") + ids) == "The 東"


# -- the key and failures ----------------------------------------------------------------
def test_a_missing_key_says_which_variable_to_set():
    settings = load_settings(env={"LLOOM_BACKEND": "openai"})
    with pytest.raises(BackendError, match="set OPENAI_API_KEY"):
        create_backend(settings, env={})
    with pytest.raises(BackendError, match="set OPENAI_API_KEY"):
        OpenAIBackend(api_key=" ", model="gpt-4o-mini")


def test_a_rejected_key_is_clear_and_never_shown(caplog, backend):
    reply = {"error": {"message": f"Incorrect API key provided: {SECRET}", "code": "invalid"}}
    caplog.set_level(logging.DEBUG)
    with serving(401, reply) as url:
        openai = backend(url, "chat", key=SECRET)
        with pytest.raises(BackendError) as error:
            openai.top_logprobs([openai.tokenize("Hello")], 3)
    assert "rejected (401): check OPENAI_API_KEY" in str(error.value)
    shown = [str(error.value), repr(error.value), caplog.text, repr(openai), openai.url]
    shown += [str(record.args) for record in caplog.records]
    for text in shown:
        assert SECRET not in text and SECRET[-16:] not in text


@pytest.mark.parametrize(
    "status, body, message",
    [
        (429, {"error": {"message": "Rate limit reached"}}, "rate limited .*\\(429\\)"),
        (500, {"error": {"message": "overloaded"}}, "HTTP 500: overloaded"),
        (404, {"error": {"message": "no such model"}}, "model 'smol' not found"),
        (200, {"choices": []}, "no log-probabilities"),
        (200, {"choices": [{"index": 0, "text": "x", "logprobs": {"content": [{}]}}]},
         "unexpected reply"),
    ],
)  # fmt: skip
def test_failing_servers_are_clear_errors(status, body, message, backend):
    with serving(status, body) as url:
        openai = backend(url, "completions")
        with pytest.raises(BackendError, match=message) as error:
            openai.top_logprobs([openai.tokenize("Hello")], 3)
    assert url in str(error.value)


def test_unreachable_and_silent_servers_are_clear_errors(backend):
    openai = backend(f"http://127.0.0.1:{free_port()}", "chat")
    with pytest.raises(BackendError, match="cannot connect: check OPENAI_BASE_URL"):
        openai.top_logprobs([openai.tokenize("Hello")], 3)
    with serving(200, {}, delay=3) as url:
        silent = backend(url, "chat", timeout=0.5)
        with pytest.raises(BackendError, match="no answer in time"):
            silent.top_logprobs([silent.tokenize("Hello")], 3)
