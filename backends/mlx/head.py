"""Next-token logits after each row's last input only, for the MLX backend's forwards.

mlx-lm's `Model.__call__` runs the vocabulary head on every input position, and MLX does
not prune the positions a caller slices away. A prefill chunk wants the last one: on
SmolLM2-135M the head (576 x 49,152, tied to the embeddings) over a 256-token chunk is
14.5 GFLOP of the chunk's ~75, all but one row of it thrown away. For architectures
whose `__call__` is exactly the body then the head (`PLAIN_HEADS`, read in mlx-lm's
source), the body runs on every position and the head on the last; any other model
(logit soft-capping, scaling, wrappers) runs whole and is sliced, as before.
"""

from __future__ import annotations

import mlx.core as mx

PLAIN_HEADS = frozenset(
    f"mlx_lm.models.{name}" for name in ("llama", "qwen2", "qwen3", "phi3", "olmo2")
)


def last_logits(model, inputs: mx.array, cache) -> mx.array:
    """(rows, vocab) logits after each row's last token of `inputs` (rows, tokens)."""
    if type(model).__module__ not in PLAIN_HEADS:
        return model(inputs, cache=cache)[:, -1, :]
    hidden = model.model(inputs, cache)[:, -1:, :]
    if model.args.tie_word_embeddings:
        return model.model.embed_tokens.as_linear(hidden)[:, -1, :]
    return model.lm_head(hidden)[:, -1, :]
