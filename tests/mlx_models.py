"""Random-weight mlx-lm model folders, built from mlx-lm's own model classes, for the
tests and the bench: every family the MLX backend runs, tiny, and models of real models'
shapes. Nothing is downloaded and no weights are committed; the tokenizer is the
embedded model's (SmolLM2's 49,152 tokens), or a small one trained here (`small_tokenizer`).

Owns building such folders; what they are checked against is the tests' business.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from backends.mlx import openblas  # noqa: F401  (it must be loaded before mlx)

# isort: split
import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_map
from mlx_lm.utils import _get_classes

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
)
VOCAB = 49152  # the embedded tokenizer's

_TINY = dict(
    hidden_size=64,
    num_hidden_layers=2,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    rms_norm_eps=1e-5,
    vocab_size=VOCAB,
    max_position_embeddings=2048,
    rope_theta=10000.0,
    tie_word_embeddings=True,
)
# Each family's tiny config: the shared one plus what its ModelArgs needs.
FAMILIES: dict[str, dict] = {
    "llama": {},
    "mistral": {"tie_word_embeddings": False},  # mlx-lm runs it as llama
    "qwen2": {},
    "qwen3": {},
    "gemma": {},
    "gemma2": {"query_pre_attn_scalar": 16, "final_logit_softcapping": 300.0},
    "gemma3_text": {"sliding_window": 8, "sliding_window_pattern": 2},
    "phi3": {"tie_word_embeddings": False},
    "olmo2": {},
    "granite": {
        "logits_scaling": 2.0,
        "attention_multiplier": 0.25,
        "embedding_multiplier": 6.0,
        "residual_multiplier": 0.5,
        "attention_bias": False,
        "mlp_bias": False,
    },
}

# Qwen2.5's shapes (its config.json, weights random).
QWEN25 = {
    "0.5B": dict(
        hidden_size=896,
        num_hidden_layers=24,
        intermediate_size=4864,
        num_attention_heads=14,
        num_key_value_heads=2,
        rms_norm_eps=1e-6,
        vocab_size=151936,
        max_position_embeddings=32768,
        rope_theta=1000000.0,
        tie_word_embeddings=True,
    ),
    "1.5B": dict(
        hidden_size=1536,
        num_hidden_layers=28,
        intermediate_size=8960,
        num_attention_heads=12,
        num_key_value_heads=2,
        rms_norm_eps=1e-6,
        vocab_size=151936,
        max_position_embeddings=32768,
        rope_theta=1000000.0,
        tie_word_embeddings=True,
    ),
}


def build_model(
    folder: Path,
    model_type: str,
    config: dict,
    *,
    tokenizer_from: Path,
    bits: int | None = None,
    group_size: int = 64,
    seed: int = 0,
    scale: float = 1.0,
) -> Path:
    """Write an mlx-lm folder of `model_type` with random weights (float32, or quantized
    to `bits` as mlx-lm's converter does) and the tokenizer of `tokenizer_from`.
    `scale` multiplies the random weights (sharper or flatter next-token distributions)."""
    config = {"model_type": model_type, **config}
    model_class, args_class = _get_classes(config)
    mx.random.seed(seed)
    model = model_class(args_class.from_dict(config))
    if scale != 1.0:
        model.update(tree_map(lambda p: p * scale, model.parameters()))
    if bits is not None:
        nn.quantize(
            model,
            group_size,
            bits,
            class_predicate=lambda _, m: (
                hasattr(m, "to_quantized") and m.weight.shape[-1] % group_size == 0
            ),
        )
        config["quantization"] = {"group_size": group_size, "bits": bits}
    folder.mkdir(parents=True, exist_ok=True)
    weights = dict(tree_flatten(model.parameters()))
    mx.eval(weights)
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    for name in TOKENIZER_FILES:
        if (tokenizer_from / name).exists():
            shutil.copy(tokenizer_from / name, folder / name)
    return folder


def tiny_model(
    folder: Path, family: str, *, tokenizer_from: Path, bits: int | None = None, vocab: int = VOCAB
) -> Path:
    """A two-layer model of `family` (a key of FAMILIES) for a tokenizer of `vocab` tokens;
    weights scaled up so that its next-token distributions have a few likely tokens, as a
    trained model's do."""
    return build_model(
        folder,
        family,
        {**_TINY, **FAMILIES[family], "vocab_size": vocab},
        tokenizer_from=tokenizer_from,
        bits=bits,
        group_size=32 if bits else 64,
        scale=4.0,
    )


def small_tokenizer(folder: Path, text: str, vocab: int = 400) -> Path:
    """A byte-level BPE tokenizer of `vocab` tokens trained on `text` (its ids mean other
    pieces than the embedded tokenizer's), written as a Hugging Face fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([text], trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder
