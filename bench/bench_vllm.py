"""Our vLLM client against LLooM v0.3's request pattern, on the same server, side by side.

v0.3 sends one /v1/completions request per beam per token, with the prompt built as a
string (story + token texts), `logprobs: 5`, from a pool of LLAMA_PIPELINE_REQUESTS
threads. We send one request per depth carrying the whole frontier as token ids (and,
for comparison, greedy chains that answer each new beam's whole path at once). All run
the same threshold search with the same parameters; the bench prints round trips, wall
time and ratios, on loopback and through a relay adding a 50 ms round trip (a server
across a network; bench/latency.py).

    .venv/bin/python bench/bench_vllm.py      (starts its own vLLM server; ~1 min to boot)
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backends.base import Candidate  # noqa: E402
from backends.embedded import ensure_embedded_model  # noqa: E402
from backends.vllm import VLLMBackend  # noqa: E402
from bench.latency import delayed  # noqa: E402
from bench.lloom_v03 import StringPromptBackend  # noqa: E402
from tests.vllm_server import SERVED_NAME, vllm_server  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.search import expand  # noqa: E402

V03_LOGPROBS = 5
RTTS_MS = (0, 50)


class LLooMv03(StringPromptBackend):
    """v0.3 against vLLM: `/v1/completions` with a string prompt, `logprobs: 5`."""

    def ask(self, prompt: str) -> list[Candidate]:
        body = {
            "model": SERVED_NAME,
            "prompt": prompt,
            "max_tokens": 1,
            "logprobs": V03_LOGPROBS,
            "temperature": 0,
        }
        top = self.client.post("/v1/completions", body)["choices"][0]["logprobs"]["top_logprobs"]
        ranked = sorted(top[0].items(), key=lambda item: -item[1])
        return [Candidate(self.intern(text), text, lp) for text, lp in ranked]


def main() -> None:
    settings = load_settings()
    params = replace(settings.search_for("SmolLM2-135M-Instruct"), max_suggestions=25)
    model = ensure_embedded_model(settings.cache_dir)
    with tempfile.TemporaryDirectory() as tmp, vllm_server(model, Path(tmp) / "log") as server:
        print(f"vLLM at {server}; {params}")
        for rtt in RTTS_MS:
            with delayed(server, rtt) as url:
                compare(url, rtt, settings.starting_stories, params)


def compare(url: str, rtt: float, stories, params) -> None:
    ours = VLLMBackend(url)
    runs = (
        ("ours", ours, params),
        ("ours, chains", ours, replace(params, use_chains=True)),
        ("v0.3, 1 thread", LLooMv03(url, 1), params),  # v0.3's default
        ("v0.3, 6 threads", LLooMv03(url, 6), params),  # its README's vLLM example
    )
    print(f"\n-- round trip {rtt} ms --")
    print(f"{'story':<24}{'client':<17}{'sugg':>5}{'completions':>12}{'lookups':>8}{'s':>7}")
    totals = {name: [0, 0, 0.0] for name, _, _ in runs}
    for story in stories:
        for name, backend, run_params in runs:
            lookups = ours.text_lookups
            started = time.perf_counter()
            result = expand(backend, backend.tokenize(story), run_params)
            seconds = time.perf_counter() - started
            lookups = ours.text_lookups - lookups if backend is ours else 0
            row = totals[name]
            row[0] += result.stats.forward_calls
            row[1] += lookups
            row[2] += seconds
            print(
                f"{story[:22]:<24}{name:<17}{len(result.suggestions):>5}"
                f"{result.stats.forward_calls:>12}{lookups:>8}{seconds:>7.2f}"
            )
    for name, (calls, lookups, seconds) in totals.items():
        print(f"{name:<17}{calls:>5} completions, {lookups:>4} text lookups, {seconds:6.2f} s")
    calls, _, seconds = totals["ours"]
    for baseline in ("v0.3, 1 thread", "v0.3, 6 threads"):
        their_calls, _, their_seconds = totals[baseline]
        print(
            f"ours vs {baseline}: 1/{their_calls / calls:.1f} of the completion round "
            f"trips, {their_seconds / seconds:.1f}x faster"
        )


if __name__ == "__main__":
    main()
