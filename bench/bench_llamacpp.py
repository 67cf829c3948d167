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
  adding a 50 ms round trip (a server across a network; bench/latency.py); on loopback
  also the least server time one slot can spend on the story's tree: the story read
  once, then each node that has children read alone, depth first, so that every read is
  one token on what the slot holds (the server's own timings, no HTTP). v0.3's wall time
  over that bounds how much faster than v0.3 a client keeping a search in one slot can be;
- what running beams side by side in slots could save: the time of one decode for 1 to 4
  rows, one greedy chain per slot, each slot first given the same state by the server's
  slot save and restore (`--slot-save-path`), so that no row re-reads anything. On a CPU
  server a decode's cost grows with its rows, which bounds what any client gains by
  spreading a search over slots.

    .venv/bin/python bench/bench_llamacpp.py      (starts its own llama-servers, -np 4)
"""

from __future__ import annotations

import math
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backends.base import Candidate  # noqa: E402
from backends.http import JsonClient  # noqa: E402
from backends.llamacpp import LlamaCppBackend  # noqa: E402
from bench.latency import delayed  # noqa: E402
from bench.lloom_v03 import StringPromptBackend  # noqa: E402
from bench.timing import median_search_seconds  # noqa: E402
from tests.llama_server import SLOTS, llama_server  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.search.beams import expand  # noqa: E402
from weave.search.tree import TreeNode  # noqa: E402

V03_PROBS = 10
RTTS_MS = (0, 50)
REPEATS = 3
CHAIN = 9  # tokens each row's greedy chain makes, in the decode-cost section
GREEDY = {"n_probs": 10, "cache_prompt": True, "samplers": ["top_k"], "top_k": 1,
          "post_sampling_probs": False}  # fmt: skip


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
        flags = ("--slot-save-path", tmp)
        with llama_server(Path(tmp) / "log", flags=flags) as url:
            decode_costs(url, stories[0])


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
        if not rtt:
            least, decodes = least_in_one_slot(url, story, params)
            print(f"{'':<24}least in one slot {least:5.2f} s of server time, {decodes} decodes: "
                  f"v0.3 {medians['v0.3, 1 thread'] / least:.1f}x that")  # fmt: skip
    print(f"all stories: ours {totals['ours']:.2f} s, v0.3 {totals['v0.3, 1 thread']:.2f} s: "
          f"{totals['v0.3, 1 thread'] / totals['ours']:.1f}x faster")  # fmt: skip


def least_in_one_slot(url: str, story: str, params) -> tuple[float, int]:
    """The median of REPEATS replays of the story's tree, in seconds of server time, and
    the decodes each made."""
    backend = LlamaCppBackend(url)
    result = expand(backend, backend.tokenize(story), params)
    backend.close()
    client = JsonClient(url, backend="llama.cpp", timeout=60)
    bos = client.post("/tokenize", {"content": "", "add_special": True})["tokens"]
    story_ids = [*bos, *result.context_ids]
    prompts = [[*story_ids, *node.token_ids()] for node in _depth_first(result.tree)
               if node.children and node.parent is not None]  # fmt: skip
    body = {**GREEDY, "n_predict": 1, "id_slot": 0}
    seconds = []
    for _ in range(REPEATS):
        first = client.post("/completion", {**body, "prompt": story_ids, "cache_prompt": False})
        spent = [first["timings"]]
        for prompt in prompts:
            spent.append(client.post("/completion", {**body, "prompt": prompt})["timings"])
            if spent[-1]["prompt_n"] != 1:
                raise RuntimeError(f"a depth-first read took {spent[-1]['prompt_n']} tokens")
        seconds.append(sum(t["prompt_ms"] + t["predicted_ms"] for t in spent) / 1000)
    client.close()
    return statistics.median(seconds), 1 + len(prompts)


def _depth_first(node: TreeNode):
    yield node
    for child in node.children:
        yield from _depth_first(child)


def decode_costs(url: str, story: str) -> None:
    """Milliseconds per decode for 1..SLOTS rows side by side, the median of REPEATS."""
    client = JsonClient(url, backend="llama.cpp", timeout=60, pool=SLOTS)
    ids = client.post("/tokenize", {"content": story})["tokens"]
    client.post("/completion", {**GREEDY, "prompt": ids, "n_predict": 1, "id_slot": 0})
    client.post("/slots/0?action=save", {"filename": "bench.bin"})

    def chain(slot: int) -> None:
        body = {**GREEDY, "prompt": [*ids, 100 + slot], "n_predict": CHAIN, "id_slot": slot}
        read = client.post("/completion", body)["timings"]["prompt_n"]
        if read != 1:
            raise RuntimeError(f"slot {slot} re-read {read} tokens: its copy did not hold")

    times: dict[int, list[float]] = {rows: [] for rows in range(1, SLOTS + 1)}
    for _ in range(REPEATS):
        for rows, taken in times.items():
            for slot in range(rows):
                client.post(f"/slots/{slot}?action=restore", {"filename": "bench.bin"})
            with ThreadPoolExecutor(rows) as pool:
                started = time.perf_counter()
                list(pool.map(chain, range(rows)))
                taken.append((time.perf_counter() - started) / CHAIN * 1000)
    print(f"\n-- one decode, rows side by side in slots (median of {REPEATS}) --")
    alone = statistics.median(times[1])
    for rows, taken in times.items():
        ms = statistics.median(taken)
        print(f"{rows} rows: {ms:5.1f} ms a decode, {ms / rows:4.1f} ms a row; "
              f"{rows * alone / ms:.2f}x faster than one slot in turn")  # fmt: skip
    client.close()


if __name__ == "__main__":
    main()
