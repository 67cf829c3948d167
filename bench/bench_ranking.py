"""Which ranking puts what a writer reads at the top: rankings side by side on the panel.

For each passage of `bench.panel`, one search with the model's default settings on the
real MLX backend (the embedded SmolLM2-135M). The tree a search grows does not depend
on the ranking, so every ranking sorts the very same finished beams (pooled under the
prefix-space rule, as the page shows them). Per ranking, over the 24 passages: the top
five's mean length in words, their share of stubs (two words or fewer), of texts that
end a clause (`weave.search.scores.ends_clause`: not cut at the depth or the cap), and their
mean per-token probability (so a ranking that buys length with unlikely text shows it).

Rankings: the production ones (`weave.search.scores`) and candidates tried on the way:
  words       the log-prob per word, less 1 nat where the text ends mid-clause (default)
  joint       the sum of log-probs (LLooM's default before 2026-11-27)
  lloom       LLooM v0.3's sum of token probabilities
  mean        the mean log-prob per token (the geometric-mean token probability)
  gnmt        the sum of log-probs over GNMT's length penalty ((5 + n) / 6) ** 0.6
  long-joint  joint with a length prior: + 1 nat per word
  clause      mean, less 1 nat where the text ends mid-clause
  word-mean   the log-prob per word alone
  words-0.5, words-2   words with 0.5 or 2 nats off a text that ends mid-clause
The last line, "(all)", gives the same figures over every suggestion.

    .venv/bin/python bench/bench_ranking.py
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The backends package loads OpenBLAS, which must come before mlx.
# isort: off
from backends import create_backend  # noqa: E402
from bench.panel import PASSAGES  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.search.scores import ends_clause, words  # noqa: E402
from weave.search.beams import expand  # noqa: E402
from weave.search.tree import TreeNode, beam_score, without_prefix_space  # noqa: E402
# isort: on

TOP = 5
STUB_WORDS = 2


def joint(path: list[TreeNode]) -> float:
    return sum(n.logprob for n in path)


def mean(path: list[TreeNode]) -> float:
    return joint(path) / len(path)


def per_word(path: list[TreeNode], unfinished: float) -> float:
    return joint(path) / words(_text(path)) - (0.0 if ends_clause(_text(path)) else unfinished)


CANDIDATES: dict[str, Callable[[list[TreeNode]], float]] = {
    "mean": mean,
    "gnmt": lambda p: joint(p) / ((5 + len(p)) / 6) ** 0.6,
    "long-joint": lambda p: joint(p) + len(_text(p).split()),
    "clause": lambda p: mean(p) - (0.0 if ends_clause(_text(p)) else 1.0),
    "word-mean": lambda p: per_word(p, 0.0),
    "words-0.5": lambda p: per_word(p, 0.5),
    "words-2": lambda p: per_word(p, 2.0),
}


def _text(path: list[TreeNode]) -> str:
    return path[-1].text()


def ranked(leaves: list[TreeNode], name: str) -> list[list[TreeNode]]:
    """The pooled suggestions (each as its best member's path), best first."""
    groups: dict[str, list[TreeNode]] = {}
    for leaf in leaves:
        if leaf.text():
            groups.setdefault(without_prefix_space(leaf.text()), []).append(leaf)
    scored = []
    for members in groups.values():
        if name in CANDIDATES:
            best = max(members, key=lambda n: CANDIDATES[name](n.path()))
            value = CANDIDATES[name](best.path())
        else:
            best = max(members, key=lambda n: beam_score(n, name))
            value = (math.log(sum(math.exp(joint(m.path())) for m in members))
                     if name == "joint" else beam_score(best, name))  # fmt: skip
        scored.append((value, best.text(), best.path()))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [path for _, _, path in scored]


def main() -> None:
    settings = load_settings(env={"LLOOM_BACKEND": "mlx"})
    backend = create_backend(settings, env={})
    params = settings.search_for(backend.model_name)
    print(f"{backend.model_name}; {params}; {len(PASSAGES)} passages, top {TOP}")
    names = ["words", "joint", "lloom", *CANDIDATES, "(all)"]
    tops: dict[str, list[list[TreeNode]]] = {name: [] for name in names}
    for _genre, text in PASSAGES:
        result = expand(backend, backend.tokenize(text), params)
        leaves = [leaf for leaf in result.tree.leaves() if leaf.finished]
        for name in names[:-1]:
            tops[name].extend(ranked(leaves, name)[:TOP])
        tops["(all)"].extend(ranked(leaves, "joint"))
    print(f"{'ranking':<11} {'words':>6} {'stubs':>6} {'clause':>7} {'p/token':>8}")
    for name in names:
        paths = tops[name]
        counts = [len(_text(p).split()) for p in paths]
        stubs = sum(w <= STUB_WORDS for w in counts) / len(counts)
        ended = sum(ends_clause(_text(p)) for p in paths) / len(paths)
        per_token = math.exp(statistics.fmean(mean(p) for p in paths))
        print(f"{name:<11} {statistics.fmean(counts):6.2f} {stubs:6.0%} {ended:7.0%} "
              f"{per_token:8.1%}")  # fmt: skip
    backend.close()


if __name__ == "__main__":
    main()
