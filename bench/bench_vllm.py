"""Our vLLM client against LLooM v0.3's request pattern, on the same server, side by side.

v0.3 sends one /v1/completions request per beam per token, with the prompt built as a
string (story + token texts), `logprobs: 5`, from a pool of LLAMA_PIPELINE_REQUESTS
threads. We send one request per depth carrying the whole frontier as token ids (and,
for comparison, greedy chains that answer each new beam's whole path at once). All run
the same threshold search with the same parameters; the bench prints round trips (ours
include the /detokenize look-ups for token text), wall time and ratios, on loopback and
through a relay adding a 50 ms round trip (a server across a network; bench/latency.py).

    .venv/bin/python bench/bench_vllm.py      (starts its own vLLM server; ~1 min to boot)
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass, replace
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


@dataclass
class Total:
    """One client's sums over the stories."""

    round_trips: int = 0  # every HTTP request the search made
    lookups: int = 0  # of which /detokenize for token text
    seconds: float = 0.0


def compare(url: str, rtt: float, stories, params) -> None:
    """Each client runs the same search on every story; ours starts each story with a new
    backend, so its token-text look-ups are paid cold every time (a page's backend keeps
    them and pays each id once)."""
    runs = {
        "ours": lambda: (VLLMBackend(url), params),
        "ours, chains": lambda: (VLLMBackend(url), replace(params, use_chains=True)),
        "v0.3, 1 thread": lambda: (LLooMv03(url, 1), params),  # v0.3's default
        "v0.3, 6 threads": lambda: (LLooMv03(url, 6), params),  # its README's vLLM example
    }
    print(f"\n-- round trip {rtt} ms --")
    print(f"{'story':<24}{'client':<17}{'sugg':>5}{'round trips':>12}{'lookups':>8}{'s':>7}")
    totals = {name: Total() for name in runs}
    for story in stories:
        for name, make in runs.items():
            backend, run_params = make()
            lookups = getattr(backend, "text_lookups", 0)
            started = time.perf_counter()
            result = expand(backend, backend.tokenize(story), run_params)
            seconds = time.perf_counter() - started
            lookups = getattr(backend, "text_lookups", 0) - lookups
            total = totals[name]
            total.round_trips += result.stats.forward_calls
            total.lookups += lookups
            total.seconds += seconds
            print(
                f"{story[:22]:<24}{name:<17}{len(result.suggestions):>5}"
                f"{result.stats.forward_calls:>12}{lookups:>8}{seconds:>7.2f}"
            )
    for name, total in totals.items():
        print(f"{name:<17}{total.round_trips:>5} round trips ({total.lookups} text look-ups), "
              f"{total.seconds:6.2f} s")  # fmt: skip
    for ours in ("ours", "ours, chains"):
        for baseline in ("v0.3, 1 thread", "v0.3, 6 threads"):
            mine, theirs = totals[ours], totals[baseline]
            print(
                f"{ours} vs {baseline}: 1/{theirs.round_trips / mine.round_trips:.1f} of the "
                f"round trips, {theirs.seconds / mine.seconds:.1f}x faster"
            )


if __name__ == "__main__":
    main()
