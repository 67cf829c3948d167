"""Ramify: N sampled continuations, on every backend against the real thing.

MLX runs the real embedded model and is checked against plain forwards (no cache) of
the same token ids; llama.cpp and vLLM are real servers on the embedded model, checked
against their own greedy paths (and vLLM, float32 as ours, against our forwards); the
OpenAI backend talks to those servers' OpenAI endpoints.
"""

from __future__ import annotations

import math
from dataclasses import replace

import mlx.core as mx
import pytest

from backends.errors import BackendError
from backends.llamacpp import LlamaCppBackend
from backends.openai import OpenAIBackend
from backends.vllm import VLLMBackend
from tests.http_stubs import serving
from weave.search.beams import expand
from weave.search.params import SearchParams
from weave.search.ramify import RamifyParams, ramify

STORY = "The forest seemed darker then usual, but that did not bother Elis in the least."
CHAT_DONE = "<|im_start|>user\nSay yes.<|im_end|>\n<|im_start|>assistant\nYes."
PARAMS = RamifyParams(n=4, temperature=1.0, min_p=0.05, max_tokens=10, seed=11)


def plain_logprobs(backend, ids: list[int]) -> mx.array:
    """(len(ids), vocab) log-probs of a full forward with no cache: the reference."""
    logits = backend.model(mx.array([ids]))[0].astype(mx.float32)
    return logits - mx.logsumexp(logits, axis=-1, keepdims=True)


def raw_logprob(backend, context: list[int], tokens: tuple[int, ...]) -> float:
    """The sum of `tokens`' log-probs after `context`, from one plain forward."""
    if not tokens:
        return 0.0
    logprobs = plain_logprobs(backend, context + list(tokens[:-1]))
    rows = mx.arange(len(context) - 1, len(context) - 1 + len(tokens))
    return mx.sum(logprobs[rows, mx.array(tokens)]).item()


def greedy_path(backend, context: list[int], max_tokens: int) -> tuple[int, ...]:
    """The top token, again and again, by plain forwards, until a control token."""
    path: list[int] = []
    while len(path) < max_tokens:
        token = mx.argmax(plain_logprobs(backend, context + path)[-1]).item()
        if token in backend.special_token_ids:
            break
        path.append(token)
    return tuple(path)


def drawn_ids(result) -> list[tuple[int, ...]]:
    return [s.token_ids for s in result.samples]


def assert_well_formed(backend, result, params: RamifyParams) -> None:
    assert len(result.samples) == params.n
    for sample in result.samples:
        assert 0 < len(sample.token_ids) <= params.max_tokens
        assert not set(sample.token_ids) & backend.special_token_ids
        assert sample.text == backend.detokenize(list(sample.token_ids))
        assert math.isfinite(sample.logprob) and sample.logprob <= 0
        assert sample.stats is result.stats


# -- MLX -----------------------------------------------------------------------------------
def test_mlx_samples_carry_their_raw_logprobs(fresh_mlx_backend):
    backend = fresh_mlx_backend
    context = backend.tokenize(STORY)
    result = ramify(backend, context, replace(PARAMS, temperature=1.3, min_p=0.0))
    assert_well_formed(backend, result, PARAMS)
    assert len({s.token_ids for s in result.samples}) > 1  # a hot draw differs between rows
    for sample in result.samples:  # raw: neither temperature nor min-p reshape the score
        reference = raw_logprob(backend, context, sample.token_ids)
        assert sample.logprob == pytest.approx(reference, abs=2e-3)


def test_mlx_draws_all_rows_in_one_forward_per_step(fresh_mlx_backend):
    backend = fresh_mlx_backend
    context = backend.tokenize(STORY)
    first = ramify(backend, context, PARAMS)
    assert first.stats.prefill_tokens == len(context) - 1  # the story, read once for all rows
    again = ramify(backend, context, replace(PARAMS, seed=12))
    steps = max(min(len(s.token_ids) + 1, PARAMS.max_tokens) for s in again.samples)
    assert again.stats.prefill_tokens == 0
    assert again.stats.forward_calls == steps <= PARAMS.max_tokens
    assert again.stats.model_tokens == PARAMS.n * steps


def test_mlx_cold_and_greedy_draws_follow_the_top_token(mlx_backend):
    context = mlx_backend.tokenize("Once upon a time,")
    greedy = greedy_path(mlx_backend, context, PARAMS.max_tokens)
    for params in (replace(PARAMS, temperature=0.0), replace(PARAMS, temperature=1.5, min_p=1.0)):
        result = ramify(mlx_backend, context, params)
        assert [s.token_ids for s in result.samples] == [greedy] * params.n


def test_mlx_seeds_reproduce_across_backends(mlx_backend, fresh_mlx_backend):
    context = mlx_backend.tokenize("In the age before man,")
    drawn = drawn_ids(ramify(mlx_backend, context, PARAMS))
    assert drawn_ids(ramify(fresh_mlx_backend, context, PARAMS)) == drawn
    assert drawn_ids(ramify(mlx_backend, context, replace(PARAMS, seed=PARAMS.seed + 1))) != drawn


def test_mlx_a_control_token_ends_a_sample(mlx_backend):
    # The chat markers as control tokens (the writer's text never becomes one: `tokenize`)
    context = list(mlx_backend.tokenizer.encode(CHAT_DONE, add_special_tokens=False))
    assert set(context) & mlx_backend.special_token_ids
    [sample] = ramify(mlx_backend, context, replace(PARAMS, n=1, temperature=0.0)).samples
    assert sample.token_ids == greedy_path(mlx_backend, context, PARAMS.max_tokens)
    assert len(sample.token_ids) < PARAMS.max_tokens  # it stopped at <|im_end|>, unshown


def test_mlx_accepting_a_sample_then_searching_reads_nothing_again(fresh_mlx_backend):
    backend = fresh_mlx_backend
    context = backend.tokenize(STORY)
    sample = ramify(backend, context, PARAMS).samples[0]
    story = context + list(sample.token_ids)
    result = expand(backend, story, SearchParams(cutoff=0.1, max_depth=3, max_suggestions=5))
    assert result.stats.prefill_tokens == 0
    [cached] = backend.top_logprobs([story], 5)  # the filed KV is the model's own
    reference = plain_logprobs(backend, story)[-1]
    for candidate in cached:
        assert candidate.logprob == pytest.approx(reference[candidate.token_id].item(), abs=1e-3)


def test_mlx_progress_reports_the_reading_and_the_draw(embedded_model_path, closed_after):
    from backends.mlx.backend import MLXBackend

    backend = closed_after(MLXBackend(embedded_model_path, prefill_chunk=16))
    context = backend.tokenize(STORY * 2)
    reports = []
    result = ramify(backend, context, PARAMS, progress=reports.append)
    reading, done = reports[:-1], reports[-1]
    assert reading and all(r.depth == 0 and r.story_tokens == len(context) for r in reading)
    assert reading[-1].story_read == len(context)
    assert done.beams_done == PARAMS.n and done.beams_live == 0
    assert done.latest == result.samples[0].text
    assert done.tokens_evaluated == result.stats.model_tokens


def test_bad_requests_are_refused_before_the_backend_is_asked(mlx_backend):
    with pytest.raises(ValueError, match="empty"):
        ramify(mlx_backend, [], PARAMS)
    for bad in ({"n": 0}, {"temperature": -1}, {"min_p": 1.5}, {"max_tokens": 0}):
        with pytest.raises(ValueError):
            replace(PARAMS, **bad)


# -- llama.cpp -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def llama(llama_url):
    backend = LlamaCppBackend(llama_url)
    yield backend
    backend.close()


def greedy_chain(backend, context: list[int], length: int) -> tuple[tuple[int, ...], float]:
    """A server's own greedy path (top-1 at each position) and its summed log-prob."""
    [chain] = backend.greedy_chains([context], 1, [length])
    return tuple(top[0].token_id for top in chain), sum(top[0].logprob for top in chain)


def test_llamacpp_draws_all_samples_in_one_request_with_seeds(llama):
    context = llama.tokenize(STORY)
    params = replace(PARAMS, max_tokens=6)  # n = the server's 4 slots
    result = ramify(llama, context, params)
    assert_well_formed(llama, result, params)
    assert result.stats.forward_calls == 1
    assert len(set(drawn_ids(result))) > 1
    assert drawn_ids(ramify(llama, context, params)) == drawn_ids(result)
    more = ramify(llama, context, replace(params, n=6))  # more than its slots: two requests
    assert len(more.samples) == 6 and more.stats.forward_calls == 2
    assert drawn_ids(more)[:4] == drawn_ids(result)  # the seeds go on where they left off


def test_llamacpp_cold_draws_follow_its_greedy_path(llama):
    context = llama.tokenize("Once upon a time,")
    path, logprob = greedy_chain(llama, context, PARAMS.max_tokens)
    for params in (replace(PARAMS, temperature=0.0), replace(PARAMS, temperature=1.5, min_p=1.0)):
        result = ramify(llama, context, params)
        assert drawn_ids(result) == [path] * params.n
        for sample in result.samples:  # raw log-probs, whatever the temperature
            assert sample.logprob == pytest.approx(logprob, abs=1e-3)


# -- vLLM ------------------------------------------------------------------------------------
def test_vllm_samples_with_its_own_sampler(vllm_url, mlx_backend, closed_after):
    vllm = closed_after(VLLMBackend(vllm_url))
    context = vllm.tokenize(STORY)
    hot = replace(PARAMS, temperature=1.3, min_p=0.0)
    result = ramify(vllm, context, hot)
    assert_well_formed(vllm, result, hot)
    assert len(set(drawn_ids(result))) > 1
    assert drawn_ids(ramify(vllm, context, hot)) == drawn_ids(result)
    for sample in result.samples:  # float32 as ours: the raw log-probs agree
        reference = raw_logprob(mlx_backend, context, sample.token_ids)
        assert sample.logprob == pytest.approx(reference, abs=1e-2)
    path, logprob = greedy_chain(vllm, context, PARAMS.max_tokens)
    for params in (replace(PARAMS, temperature=0.0), replace(PARAMS, min_p=1.0)):
        cold = ramify(vllm, context, params)
        assert drawn_ids(cold) == [path] * params.n
        assert cold.samples[0].logprob == pytest.approx(logprob, abs=1e-3)


# -- OpenAI (vLLM's and llama.cpp's OpenAI endpoints) ------------------------------------------
@pytest.fixture
def openai_on(closed_after):
    """`openai_on(url, endpoint)`: a client of `url`'s OpenAI API, closed when the test ends."""

    def client(url: str, endpoint: str) -> OpenAIBackend:
        options = dict(api_key="EMPTY", model="smol", base_url=f"{url}/v1", endpoint=endpoint)
        return closed_after(OpenAIBackend(**options))

    return client


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_openai_samples_through_vllm(vllm_url, endpoint, openai_on):
    openai = openai_on(vllm_url, endpoint)
    context = openai.tokenize("Once upon a time,")
    result = ramify(openai, context, PARAMS)
    assert_well_formed(openai, result, PARAMS)
    assert result.stats.forward_calls == 1
    assert drawn_ids(ramify(openai, context, PARAMS)) == drawn_ids(result)


def test_openai_legacy_samples_are_the_raw_continuation(vllm_url, closed_after, openai_on):
    openai, vllm = openai_on(vllm_url, "completions"), closed_after(VLLMBackend(vllm_url))
    cold = replace(PARAMS, n=2, temperature=0.0)
    ours = ramify(openai, openai.tokenize(STORY), cold).samples[0]
    theirs = ramify(vllm, vllm.tokenize(STORY), cold).samples[0]
    assert ours.text == theirs.text
    assert ours.logprob == pytest.approx(theirs.logprob, abs=1e-3)


def test_openai_samples_through_llama_cpp(llama_url, openai_on):
    openai = openai_on(llama_url, "chat")
    result = ramify(openai, openai.tokenize("The dragon circled the tower,"), PARAMS)
    assert_well_formed(openai, result, PARAMS)


# -- servers that answer badly (loopback stubs) ------------------------------------------------
def test_a_reply_without_the_drawn_tokens_is_a_clear_error(closed_after, openai_on):
    routes = {
        "/props": (200, {"total_slots": 2, "model_path": "/models/x.gguf"}),
        "/tokenize": (200, {"tokens": []}),
        "/detokenize": (200, {"content": "Once."}),  # read for healing: nothing to heal
        "/completion": (200, {"content": " and then", "completion_probabilities": []}),
    }
    with serving(routes=routes) as url, pytest.raises(BackendError, match="return_tokens"):
        ramify(closed_after(LlamaCppBackend(url)), [1, 2, 3], PARAMS)
    with serving(200, {"choices": []}) as url:
        openai = openai_on(url, "chat")
        with pytest.raises(BackendError, match="no choices") as error:
            ramify(openai, openai.tokenize("Hello"), PARAMS)
    assert url in str(error.value)
