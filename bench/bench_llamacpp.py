"""Our llama.cpp client against LLooM v0.3's request pattern, on one server, side by side.

v0.3 sends one `/completion` per beam per token: the prompt is a string (story plus the
token texts so far), `n_predict: 1`, `n_probs`, from LLAMA_PIPELINE_REQUESTS threads
(1 unless set). Ours sends token ids: a depth's contexts as multi-prompt requests over
the server's slots, or greedy chains that answer a beam's whole path in one prompt. All
run the same threshold search with the same parameters; printed: round trips, wall time
and the ratios, on loopback and through a relay adding 20 and 50 ms round trips (a
server across a network; bench/latency.py).

    .venv/bin/python bench/bench_llamacpp.py      (starts its own llama-server)
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backends.base import Candidate  # noqa: E402
from backends.llamacpp import LlamaCppBackend  # noqa: E402
from bench.latency import delayed  # noqa: E402
from bench.lloom_v03 import StringPromptBackend  # noqa: E402
from tests.llama_server import llama_server  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.search import expand  # noqa: E402

V03_PROBS = 10
RTTS_MS = (0, 20, 50)


class LLooMv03(StringPromptBackend):
    """v0.3 against llama.cpp: `/completion` with a string prompt, `n_predict: 1`."""

    def ask(self, prompt: str) -> list[Candidate]:
        body = {"prompt": prompt, "n_predict": 1, "n_probs": V03_PROBS, "cache_prompt": True}
        reply = self.client.post("/completion", body)
        options = reply["completion_probabilities"][0]["top_logprobs"]
        return [
            Candidate(self.intern(o["token"]), o["token"], o["logprob"])
            for o in sorted(options, key=lambda o: -o["logprob"])
            if o["logprob"] > -math.inf
        ]


def main() -> None:
    settings = load_settings()
    params = settings.search_for("SmolLM2-135M-Instruct")
    threads = int(os.environ.get("LLAMA_PIPELINE_REQUESTS", "1"))
    with tempfile.TemporaryDirectory() as tmp, llama_server(Path(tmp) / "log") as server:
        print(f"llama-server at {server}; {params}")
        for rtt in RTTS_MS:
            with delayed(server, rtt) as url:
                compare(url, rtt, settings.starting_stories, params, threads)


def compare(url: str, rtt: float, stories, params, threads: int) -> None:
    ours = LlamaCppBackend(url)
    runs = (
        ("ours", ours, params),
        ("ours, chains", ours, replace(params, use_chains=True)),
        (f"v0.3, {threads} thread(s)", LLooMv03(url, threads), params),
    )
    print(f"\n-- round trip {rtt} ms --")
    print(f"{'story':<24}{'client':<20}{'sugg':>5}{'requests':>10}{'seconds':>9}")
    totals = {name: [0, 0.0] for name, _, _ in runs}
    for story in stories:
        for name, backend, run_params in runs:
            started = time.perf_counter()
            result = expand(backend, backend.tokenize(story), run_params)
            seconds = time.perf_counter() - started
            totals[name][0] += result.stats.forward_calls
            totals[name][1] += seconds
            print(
                f"{story[:22]:<24}{name:<20}{len(result.suggestions):>5}"
                f"{result.stats.forward_calls:>10}{seconds:>9.2f}"
            )
    base_name = runs[-1][0]
    base_trips, base_seconds = totals[base_name]
    for name, (trips, seconds) in totals.items():
        print(f"{name:<20}{trips:>5} requests, {seconds:6.2f} s")
    for name in ("ours", "ours, chains"):
        trips, seconds = totals[name]
        print(
            f"{name} vs {base_name}: 1/{base_trips / trips:.1f} of the round trips, "
            f"{base_seconds / seconds:.1f}x faster"
        )


if __name__ == "__main__":
    main()
