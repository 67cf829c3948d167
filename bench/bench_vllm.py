"""Our vLLM client against LLooM v0.3's request pattern, on the same server, side by side.

v0.3 sends one /v1/completions request per beam per token, with the prompt built as a
string (story + token texts), `logprobs: 5`, from a pool of threads (1, its default, and
6, its README's vLLM example). Ours sends token ids: a depth's new beams in one request,
each a greedy chain stopped where the beam stops, streamed, so the search goes on while
the server makes the older chains' next positions (backends/vllm_chains.py). All run the same
threshold search with the same parameters, on the starting stories and on three passages
of over 200 tokens from bench/long_story.txt. Printed per story:
- the tokens the server computed (its /metrics: prompt tokens - prefix-cache hits +
  generated tokens) against the least a search can cost (the story once plus one token
  per tree node), the server's forward passes (steps: each costs a fixed time besides
  its tokens') and the round trips (ours include the /detokenize look-ups for token text
  made during the search, not those a backend makes ahead on its own thread from its
  creation: the page creates a backend once, the bench one per run, just before timing
  it, so they overlap the timed search). Ours runs first on each story of a fresh
  server, so its story is not cached beforehand; v0.3 then finds the story's blocks
  cached (in its favour);
- wall time, the median of REPEATS runs taken in turn, on loopback and through a relay
  adding a 50 ms round trip (bench/latency.py).

    .venv/bin/python bench/bench_vllm.py      (starts its own vLLM server; ~1 min to boot)
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backends.base import Candidate  # noqa: E402
from backends.embedded import ensure_embedded_model  # noqa: E402
from backends.vllm import VLLMBackend  # noqa: E402
from bench.latency import delayed  # noqa: E402
from bench.lloom_v03 import StringPromptBackend  # noqa: E402
from bench.timing import median_search_seconds  # noqa: E402
from tests.vllm_server import SERVED_NAME, computed_tokens, engine_steps, vllm_server  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.search.beams import expand  # noqa: E402

V03_LOGPROBS = 5
RTTS_MS = (0, 50)
REPEATS = 3
LONG_STORY = Path(__file__).with_name("long_story.txt")
PASSAGES = ((0, 210), (300, 230), (600, 250))  # (first token, tokens) of the long story


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


CLIENTS = {
    "ours": VLLMBackend,
    "v0.3, 1 thread": lambda url: LLooMv03(url, 1),
    "v0.3, 6 threads": lambda url: LLooMv03(url, 6),
}


def main() -> None:
    settings = load_settings()
    params = replace(settings.search_for("SmolLM2-135M-Instruct"), max_suggestions=25)
    model = ensure_embedded_model(settings.cache_dir)
    with tempfile.TemporaryDirectory() as tmp, vllm_server(model, Path(tmp) / "log") as server:
        print(f"vLLM at {server}; {params}")
        stories = stories_for(server, settings.starting_stories)
        print("\n-- tokens the server computed --")
        print(f"{'story':<16}{'client':<17}{'sugg':>5}{'round trips':>12}{'steps':>6}"
              f"{'tokens':>8}{'least':>7}{'ratio':>7}")  # fmt: skip
        for label, story in stories:
            for name, make in CLIENTS.items():
                tokens_row(server, label, story, name, make(server), params)
        for rtt in RTTS_MS:
            with delayed(server, rtt) as url:
                wall_times(url, rtt, stories, params)


def stories_for(url: str, starting: list[str]) -> list[tuple[str, str]]:
    """The starting stories, and passages of the long story cut at token boundaries."""
    backend = VLLMBackend(url)
    ids = backend.tokenize(LONG_STORY.read_text())
    passages = [backend.detokenize(ids[start : start + n]) for start, n in PASSAGES]
    labelled = [(story[:14], story) for story in starting]
    labelled += [(f"long {len(backend.tokenize(p))} tok", p) for p in passages]
    backend.close()
    return labelled


def tokens_row(server: str, label: str, story: str, name: str, backend, params) -> None:
    before, steps_before = computed_tokens(server), engine_steps(server)
    result = expand(backend, backend.tokenize(story), params)
    spent, steps = computed_tokens(server) - before, engine_steps(server) - steps_before
    least = len(result.context_ids) + result.tree.descendants()
    ratio = f"{least:>7}{spent / least:>6.2f}x" if name == "ours" else ""
    print(f"{label:<16}{name:<17}{len(result.suggestions):>5}{result.stats.forward_calls:>12}"
          f"{steps:>6.0f}{spent:>8.0f}{ratio}")  # fmt: skip


def wall_times(url: str, rtt: float, stories, params) -> None:
    print(f"\n-- wall time, median of {REPEATS}, round trip {rtt} ms --")
    for label, story in stories:
        medians = median_search_seconds(CLIENTS, url, story, params, REPEATS)
        cells = "  ".join(f"{name} {median:5.2f} s" for name, median in medians.items())
        ratios = ", ".join(
            f"{medians[name] / medians['ours']:.1f}x vs {name}" for name in list(CLIENTS)[1:]
        )
        print(f"{label:<16}{cells}  (ours {ratios})")


if __name__ == "__main__":
    main()
