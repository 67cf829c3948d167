"""PyTorch's figures for the MLX bench, on the same converted weights and the same ids.

Run by `bench/bench_mlx.py` with an interpreter that has torch and transformers (the
vLLM test environment has both); reads {"model", "ids", "chunk", "positions",
"first_read", "read_chunk", "repeats"} as JSON on stdin and prints {"chunk": {position:
seconds for a `chunk`-token chunk}, "first_read": seconds for the first `first_read` ids
in `read_chunk`-token chunks} (medians). Imports nothing from the project: it runs elsewhere.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
from transformers import AutoModelForCausalLM, DynamicCache


def read(model, ids: list[int], chunk: int, cache: DynamicCache) -> float:
    """Feed ids[cache length:] in chunks, logits at each chunk's last position only (as
    the MLX backend computes them); return the seconds it took."""
    started = time.perf_counter()
    for start in range(cache.get_seq_length(), len(ids), chunk):
        model(
            torch.tensor([ids[start : start + chunk]]),
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
    return time.perf_counter() - started


def main() -> None:
    job = json.load(sys.stdin)
    model = AutoModelForCausalLM.from_pretrained(job["model"], torch_dtype=torch.float32).eval()
    ids, chunk = job["ids"], job["chunk"]
    costs: dict[int, list[float]] = {p: [] for p in job["positions"]}
    first: list[float] = []
    with torch.inference_mode():
        for _ in range(job["repeats"]):
            first.append(read(model, ids[: job["first_read"]], job["read_chunk"], DynamicCache()))
            for p in costs:
                cache = DynamicCache()
                read(model, ids[:p], chunk, cache)  # the position's KV, not timed
                costs[p].append(read(model, ids[: p + chunk], chunk, cache))
    print(
        json.dumps(
            {
                "chunk": {p: statistics.median(v) for p, v in costs.items()},
                "first_read": statistics.median(first),
            }
        )
    )


if __name__ == "__main__":
    main()
