"""The MLX backend on the real embedded model: the fragment tree against plain forwards."""

from __future__ import annotations

import gc
import sys
import threading
import weakref
from contextlib import closing

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models import activations

from backends.errors import BackendError
from backends.mlx import attention as attention_module
from backends.mlx.backend import MLXBackend, give_memory_back
from backends.mlx.cpu_routes import ROUTED
from backends.mlx.head import PLAIN_HEADS, last_logits
from backends.mlx.swiglu import swiglu_in_place
from tests.memory import STATUS, status_kib
from weave.search.beams import expand
from weave.search.params import SearchParams

STORY = "The forest seemed darker then usual, but that did not bother Elis in the least."
TOLERANCE = 1e-3


def plain_top(backend: MLXBackend, ids: list[int], k: int) -> list[tuple[int, float]]:
    """A full forward of the ids with no cache at all, its log-softmax in float64 (MLX's
    own `logsumexp` on CPU is off by up to 8e-5 over this vocabulary): the reference."""
    logits = np.array(backend.model(mx.array([ids]))[0, -1].astype(mx.float32), np.float64)
    logprobs = logits - logits.max()
    logprobs -= np.log(np.exp(logprobs).sum())
    order = np.argsort(-logprobs, kind="stable")[:k]
    return list(zip(order.tolist(), logprobs[order].tolist(), strict=True))


def assert_same(candidates, reference, tolerance=TOLERANCE):
    assert [c.token_id for c in candidates] == [i for i, _ in reference]
    delta = max(abs(c.logprob - lp) for c, (_, lp) in zip(candidates, reference, strict=True))
    assert delta <= tolerance, delta


def test_fragment_tree_equals_a_plain_forward_along_a_whole_search(fresh_mlx_backend):
    backend = fresh_mlx_backend
    ids = backend.tokenize(STORY)
    result = expand(backend, ids, SearchParams(cutoff=0.1, max_depth=6, max_suggestions=12))
    assert len(result.suggestions) > 3
    for suggestion in result.suggestions[:6]:
        context = ids + list(suggestion.token_ids[:-1])
        [cached] = backend.top_logprobs([context], 5)
        assert_same(cached, plain_top(backend, context, 5))


def test_rows_attention_equals_a_plain_forward_at_every_position_and_batch_shape(
    embedded_model_path, closed_after
):
    """The BLAS/numpy attention against mlx-lm's own, run plain (no cache): chunks read at
    several positions, beams sharing the story, and rows of different lengths (padded)."""
    backend = closed_after(MLXBackend(embedded_model_path, prefill_chunk=64))
    ids = backend.tokenize(STORY * 12)
    for end in (40, 94, 230):  # 40 from scratch, then chunks after 40 and 94 cached tokens
        [answer] = backend.top_logprobs([ids[:end]], 5)
        assert_same(answer, plain_top(backend, ids[:end], 5), tolerance=1e-4)
    beams = [ids[:230] + [c.token_id] for c in answer]
    uneven = [ids[:40] + [260], ids[:94] + [2306]]
    for contexts in (beams, uneven):
        before = backend.stats.snapshot()
        answers = backend.top_logprobs(contexts, 5)
        assert (backend.stats.snapshot() - before).forward_calls == 1
        for ctx, got in zip(contexts, answers, strict=True):
            assert_same(got, plain_top(backend, ctx, 5), tolerance=1e-4)
        if contexts is beams:  # the story's chunks, shared by the beams, joined into one
            assert len(backend.tree.match(ids[:230]).steps) == 1


def test_the_head_runs_on_each_rows_last_position_only_and_gives_the_same_logits(mlx_backend):
    """The embedded model takes the short path (its head on one position per row), and
    that path's logits are the plain forward's last row."""
    model = mlx_backend.model
    assert type(model).__module__ in PLAIN_HEADS
    inputs = mx.array([mlx_backend.tokenize(STORY)[:12], mlx_backend.tokenize(STORY)[4:16]])
    short = last_logits(model, inputs, None)
    whole = model(inputs)[:, -1, :]
    assert short.shape == whole.shape
    assert mx.max(mx.abs(short - whole)).item() <= 1e-4


def test_swiglu_on_numpy_equals_mlx_lms_at_the_extremes():
    """silu(gate) * up in place on numpy against mlx-lm's compiled one, over gates from
    -200 (exp(-gate) overflows: silu's limit 0, no NaN) to 200."""
    gate = mx.concatenate([mx.linspace(-200, 200, 4001), mx.random.normal((2047,)) * 4])
    up = mx.random.normal(gate.shape)
    expected = activations.swiglu(gate, up)
    gates = np.array(gate)
    swiglu_in_place(gates, np.array(up))
    assert np.isfinite(gates).all()
    assert np.allclose(gates, np.array(expected), rtol=1e-6, atol=1e-6)


def test_the_model_runs_swiglu_on_numpy_and_keeps_its_logits(mlx_backend, monkeypatch):
    """The embedded model's module calls the numpy SwiGLU (in place in the gate's buffer);
    its logits equal those with mlx-lm's own SwiGLU."""
    module = sys.modules[type(mlx_backend.model).__module__]
    assert getattr(module.swiglu, ROUTED, False)
    inputs = mx.array([mlx_backend.tokenize(STORY)[:12], mlx_backend.tokenize(STORY)[4:16]])
    ours = mlx_backend.model(inputs)
    monkeypatch.setattr(module, "swiglu", activations.swiglu)
    theirs = mlx_backend.model(inputs)
    assert mx.max(mx.abs(ours - theirs)).item() <= 1e-4


def test_the_storys_kv_reaches_attention_as_views_of_the_tree_not_copies(
    fresh_mlx_backend, monkeypatch
):
    """Every layer's shared prefix is read where the tree holds it: a copy per layer and
    forward would cost a long story's whole KV at every depth (MLX copies on `a[i]`)."""
    backend = fresh_mlx_backend
    ids = backend.tokenize(STORY * 4)
    backend.top_logprobs([ids], 3)
    seen = []

    def spy(queries, keys, values, cache, scale):
        seen.extend(cache.prefixes)
        return original(queries, keys, values, cache, scale)

    original = attention_module.attention
    monkeypatch.setattr(attention_module, "attention", spy)
    backend.top_logprobs([ids + [260], ids + [2306], ids + [1000]], 3)
    [(node, _)] = backend.tree.match(ids).steps
    held = [np.asarray(node.keys), np.asarray(node.values)]
    assert len(seen) == backend.model.args.num_hidden_layers
    for prefix in seen:
        for segment in prefix.keys + prefix.values:
            address = np.asarray(segment).__array_interface__["data"][0]
            assert any(
                a.__array_interface__["data"][0]
                <= address
                < a.__array_interface__["data"][0] + a.nbytes
                for a in held
            ), "a prefix segment was copied"


def test_batched_step_equals_one_at_a_time(embedded_model_path, closed_after):
    batched, single = (closed_after(MLXBackend(embedded_model_path)) for _ in range(2))
    story = batched.tokenize("Once upon a time,")
    first = [c.token_id for c in batched.top_logprobs([story], 4)[0]]
    single.top_logprobs([story], 4)
    contexts = [story + [t] for t in first]
    together = batched.top_logprobs(contexts, 5)
    alone = [single.top_logprobs([ctx], 5)[0] for ctx in contexts]
    for a, b in zip(together, alone, strict=True):
        assert_same(a, [(c.token_id, c.logprob) for c in b], tolerance=1e-4)
    assert batched.stats.snapshot().forward_calls == 2
    assert single.stats.snapshot().forward_calls == 1 + len(contexts)


def test_asked_ids_are_weighed_exactly_in_the_forward_that_ranks_the_top_k(fresh_mlx_backend):
    backend = fresh_mlx_backend
    story = backend.tokenize("Once upon a time, there was a")
    whole = dict(plain_top(backend, story, backend.net.vocab))
    rare = sorted(whole, key=whole.get)[:3]  # the model's three least likely tokens
    asked = [rare + [whole_top := max(whole, key=whole.get)]]
    before = backend.stats.snapshot()
    [answer] = backend.top_logprobs_also([story], 5, asked)
    assert (backend.stats.snapshot() - before).forward_calls == 1  # the story's one prefill
    assert_same(answer[:5], plain_top(backend, story, 5))
    assert [c.token_id for c in answer[5:]] == sorted(rare, key=lambda i: -whole[i])
    assert all(abs(c.logprob - whole[c.token_id]) <= TOLERANCE for c in answer)
    assert whole_top not in [c.token_id for c in answer[5:]]  # listed once, in the top
    # The tree keeps the top k: ids among them are answered from it, others by running
    # the story's last token again (no prefill).
    before = backend.stats.snapshot()
    assert backend.top_logprobs_also([story], 5, [[whole_top]]) == [answer[:5]]
    assert (backend.stats.snapshot() - before).forward_calls == 0
    other = sorted(whole, key=whole.get)[3:5]
    [again] = backend.top_logprobs_also([story], 5, [other])
    used = backend.stats.snapshot() - before
    assert used.forward_calls == 1 and used.model_tokens == 1 and used.prefill_tokens == 0
    assert_same(again[:5], plain_top(backend, story, 5))
    assert {c.token_id for c in again[5:]} == set(other)


def test_rows_of_different_lengths_share_one_batch(fresh_mlx_backend):
    backend = fresh_mlx_backend
    short = backend.tokenize("Once upon a time,")
    long = backend.tokenize(STORY)
    backend.top_logprobs([short], 2)
    backend.top_logprobs([long], 2)
    contexts = [short + [260], long + [2306]]  # ' the', ' She'
    before = backend.stats.snapshot()
    answers = backend.top_logprobs(contexts, 5)
    assert (backend.stats.snapshot() - before).forward_calls == 1  # one left-padded batch
    for ctx, answer in zip(contexts, answers, strict=True):
        assert_same(answer, plain_top(backend, ctx, 5))


def test_accepting_a_suggestion_costs_no_prefill(fresh_mlx_backend):
    backend = fresh_mlx_backend
    params = SearchParams(cutoff=0.1, max_depth=5, max_suggestions=8)
    story = backend.tokenize("Once upon a time,")
    first = expand(backend, story, params)
    assert first.stats.prefill_tokens == len(story)
    story += next(s for s in first.suggestions if s.exact).token_ids  # the beam's own ids
    second = expand(backend, story, params)
    assert second.stats.prefill_tokens == 0
    again = expand(backend, story, params)  # "Suggest again"
    assert again.stats.prefill_tokens == 0
    assert [s.text for s in again.suggestions] == [s.text for s in second.suggestions]


def test_an_edited_story_prefills_only_its_new_tail(fresh_mlx_backend):
    backend = fresh_mlx_backend
    base = backend.tokenize(STORY)
    backend.top_logprobs([base], 3)
    edited = backend.tokenize(STORY + " She walked on and on")
    assert edited[: len(base)] == base
    before = backend.stats.snapshot()
    [answer] = backend.top_logprobs([edited], 5)
    assert (backend.stats.snapshot() - before).prefill_tokens == len(edited) - len(base)
    assert_same(answer, plain_top(backend, edited, 5))
    # An edit in the middle reuses the prefix up to the change.
    middle = backend.tokenize(STORY.replace("Elis", "Maria"))
    before = backend.stats.snapshot()
    [answer] = backend.top_logprobs([middle], 5)
    common = next(i for i, (a, b) in enumerate(zip(base, middle, strict=False)) if a != b)
    assert (backend.stats.snapshot() - before).prefill_tokens == len(middle) - common
    assert_same(answer, plain_top(backend, middle, 5))


def test_memory_is_capped_and_results_stay_right(embedded_model_path, closed_after):
    backend = closed_after(
        MLXBackend(embedded_model_path, kv_cache_bytes=2 << 20)
    )  # ~45 tokens' KV
    ids = backend.tokenize(STORY)
    result = expand(backend, ids, SearchParams(cutoff=0.1, max_depth=4, max_suggestions=10))
    assert 0 < backend.cache_bytes <= backend.cache_cap_bytes == 2 << 20
    context = ids + list(result.suggestions[0].token_ids[:-1])
    assert_same(backend.top_logprobs([context], 5)[0], plain_top(backend, context, 5))


def test_long_story_prefills_in_chunks(embedded_model_path, closed_after):
    backend = closed_after(MLXBackend(embedded_model_path, prefill_chunk=16))
    ids = backend.tokenize(STORY * 3)
    [answer] = backend.top_logprobs([ids], 5)
    assert backend.stats.snapshot().forward_calls == -(-len(ids) // 16)
    assert_same(answer, plain_top(backend, ids, 5))


def test_a_long_story_is_read_ahead_with_progress(embedded_model_path, closed_after):
    backend = closed_after(MLXBackend(embedded_model_path, prefill_chunk=16))
    ids = backend.tokenize(STORY * 3)
    reports = []
    backend.read_ahead(ids, 5, lambda read, tokens: reports.append((read, tokens)))
    assert reports == [(min(n, len(ids)), len(ids)) for n in range(16, len(ids) + 16, 16)]
    assert backend.stats.snapshot().prefill_tokens == len(ids)
    before = backend.stats.snapshot()
    [answer] = backend.top_logprobs([ids], 5)
    assert (backend.stats.snapshot() - before).model_tokens == 0  # read already
    assert_same(answer, plain_top(backend, ids, 5))
    backend.read_ahead(ids, 5, reports.append)  # all read: nothing to do, nothing reported
    assert len(reports) == -(-len(ids) // 16)


def test_concurrent_callers_get_their_own_answers(mlx_backend):
    stories = ["Once upon a time,", "In the age before man,", STORY, "She opened the door"]
    expected = {s: mlx_backend.top_logprobs([mlx_backend.tokenize(s)], 5)[0] for s in stories}
    got, errors = {}, []

    def ask(story):
        try:
            ids = mlx_backend.tokenize(story)
            for _ in range(3):
                got[story] = mlx_backend.top_logprobs([ids, ids + [260]], 5)[0]
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=ask, args=(s,)) for s in stories]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert got == expected


def test_tokens_carry_their_bytes_so_split_characters_join(mlx_backend):
    ids = mlx_backend.tokenize("A dragon 🐉 slept.")
    pieces = b"".join(mlx_backend.net.pieces[i] for i in ids)
    assert pieces.decode("utf-8") == "A dragon 🐉 slept."
    assert mlx_backend.detokenize(ids) == "A dragon 🐉 slept."


def test_empty_context_is_a_backend_error(mlx_backend):
    with pytest.raises(BackendError, match="empty"):
        mlx_backend.top_logprobs([[]], 3)


def test_closing_twice_is_harmless(embedded_model_path):
    backend = MLXBackend(embedded_model_path)
    backend.close()
    backend.close()


@pytest.mark.skipif(not STATUS.exists(), reason="reads Linux's /proc")
def test_closing_gives_the_memory_back_though_the_backend_is_still_held(embedded_model_path):
    """close() lets go of the weights and the KV and hands their memory back to the system
    at once, though something still holds the backend (a page session's thread after a
    model switch, a test's fixture): a process that builds one backend after another
    stays the size of one (issue 40: a test run grew by ~500 MB a backend)."""
    give_memory_back()
    before = status_kib("VmRSS") << 10
    backend = MLXBackend(embedded_model_path)
    try:
        expand(backend, backend.tokenize(STORY * 10), SearchParams(cutoff=0.1, max_depth=4))
        assert (status_kib("VmRSS") << 10) - before > 400 << 20  # float32 weights, loaded
    finally:
        backend.close()
    assert (status_kib("VmRSS") << 10) - before < 100 << 20


def test_a_closed_backend_answers_that_it_is_closed_and_does_not_hang(embedded_model_path):
    """A page session still searching on a model just switched away from (`SharedBackend`)
    gets the "closed" error: its request used to wait forever for a worker gone."""
    backend = MLXBackend(embedded_model_path)
    backend.close()
    asked: list[BaseException] = []

    def ask() -> None:
        try:
            backend.top_logprobs([backend.tokenize(STORY)], 3)
        except BaseException as e:  # surfaced below
            asked.append(e)

    caller = threading.Thread(target=ask, daemon=True)  # a hung one must not hold the run
    caller.start()
    caller.join(30)
    assert not caller.is_alive(), "the request to a closed backend never came back"
    [error] = asked
    assert isinstance(error, BackendError) and "closed" in str(error)


def test_text_the_tokenizer_refuses_is_a_backend_error(mlx_backend):
    with pytest.raises(BackendError, match="cannot tokenize"):
        mlx_backend.tokenize("lone \ud800 surrogate")


def test_control_token_names_in_a_story_are_text(mlx_backend):
    text = "The end.<|endoftext|><|im_start|>user\nHi<|im_end|>"
    ids = mlx_backend.tokenize(text)
    assert not set(ids) & mlx_backend.special_token_ids
    assert mlx_backend.detokenize(ids) == text


def test_writers_searching_at_once_get_what_each_gets_alone(embedded_model_path, closed_after):
    """Four sessions on one backend, two stories sharing a prefix, one other, and a long
    story read ahead meanwhile: joined batches, the same suggestions as alone."""
    stories = [STORY, STORY + " She walked on", "Once upon a time,", "In the age before man,"]
    params = SearchParams(cutoff=0.1, max_depth=5, max_suggestions=10)
    alone = {}
    with closing(MLXBackend(embedded_model_path)) as alone_backend:
        for story in stories:
            result = expand(alone_backend, alone_backend.tokenize(story), params)
            alone[story] = [(s.token_ids, s.text) for s in result.suggestions]
    backend = closed_after(MLXBackend(embedded_model_path, prefill_chunk=32))
    long = backend.tokenize(STORY * 6)
    together, errors = {}, []

    def search(story):
        try:
            result = expand(backend, backend.tokenize(story), params)
            together[story] = [(s.token_ids, s.text) for s in result.suggestions]
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=search, args=(s,)) for s in stories]
    reader = threading.Thread(target=backend.read_ahead, args=(long, 5, lambda *_: None))
    for t in [reader, *threads]:
        t.start()
    for t in [reader, *threads]:
        t.join()
    assert not errors
    assert together == alone
    assert_same(backend.top_logprobs([long], 5)[0], plain_top(backend, long, 5))


def test_a_read_or_a_search_no_longer_wanted_stops_between_chunks_and_depths(
    embedded_model_path, closed_after
):
    from backends.base import Cancelled

    backend = closed_after(MLXBackend(embedded_model_path, prefill_chunk=16))
    ids = backend.tokenize(STORY * 3)
    reports = []
    with backend.cancellable(lambda: len(reports) < 2), pytest.raises(Cancelled):
        backend.read_ahead(ids, 5, lambda read, tokens: reports.append(read))
    assert reports == [16, 32]
    assert backend.stats.snapshot().prefill_tokens == 32  # nothing read after the second

    asked = []  # wanted() runs once per depth's request: the third is not wanted

    def wanted():
        asked.append(True)
        return len(asked) <= 2

    story = backend.tokenize("Once upon a time,")
    params = SearchParams(cutoff=0.1, max_depth=6, max_suggestions=10)
    before = backend.stats.snapshot()
    with backend.cancellable(wanted), pytest.raises(Cancelled):
        expand(backend, story, params)
    assert (backend.stats.snapshot() - before).forward_calls == 2
    assert len(expand(backend, story, params).suggestions) > 1  # outside: runs as ever


@pytest.mark.slow
def test_an_eight_thousand_token_story_stays_within_the_cap(embedded_model_path, closed_after):
    """The cap holds while an 8,000-token story (near the model's 8,192-token window: a
    search is sent no more, `weave.story.context` cuts) is read and searched, with another
    story's fragments in the tree to make room from."""
    with closing(MLXBackend(embedded_model_path)) as probe:
        probe.top_logprobs([probe.tokenize(STORY)], 1)
        per_token = probe.cache_bytes // len(probe.tokenize(STORY))
    cap = per_token * 8_100  # the story and a hundred tokens more
    backend = closed_after(MLXBackend(embedded_model_path, kv_cache_bytes=cap, prefill_chunk=512))
    params = SearchParams(cutoff=0.1, max_depth=4, max_suggestions=10)
    expand(backend, backend.tokenize(STORY * 20), params)  # ~400 tokens to make room from
    story = backend.tokenize(STORY * 600)[:8_000]
    held = []
    backend.read_ahead(story, 5, lambda read, tokens: held.append(backend.cache_bytes))
    assert held and max(held) <= cap
    result = expand(backend, story, params)
    assert result.suggestions  # (a story of one passage repeated: the model is sure of it)
    assert backend.cache_bytes <= cap


def test_a_search_repeated_after_its_story_was_joined_needs_no_forward(
    embedded_model_path, closed_after
):
    """Joining a story's chunks (and a beam's chain) into one fragment keeps the candidates
    every merged node held: the same search again, or one at a chunk's end, is all cached."""
    backend = closed_after(MLXBackend(embedded_model_path, prefill_chunk=16))
    story = backend.tokenize(STORY * 2)
    backend.read_ahead(story, 5, lambda *_: None)  # chunk by chunk, candidates at each end
    chunks = [node for node, _ in backend.tree.match(story).steps]
    assert len(chunks) == -(-len(story) // 16)  # each chunk read where it lies, not copied
    first_chunk = weakref.ref(chunks[0])
    del chunks
    params = SearchParams(cutoff=0.1, max_depth=5, max_suggestions=10)
    gc.disable()  # the replaced chunks must go by reference counting alone
    try:
        first = expand(backend, story, params)
        assert first_chunk() is None  # freed with its KV: no link keeps it
    finally:
        gc.enable()
    assert len(backend.tree.match(story).steps) == 1  # the chunks were joined
    again = expand(backend, story, params)
    assert again.stats.forward_calls == 0 and again.suggestions == first.suggestions
    before = backend.stats.snapshot()
    assert_same(backend.top_logprobs([story[:32]], 5)[0], plain_top(backend, story[:32], 5))
    assert (backend.stats.snapshot() - before).forward_calls == 0  # a chunk's end, inside
