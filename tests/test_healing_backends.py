"""Token healing against the real model on every backend that runs here: the embedded
model in process (MLX, where a healed depth reads the whole vocabulary), and a real
vLLM and llama.cpp server on the same model (a healed depth reads the candidates one
request gives: vLLM's --max-logprobs, llama.cpp's n_probs)."""

from __future__ import annotations

import json
import math

import pytest

from tests.servers import real_backend
from tests.test_cli import weave
from weave.search.beams import expand
from weave.search.healing import Constraint
from weave.search.params import SearchParams
from weave.search.ramify import RamifyParams, ramify
from weave.search.tree import Suggestion

pytestmark = pytest.mark.slow

EYES = "The old dragon opened its eyes and"
PARAMS = SearchParams(cutoff=0.1, max_depth=8, max_suggestions=10)


@pytest.fixture(scope="module", params=["mlx", "vllm", "llamacpp"])
def backend(request):
    with real_backend(request, request.param) as made:
        yield made


def texts(backend, story: str) -> list[str]:
    return [s.text for s in expand(backend, backend.tokenize(story), PARAMS).suggestions]


def test_a_trailing_space_gives_the_suggestions_without_it(backend):
    # The same suggestions; their order may differ under the words ranking, whose per-word
    # figure the renormalised (healed) probabilities shift by different amounts.
    spaced = texts(backend, EYES + " ")
    assert sorted(spaced) == sorted(t.removeprefix(" ") for t in texts(backend, EYES))
    assert spaced and not any(t.startswith(" ") for t in spaced)  # no doubled space


def test_a_half_typed_word_is_finished(backend):
    result = expand(backend, backend.tokenize("The old dragon opened its ey"), PARAMS)
    assert result.typed == " ey"
    words = [("ey" + s.text).split()[0].strip(".,") for s in result.suggestions]
    assert words and all(word.startswith("eyes") for word in words[:3]), words
    assert any(t.startswith("es and looked") for t in all_texts(result.suggestions))


def test_the_first_healed_token_is_the_model_s_own_choice_among_those_allowed(backend):
    """The allowed candidates' probabilities, renormalised, as the tree holds them: on MLX
    over the whole vocabulary (they sum to one), on a server over those it returned."""
    story = backend.tokenize("The old dragon opened its ey")
    result = expand(backend, story, SearchParams(cutoff=0.0, split_limit=0, max_depth=1))
    first = result.tree.children
    held = Constraint(b" ey")
    assert first and all(held.allows(b"", node.piece) for node in first)
    options = backend.top_logprobs([list(result.context_ids)], backend.heal_k)[0]
    allowed = [c for c in options if held.allows(b"", c.piece)]
    total = sum(math.exp(c.logprob) for c in allowed)
    for node in first:
        raw = next(c for c in allowed if c.token_id == node.token_id)
        assert math.exp(node.logprob) == pytest.approx(math.exp(raw.logprob) / total, rel=1e-4)
    if backend.name == "mlx":  # every token the vocabulary allows was weighed
        assert len(options) == backend.heal_k


def test_the_command_line_shows_the_issue_s_three_stories_as_a_writer_expects():
    shown = {}
    for story in (EYES, EYES + " ", "The old dragon opened its ey"):
        done = weave("expand", "--story", story, "--json")
        assert done.returncode == 0, done.stderr
        shown[story] = json.loads(done.stdout)
    plain, spaced, half = shown.values()
    assert sorted(s["text"].removeprefix(" ") for s in plain["suggestions"]) == sorted(
        s["text"] for s in spaced["suggestions"]
    )
    assert spaced["typed"] == " " and half["typed"] == " ey"
    spaced_texts = all_texts(Suggestion(**s) for s in spaced["suggestions"])
    half_texts = all_texts(Suggestion(**s) for s in half["suggestions"])
    assert any(t.startswith("looked") for t in spaced_texts)
    assert any(t.startswith("es and looked") for t in half_texts)


def all_texts(rows) -> list[str]:
    """Every text the rows show: each row's, and its variants (a hover away)."""
    return [text for row in rows for text in (row.text, *row.variants)]


def test_samples_finish_the_typed_word_on_mlx(mlx_backend):
    story = mlx_backend.tokenize("The old dragon opened its ey")
    result = ramify(mlx_backend, story, RamifyParams(n=6, temperature=1.0, seed=3))
    assert len(result.samples) == 6
    for sample in result.samples:
        assert sample.healed == 1
        spelled = mlx_backend.detokenize(list(result.context_ids[:-1]) + list(sample.token_ids))
        assert spelled.endswith("The old dragon opened its ey" + sample.text)
        assert ("ey" + sample.text)[:3].isalpha()  # the word goes on: no space, no stop


def test_on_mlx_a_healed_depth_is_the_model_s_logits_masked(mlx_backend):
    """Against one plain forward of the model (no cache, no ranking): the softmax of its
    logits over the tokens that agree with " ey" gives the first tokens' probabilities."""
    import mlx.core as mx

    story = mlx_backend.tokenize("The old dragon opened its ey")
    params = SearchParams(cutoff=0.0, split_limit=0, max_depth=1, max_suggestions=40)
    result = expand(mlx_backend, story, params)
    vocabulary = mlx_backend.top_logprobs([list(result.context_ids)], mlx_backend.heal_k)[0]
    allowed = [c.token_id for c in vocabulary if Constraint(b" ey").allows(b"", c.piece)]
    logits = mlx_backend.model(mx.array([list(result.context_ids)]))[0, -1].astype(mx.float32)
    masked = logits[mx.array(allowed)]
    expected = dict(zip(allowed, (masked - mx.logsumexp(masked)).tolist(), strict=True))
    first = result.tree.children
    assert len(first) >= 5
    for node in first:
        assert node.logprob == pytest.approx(expected[node.token_id], abs=1e-4)
