"""Every model family the MLX backend runs, guarded: tiny random-weight models built from
mlx-lm's own model classes (tests/mlx_models.py), float32 and quantized, searched by the
backend and by a brute-force plain mlx-lm search (every context run whole, no cache, no
batching, mlx-lm's own attention); the same suggestions, log-probs within 5e-4. A family
the backend does not run exactly is refused by name.

Quantized models run dequantized to float32 on CPU (`backends.mlx.weights`): their
reference is mlx-lm's own model on mlx-lm's own dequantization of the same folder; with
no budget they run quantized, against mlx-lm's quantized model.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm import load
from mlx_lm.utils import dequantize_model

from backends.base import Backend, Candidate
from backends.errors import BackendError
from backends.mlx.backend import MLXBackend
from backends.mlx.tokens import token_pieces
from tests.mlx_models import FAMILIES, VOCAB, build_model, tiny_model
from weave.search.beams import expand
from weave.search.params import SearchParams

STORY = "The forest seemed darker than usual, but that did not bother Elis in the least."
TOLERANCE = 5e-4
# multiplier 1: a random tiny model can be sure of its first token (qwen3's: 97 %), the
# tree must still split after it for the two searches to be compared on several beams
PARAMS = SearchParams(cutoff=0.05, multiplier=1.0, max_depth=4, max_suggestions=8)


class PlainSearch(Backend):
    """mlx-lm's model as mlx-lm runs it: each context whole, no cache, float64 softmax; each
    token's bytes as mlx-lm's tokenizer spells them (`token_pieces`), so that a beam knows
    where a character is left half done."""

    name = "plain"

    def __init__(self, model, tokenizer, special: frozenset[int], vocab: int):
        super().__init__()
        self.model, self.tokenizer, self.vocab = model, tokenizer, vocab
        self.special_token_ids = special
        self.pieces = token_pieces(tokenizer)

    @property
    def model_name(self) -> str:
        return "plain"

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def detokenize(self, ids: list[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def top_logprobs(self, contexts: list[list[int]], k: int) -> list[list[Candidate]]:
        answers = []
        for ctx in contexts:
            logits = self.model(mx.array([ctx]))[0, -1, : self.vocab].astype(mx.float32)
            row = np.array(logits, np.float64)
            row -= row.max()
            row -= np.log(np.exp(row).sum())
            order = np.argsort(-row, kind="stable")[:k]
            answers.append(
                [
                    Candidate(int(i), self.detokenize([int(i)]), float(row[i]), self.pieces[i])
                    for i in order
                ]  # fmt: skip
            )
        return answers


def reference(folder, dequantized: bool) -> tuple:
    model, tokenizer = load(str(folder))
    if dequantized:
        dequantize_model(model)
        model.set_dtype(mx.float32)
    return model, tokenizer


def assert_same_search(backend: MLXBackend, plain: PlainSearch) -> None:
    ids = backend.tokenize(STORY)
    ours = expand(backend, ids, PARAMS).suggestions
    theirs = expand(plain, ids, PARAMS).suggestions
    assert len(ours) >= 2
    assert [s.token_ids for s in ours] == [s.token_ids for s in theirs]
    for a, b in zip(ours, theirs, strict=True):
        assert all(t not in backend.special_token_ids for t in a.token_ids)
        delta = max(abs(x - y) for x, y in zip(a.token_logprobs, b.token_logprobs, strict=True))
        assert delta <= TOLERANCE, (a.text, delta)


CASES = [(family, None, True) for family in FAMILIES] + [
    (family, bits, dequantize)
    for family in ("llama", "qwen3")
    for bits in (4, 8)
    for dequantize in (True, False)
]


@pytest.mark.parametrize(
    ("family", "bits", "dequantize"),
    CASES,
    ids=[f"{f}-{b or 32}{'' if d else '-kept'}" for f, b, d in CASES],
)
def test_the_backends_search_is_a_plain_mlx_lm_search(
    family, bits, dequantize, tmp_path, embedded_model_path
):
    folder = tiny_model(tmp_path / family, family, tokenizer_from=embedded_model_path, bits=bits)
    backend = MLXBackend(folder, dequantize_bytes=(1 << 30) if dequantize else 0)
    try:
        assert backend.info.bits == bits
        assert backend.info.dequantized == (bits is not None and dequantize)
        model, tokenizer = reference(folder, dequantized=bits is not None and dequantize)
        plain = PlainSearch(model, tokenizer, backend.special_token_ids, VOCAB)
        assert_same_search(backend, plain)
    finally:
        backend.close()


def test_a_family_the_backend_does_not_run_exactly_is_refused_by_name(
    tmp_path, embedded_model_path
):
    config = dict(n_ctx=64, n_embd=64, n_head=4, n_layer=2, n_positions=64, layer_norm_epsilon=1e-5)
    folder = build_model(
        tmp_path / "gpt2",
        "gpt2",
        {**config, "vocab_size": VOCAB},
        tokenizer_from=embedded_model_path,
    )
    with pytest.raises(BackendError) as caught:
        MLXBackend(folder)
    message = str(caught.value)
    assert "'gpt2'" in message and "not one LLooM runs exactly" in message
    assert "\n" not in message
