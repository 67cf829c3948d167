"""The embedded model's conversion, GGUF to a float32 mlx-lm folder, against a reference.

tests/fixtures/smollm2-next-token-reference.json holds, for ten prompts, the token ids
and the top-10 next tokens with log-probs from an independent float32 conversion with a
plain full forward. A wrong rotary permutation, rope_theta or dequantisation still runs,
and only numbers like these catch it.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import pytest

from backends.embedded import ensure_embedded_model

REFERENCE = json.loads(
    (Path(__file__).parent / "fixtures" / "smollm2-next-token-reference.json").read_text()
)
CASES = REFERENCE["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["prompt"][:20] for c in CASES])
def test_next_tokens_match_the_reference(mlx_backend, case):
    ids = mlx_backend.tokenize(case["prompt"])
    assert ids == case["token_ids"]
    logits = mlx_backend._worker.submit(_forward, mlx_backend.model, ids).result()
    logprobs = logits - mx.logsumexp(logits)
    top = mx.argsort(-logprobs)[:10].tolist()
    assert top == [t["id"] for t in case["top10"]]
    worst = max(abs(logprobs[t["id"]].item() - t["logprob"]) for t in case["top10"])
    assert worst <= 1e-3, worst  # measured: 3e-5


def _forward(model, ids):
    logits = model(mx.array([ids]))[0, -1].astype(mx.float32)
    mx.eval(logits)
    return logits


def test_the_folder_is_a_plain_hugging_face_llama(embedded_model_path):
    config = json.loads((embedded_model_path / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["torch_dtype"] == "float32"
    assert config["rope_theta"] == 100000.0  # mlx-lm's default of 10000 would be silently wrong
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_model_path))
    for case in CASES:
        assert tokenizer.encode(case["prompt"], add_special_tokens=False) == case["token_ids"]
    assert "<|im_start|>" in tokenizer.chat_template


def test_conversion_happens_once(embedded_model_path, settings):
    weights = embedded_model_path / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert ensure_embedded_model(settings.cache_dir) == embedded_model_path
    assert weights.stat().st_mtime_ns == before


def test_conversion_is_atomic_and_complete(tmp_path):
    folder = ensure_embedded_model(tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json", "generation_config.json", "model.safetensors",
        "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json",
    ]  # fmt: skip
    assert [p.name for p in (tmp_path / "models").iterdir()] == [folder.name]  # no leftovers
