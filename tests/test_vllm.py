"""The vLLM backend against a real vLLM server on the embedded model (float32).

Error paths meet real sockets: a closed port, and tiny loopback HTTP servers that stay
silent or answer junk (tests/http_stubs.py).
"""

from __future__ import annotations

import json
import logging
import threading
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest

from backends.errors import BackendError
from backends.vllm import VLLMBackend
from backends.vllm_texts import SEPARATOR, VOCAB_BLOCK
from tests.http_stubs import serving
from tests.recording_proxy import recording
from tests.servers import free_port
from tests.vllm_server import computed_tokens_once_settled
from weave.search.beams import expand
from weave.search.params import SearchParams

REFERENCE = Path(__file__).resolve().parent / "fixtures" / "smollm2-next-token-reference.json"
LONG_STORY = Path(__file__).resolve().parent.parent / "bench" / "long_story.txt"
STORIES = [
    "Once upon a time,",
    "The forest seemed darker then usual, but that did not bother Elis in the least.",
    "In the age before man,",
    "東京タワーは",  # characters split over several tokens
    "The dragon 🐉 circled the tower,",  # at a stop: healing (vLLM sees 20) is not compared
]
TOLERANCE = 1e-3  # both float32; measured: at most 2.4e-4 over the top 20 of 15 prompts
MODELS = {"data": [{"id": "smol", "max_model_len": 2048}]}
STUB_TOKENIZER = {
    "/tokenize": (200, {"tokens": [31]}),
    "/detokenize": (200, {"prompt": SEPARATOR}),
    "/tokenizer_info": (200, {"vocab_size": 49152}),
}  # a stub says its size here


@pytest.fixture(scope="module")
def vllm(vllm_url):
    backend = VLLMBackend(vllm_url)
    yield backend
    backend.close()


def prompts() -> list[str]:
    return [case["prompt"] for case in json.loads(REFERENCE.read_text())["cases"]] + STORIES


def settled(text: str) -> str:
    """Text less a trailing incomplete character."""
    return text.rstrip("\ufffd")


@pytest.fixture(scope="module")
def proxied(vllm_url):
    """A backend whose requests pass through a recording proxy (tests/recording_proxy.py)."""
    with recording(vllm_url) as proxy, closing(VLLMBackend(proxy.url)) as backend:
        yield backend, proxy


def expand_counting(proxied, ids: list[int], params: SearchParams):
    """A search and how many completion requests it made (text look-ups aside)."""
    backend, proxy = proxied
    sent = len(proxy.bodies("/v1/completions"))
    result = expand(backend, ids, params)
    return result, len(proxy.bodies("/v1/completions")) - sent


# -- the model's numbers --------------------------------------------------------------
def test_top_k_matches_our_mlx_backend(vllm, mlx_backend):
    worst = 0.0
    for prompt in prompts():
        ids = vllm.tokenize(prompt)
        assert ids == mlx_backend.tokenize(prompt), prompt  # the server's own ids agree
        [theirs] = vllm.top_logprobs([ids], 20)
        [ours] = mlx_backend.top_logprobs([ids], 20)
        assert [c.token_id for c in theirs[:5]] == [c.token_id for c in ours[:5]], prompt
        ours_by_id = {c.token_id: c.logprob for c in ours}
        worst = max(worst, *(abs(c.logprob - ours_by_id[c.token_id])
                             for c in theirs if c.token_id in ours_by_id))  # fmt: skip
    assert worst <= TOLERANCE, worst


@pytest.mark.parametrize("story", STORIES[3:] + STORIES[:1])
def test_searches_match_mlx_and_split_characters_join(vllm, mlx_backend, story):
    """The same suggestions, ids and text, as the MLX backend that knows token bytes: a
    character split over tokens appears whole once its last token arrives."""
    # v0.3's rule at a low cutoff: a relative one fans out over near-ties, whose order two
    # float32 implementations may swap
    params = SearchParams(rule="v03", cutoff=0.05, multiplier=1.0, split_limit=3, max_depth=6,
                          max_suggestions=20, auto_stop=False, use_chains=False)  # fmt: skip
    theirs = expand(vllm, vllm.tokenize(story), params).suggestions
    ours = expand(mlx_backend, mlx_backend.tokenize(story), params).suggestions
    assert [s.token_ids for s in theirs] == [s.token_ids for s in ours]
    for suggestion, mine in zip(theirs, ours, strict=True):
        assert suggestion.text == settled(mine.text)  # MLX shows an unfinished one as U+FFFD
        assert suggestion.text == settled(vllm.detokenize(list(suggestion.token_ids)))
    assert "\ufffd" not in "".join(s.text for s in theirs)


# -- request patterns -----------------------------------------------------------------
def test_bias_ids_are_weighed_over_the_whole_vocabulary_as_mlx_weighs_them(proxied, mlx_backend):
    vllm, proxy = proxied
    story = vllm.tokenize("Once upon a time, there was a")
    [whole] = mlx_backend.top_logprobs([story], mlx_backend.net.vocab)
    exact = {c.token_id: c.logprob for c in whole}
    [pineapple] = vllm.tokenize(" pineapple")  # the model's ~3,000th token here
    rare = sorted({pineapple, *(c.token_id for c in whole[2000:6000:1000]), whole[-1].token_id},
                  key=lambda i: -exact[i])  # fmt: skip
    asked = [[*rare, whole[0].token_id], []]  # the top one is in the top k: listed once
    sent = len(proxy.bodies("/v1/completions"))  # (token texts are looked up elsewhere)
    answer, alone = vllm.top_logprobs_also([story, story[:-1]], 5, asked)
    assert len(proxy.bodies("/v1/completions")) - sent == 2  # the top k of both, then the ids
    assert [c.token_id for c in answer[:5]] == [c.token_id for c in whole[:5]]
    assert [c.token_id for c in answer[5:]] == rare  # most likely first
    assert all(abs(c.logprob - exact[c.token_id]) <= TOLERANCE for c in answer)
    assert next(c.text for c in answer if c.token_id == pineapple) == " pineapple"
    assert len(alone) == 5 and vllm.names_ids


def test_a_depth_is_one_request_carrying_the_whole_frontier(vllm):
    ids = vllm.tokenize("Once upon a time,")
    [first] = vllm.top_logprobs([ids], 4)
    frontier = [ids + [c.token_id] for c in first]
    before = vllm.stats.snapshot()
    answers = vllm.top_logprobs(frontier, 5)
    assert (vllm.stats.snapshot() - before).forward_calls == 1
    assert len(answers) == 4 and all(len(a) == 5 for a in answers)
    assert all(a[0].logprob >= a[-1].logprob for a in answers)
    assert first[0].text == " the"


def test_token_texts_cost_a_look_up_per_vocabulary_block_at_most(vllm_url):
    with recording(vllm_url) as proxy, closing(VLLMBackend(proxy.url)) as backend:
        params = SearchParams(cutoff=0.05, max_depth=8)
        first = expand(backend, backend.tokenize(STORIES[0]), params)
        second = expand(backend, backend.tokenize(STORIES[2]), params)
        assert first.suggestions and second.suggestions
        # One per block of SmolLM2's vocabulary (most made ahead, on the backend's own
        # thread, the rest by a search that needs one first), never one per depth.
        blocks = [b for b in proxy.bodies("/detokenize") if len(b["tokens"]) > VOCAB_BLOCK]
        assert len(blocks) <= -(-49152 // VOCAB_BLOCK)
        for thread in threading.enumerate():
            if thread.name == "lloom-vllm-texts":  # the look-ups ahead: done once all known
                thread.join(timeout=60)
        before, ids = len(proxy.bodies("/detokenize")), backend.tokenize(STORIES[0])
        expand(backend, ids, params)
        read = [b["tokens"] for b in proxy.bodies("/detokenize")[before:]]
        assert all(set(r) <= set(ids) for r in read)  # the story's end, healed; no token text


@pytest.mark.parametrize("story", [STORIES[1], STORIES[3]])
def test_chains_equal_depth_by_depth(proxied, story):
    ids = proxied[0].tokenize(story)
    params = SearchParams(cutoff=0.1, max_depth=8, max_suggestions=12)
    plain, plain_completions = expand_counting(proxied, ids, replace(params, use_chains=False))
    chained, completions = expand_counting(proxied, ids, replace(params, use_chains=True))
    assert [s.token_ids for s in chained.suggestions] == [s.token_ids for s in plain.suggestions]
    for a, b in zip(chained.suggestions, plain.suggestions, strict=True):
        assert a.text == b.text
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
    assert completions < plain_completions


def test_a_long_story_costs_the_server_little_more_than_its_tree(vllm, vllm_url):
    """What the server computed over a whole search (its /metrics: prompt tokens less
    prefix-cache hits, plus generated) against the least a search can cost: the story
    once plus one token per tree node. A 230-token passage no other test reads, so its
    blocks are not cached beforehand. Each new beam re-reads its context's last partial
    32-token block; depth by depth, every beam was read again at every depth (3.2x)."""
    ids = vllm.tokenize(LONG_STORY.read_text())[300:530]
    before = computed_tokens_once_settled(vllm_url)
    result = expand(vllm, ids, SearchParams(cutoff=0.1))
    spent = computed_tokens_once_settled(vllm_url) - before
    nodes = result.tree.descendants()
    assert len(result.suggestions) >= 10
    assert spent <= 2 * (len(ids) + nodes), (spent, len(ids) + nodes)


def test_usage_counts_round_trips_and_uncached_prompt_tokens(vllm):
    ids = vllm.tokenize(STORIES[1] * 12)  # long enough to fill the server's cache blocks
    vllm.top_logprobs([ids], 3)
    before = vllm.stats.snapshot()
    vllm.top_logprobs([ids], 3)  # the same prompt again: its prefix is cached
    spent = vllm.stats.snapshot() - before
    assert spent.forward_calls == 1
    assert spent.prefill_tokens < len(ids) // 2
    assert spent.model_tokens == spent.prefill_tokens + 1


def test_chain_positions_come_as_made_and_a_dropped_chain_stops_the_server(vllm_url, closed_after):
    """A streamed chain gives its first positions while the server goes on; once closed,
    the server stops generating: its count of computed tokens settles far below what was
    asked. Counts are read once settled, before and after: the server publishes them a
    little after it computes, and a loaded machine may deliver the close late; a server
    that ignored it would go on to the whole `asked` (~30 s on this CPU server)."""
    backend = closed_after(VLLMBackend(vllm_url))
    ids = backend.tokenize(LONG_STORY.read_text())[:40]
    asked = 400
    before = computed_tokens_once_settled(vllm_url)
    [chain] = backend.greedy_chains([ids], 3, [asked])
    first = chain[0]
    assert first and chain.known_length() is None  # the path is still being made
    chain.close()
    made = computed_tokens_once_settled(vllm_url) - before - len(ids)
    assert made < asked / 2, made
    assert [c.token_id for c in first] == [c.token_id for c in backend.top_logprobs([ids], 3)[0]]


# -- control tokens and limits -----------------------------------------------------------
def test_control_tokens_come_from_the_tokenizer_and_are_never_offered(vllm):
    # The server's own reading (a story's text never gives control ids: see below).
    chat_markers = vllm._tokenize("<|endoftext|><|im_start|><|im_end|>")
    assert set(chat_markers) <= vllm.special_token_ids
    ids = vllm._tokenize("<|im_start|>user\nSay OK.<|im_end|>\n<|im_start|>assistant\nOK.")
    result = expand(vllm, ids, SearchParams(cutoff=0.05, max_depth=4, auto_stop=False))
    assert result.suggestions and not any("<|" in s.text for s in result.suggestions)


def test_the_token_the_server_stops_on_is_learnt(vllm_url, closed_after):
    backend = closed_after(VLLMBackend(vllm_url))
    backend.special_token_ids = frozenset()  # as against a server without /tokenizer_info
    ids = backend.tokenize("<|im_start|>user\nSay OK.<|im_end|>\n<|im_start|>assistant\nOK.")
    [chain] = backend.greedy_chains([ids], 3, [10])
    end = chain[-1][0].token_id
    assert len(chain) < 10 and end in backend.special_token_ids  # stopped early, on <|im_end|>
    assert backend.detokenize([end]) == "<|im_end|>"


def test_more_logprobs_than_the_server_allows_are_clamped(vllm_url, caplog, closed_after):
    backend = closed_after(VLLMBackend(vllm_url))
    ids = backend.tokenize("Once upon a time,")
    with caplog.at_level(logging.WARNING):
        [answer] = backend.top_logprobs([ids], 30)  # the server runs --max-logprobs 20
    assert len(answer) == 20 and backend.max_logprobs == 20
    assert "allows 20 logprobs (--max-logprobs)" in caplog.text
    caplog.clear()
    [again] = backend.top_logprobs([ids], 30)
    assert again == answer and not caplog.text  # learnt once, asked within it after


def test_an_unknown_model_names_what_is_served(vllm_url):
    with pytest.raises(BackendError, match="'nope' is not served here.*smol"):
        VLLMBackend(vllm_url, model="nope")


# -- failures ----------------------------------------------------------------------------
def test_a_closed_port_is_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(BackendError, match=f"vllm at {url}: cannot connect"):
        VLLMBackend(url)


def test_a_silent_server_times_out_clearly():
    with serving(200, MODELS, delay=3) as url, pytest.raises(BackendError, match="within 0.5 s"):
        VLLMBackend(url, timeout=0.5)


def test_a_server_that_goes_away_is_an_error_not_an_empty_answer(closed_after):
    routes = {"/v1/models": (200, MODELS), **STUB_TOKENIZER}
    with serving(routes=routes) as url:
        backend = closed_after(VLLMBackend(url))
    with pytest.raises(BackendError, match="cannot connect"):
        backend.top_logprobs([[1, 2]], 3)


@pytest.mark.parametrize(
    "status, body, message",
    [
        (500, {"error": {"message": "engine dead"}}, "HTTP 500: engine dead"),
        (400, {"error": {"message": "prompt too long"}}, "HTTP 400: prompt too long"),
        (200, "<html>not json</html>", "not JSON"),
        (200, {"choices": []}, "expected 1 choices"),
        (200, {"choices": ["text"]}, "choices\\[0\\] is 'text', expected an object"),
        (200, {"choices": [{"index": 0, "logprobs": None}]}, "without top_logprobs"),
        (200, {"choices": [{"index": 0, "logprobs": {"top_logprobs": [{"the": -1.0}]}}]},
         "'the' is not 'token_id:N'"),
        (200, {"choices": [{"index": 0, "logprobs": {"top_logprobs": [{"token_id:5": None}]}}]},
         "top_logprobs\\['token_id:5'\\] is None, expected a number"),
    ],
)  # fmt: skip
def test_bad_replies_are_clear_errors(status, body, message, closed_after):
    routes = {"/v1/models": (200, MODELS), **STUB_TOKENIZER, "/v1/completions": (status, body)}
    with serving(routes=routes) as url:
        backend = closed_after(VLLMBackend(url))
        with pytest.raises(BackendError, match=message) as error:
            backend.top_logprobs([[1, 2]], 3)
    assert url in str(error.value)


def test_the_vocabulary_is_learnt_from_the_server_at_start(vllm):
    assert vllm.vocab_size == 49152  # SmolLM2's, from vLLM's refusal of a stop token past it


def test_control_token_names_in_a_story_are_text(vllm):
    text = "The end.<|endoftext|><|im_start|>user\nHi<|im_end|>"
    ids = vllm.tokenize(text)
    assert ids and not set(ids) & vllm.special_token_ids
    assert vllm.detokenize(ids) == text
    assert vllm.tokenize("Once upon a time,") == vllm._tokenize("Once upon a time,")
