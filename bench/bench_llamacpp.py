"""Our llama.cpp client against LLooM v0.3's request pattern, on one server, side by side.

v0.3 sends one `/completion` per beam per token: the prompt is a string (story plus the
token texts so far), `n_predict: 1`, `n_probs`, from one thread (its default). Ours sends
token ids: greedy chains stopped where the beam stops, each prompt pinned to the slot
holding its parent's path (backends/llamacpp.py). Both run the same threshold search with
the same parameters. Printed per story:
- the tokens the server evaluated (its own `timings.prompt_n + predicted_n`, summed) on a
  freshly started server, against the least a search can cost (the story once plus one
  token per tree node), and the round trips;
- wall time, the median of REPEATS runs taken in turn, on loopback and through a relay
  adding a 50 ms round trip (a server across a network; bench/latency.py).

    .venv/bin/python bench/bench_llamacpp.py      (starts its own llama-servers, -np 4)
"""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backends.base import Candidate  # noqa: E402
from backends.llamacpp import LlamaCppBackend  # noqa: E402
from bench.latency import delayed  # noqa: E402
from bench.lloom_v03 import StringPromptBackend  # noqa: E402
from bench.timing import median_search_seconds  # noqa: E402
from tests.llama_server import llama_server  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.search import expand  # noqa: E402

V03_PROBS = 10
RTTS_MS = (0, 50)
REPEATS = 3


class LLooMv03(StringPromptBackend):
    """v0.3 against llama.cpp: `/completion` with a string prompt, `n_predict: 1`."""

    tokens = 0  # what the server reports it evaluated

    def ask(self, prompt: str) -> list[Candidate]:
        body = {"prompt": prompt, "n_predict": 1, "n_probs": V03_PROBS, "cache_prompt": True}
        reply = self.client.post("/completion", body)
        timings = reply.get("timings") or {}
        self.tokens += timings.get("prompt_n", 0) + timings.get("predicted_n", 0)
        options = reply["completion_probabilities"][0]["top_logprobs"]
        return [
            Candidate(self.intern(o["token"]), o["token"], o["logprob"])
            for o in sorted(options, key=lambda o: -o["logprob"])
            if o["logprob"] > -math.inf
        ]


CLIENTS = {
    "ours": LlamaCppBackend,
    "v0.3, 1 thread": lambda url: LLooMv03(url, 1),
}


def main() -> None:
    settings = load_settings()
    params = settings.search_for("SmolLM2-135M-Instruct")
    stories = settings.starting_stories
    print(f"{params}\n\n-- tokens the server evaluated, each search on a fresh server --")
    print(
        f"{'story':<24}{'client':<16}{'sugg':>5}{'requests':>9}{'tokens':>8}{'least':>7}{'ratio':>7}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for story in stories:
            for name, make in CLIENTS.items():
                with llama_server(Path(tmp) / "log") as url:
                    tokens_row(story, name, make(url), params)
        for rtt in RTTS_MS:
            with llama_server(Path(tmp) / "log") as server, delayed(server, rtt) as url:
                wall_times(url, rtt, stories, params)


def tokens_row(story: str, name: str, backend, params) -> None:
    result = expand(backend, backend.tokenize(story), params)
    spent = backend.tokens if isinstance(backend, LLooMv03) else result.stats.model_tokens
    least = len(result.context_ids) + result.tree.descendants() if name == "ours" else None
    least_text = f"{least:>7}{spent / least:>6.2f}x" if least else ""
    print(
        f"{story[:22]:<24}{name:<16}{len(result.suggestions):>5}"
        f"{result.stats.forward_calls:>9}{spent:>8}{least_text}"
    )


def wall_times(url: str, rtt: float, stories, params) -> None:
    print(f"\n-- wall time, median of {REPEATS}, round trip {rtt} ms --")
    totals = dict.fromkeys(CLIENTS, 0.0)
    for story in stories:
        medians = median_search_seconds(CLIENTS, url, story, params, REPEATS)
        for name, median in medians.items():
            totals[name] += median
        cells = "  ".join(f"{name} {median:5.2f} s" for name, median in medians.items())
        print(f"{story[:22]:<24}{cells}  ({medians['v0.3, 1 thread'] / medians['ours']:.1f}x)")
    print(f"all stories: ours {totals['ours']:.2f} s, v0.3 {totals['v0.3, 1 thread']:.2f} s: "
          f"{totals['v0.3, 1 thread'] / totals['ours']:.1f}x faster")  # fmt: skip


if __name__ == "__main__":
    main()
