"""The MLX backend's fragment tree against the patterns it replaces, side by side.

For each starting story, the same search (same parameters, so the same tree) runs on:
  tree      our backend: KV fragments, one batched forward per depth;
  unbatched the same fragment tree, but one forward per beam (no batching);
  no-cache  every beam's whole context run from scratch, one by one (no KV reuse);
then an accept-and-search-again round on the tree backend. Prints tokens evaluated,
forward calls, wall time and the ratios, plus KV bytes held by fragments against one
full cache copy per beam (how a cache-per-beam design would hold them). Last, a long
story (bench/long_story.txt, ~1,300 tokens): the shared-prefix attention against copying
the story into every row of the batch.

    .venv/bin/python bench/bench_mlx.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LONG_STORY = Path(__file__).with_name("long_story.txt")  # ~1,300 tokens of plain prose

# The backends package loads OpenBLAS, which must come before mlx.
# isort: off
from backends import create_backend  # noqa: E402
from backends.base import Backend, Candidate  # noqa: E402
from backends.mlx import MLXBackend  # noqa: E402
from weave.config import load_settings  # noqa: E402
from weave.search import SearchParams, expand  # noqa: E402
from weave.story import Story  # noqa: E402
import mlx.core as mx  # noqa: E402
# isort: on


class Wrapped(Backend):
    """Another way of asking the same MLX model (its tokens, its weights)."""

    def __init__(self, inner: MLXBackend):
        super().__init__()
        self.inner = inner
        self.special_token_ids = inner.special_token_ids

    model_name = property(lambda self: self.inner.model_name)
    tokenize = property(lambda self: self.inner.tokenize)
    detokenize = property(lambda self: self.inner.detokenize)


class Unbatched(Wrapped):
    """The fragment-tree backend asked one context at a time."""

    name = "unbatched"

    def top_logprobs(self, contexts, k):
        out = []
        for ctx in contexts:
            out += self.inner.top_logprobs([ctx], k)
        self.stats.add(**(self.inner.stats.snapshot() - self.stats.snapshot()).__dict__)
        return out


class NoCache(Wrapped):
    """Every context run whole, one by one: what a cacheless client pays."""

    name = "no-cache"

    def top_logprobs(self, contexts, k):
        out = []
        for ctx in contexts:
            out.append(self.inner._worker.submit(self._one, ctx, k).result())
            self.stats.add(forward_calls=1, model_tokens=len(ctx))
        return out

    def _one(self, ctx: list[int], k: int) -> list[Candidate]:
        logits = self.inner.model(mx.array([ctx]))[0, -1].astype(mx.float32)
        logprobs = logits - mx.logsumexp(logits)
        order = mx.argsort(-logprobs)[:k]
        return self.inner._candidates(order.tolist(), logprobs[order].tolist())


def run(backend: Backend, ids: list[int], params: SearchParams):
    started = time.perf_counter()
    result = expand(backend, ids, params)
    return result, time.perf_counter() - started


def main() -> None:
    settings = load_settings()
    tree = create_backend(settings)
    params = settings.search_for(tree.model_name)
    print(f"model {tree.model_name}; {params}")
    header = f"{'story':<22}{'pattern':<11}{'sugg':>5}{'calls':>7}{'tokens':>8}{'seconds':>9}"
    print(header)
    totals: dict[str, list[float]] = {}
    for text in settings.starting_stories:
        ids = tree.tokenize(text)
        rows = {}
        for name, backend in (
            ("tree", tree),
            ("unbatched", Unbatched(create_backend(settings))),
            ("no-cache", NoCache(tree)),
        ):
            result, seconds = run(backend, ids, params)
            st = result.stats
            rows[name] = (result, seconds)
            totals.setdefault(name, [0, 0, 0.0])
            totals[name][0] += st.forward_calls
            totals[name][1] += st.model_tokens
            totals[name][2] += seconds
            label = text[:20]
            print(
                f"{label:<22}{name:<11}{len(result.suggestions):>5}{st.forward_calls:>7}"
                f"{st.model_tokens:>8}{seconds:>9.2f}"
            )
        same = [s.text for s in rows["tree"][0].suggestions] == [
            s.text for s in rows["no-cache"][0].suggestions
        ]
        print(f"{'':<22}same suggestions on every pattern: {same}")
        _accept_round(tree, text, rows["tree"][0], params)
        _memory(tree, ids, rows["tree"][0])
    _long_story(tree, params)
    t, u, n = totals["tree"], totals["unbatched"], totals["no-cache"]
    print(
        f"\nratios over all stories: tree is {u[2] / t[2]:.1f}x faster than unbatched "
        f"({u[0] / t[0]:.1f}x fewer forwards), {n[2] / t[2]:.1f}x faster than no-cache "
        f"({n[1] / t[1]:.1f}x fewer model tokens)"
    )


def _long_story(backend: MLXBackend, params: SearchParams) -> None:
    text = LONG_STORY.read_text()
    ids = backend.tokenize(text)
    backend.top_logprobs([ids], 1)  # prefill once, outside the timings
    seconds = {}
    for shared in (True, False):
        backend._shared_attention = shared
        backend.tree.clear()
        backend.top_logprobs([ids], 1)
        _, seconds[shared] = run(backend, ids, params)
    backend._shared_attention = True
    print(
        f"\nlong story ({len(ids)} tokens): shared prefix {seconds[True]:.2f} s, "
        f"copied per row {seconds[False]:.2f} s ({seconds[False] / seconds[True]:.1f}x)"
    )


def _accept_round(backend: Backend, text: str, result, params: SearchParams) -> None:
    story = Story(text).tokenized(backend)
    accepted = story.accept(next(s for s in result.suggestions if s.exact))
    again, seconds = run(backend, accepted.ids_for(backend), params)
    print(
        f"{'':<22}after accept: {again.stats.prefill_tokens} prefill tokens, "
        f"{again.stats.forward_calls} forwards, {seconds:.2f} s"
    )


def _memory(backend: MLXBackend, ids: list[int], result) -> None:
    """Fragment bytes for this story's tree against one full KV copy per beam."""
    per_token = _bytes_per_token(backend)
    beams = result.tree.leaves()
    copies = sum((len(ids) + len(leaf.token_ids())) * per_token for leaf in beams)
    nodes = _count_tree_tokens(result.tree)
    fragments = (len(ids) + nodes) * per_token
    print(
        f"{'':<22}KV held: fragments {fragments / 2**20:.1f} MiB vs a copy per beam "
        f"{copies / 2**20:.1f} MiB ({copies / fragments:.1f}x)"
    )


def _bytes_per_token(backend: MLXBackend) -> int:
    layers, heads, head_dim = backend._kv_shape
    return 2 * layers * heads * head_dim * backend._dtype.size


def _count_tree_tokens(node) -> int:
    return sum(1 + _count_tree_tokens(child) for child in node.children)


if __name__ == "__main__":
    main()
