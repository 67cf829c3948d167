"""`GreedyPathBackend`: the base of the server backends (llama.cpp, vLLM) whose one request
answers many contexts at once, each for some positions along its greedy path.

A subclass writes `_complete` (the top-k at each greedy position of each context); this
class answers `top_logprobs` and `greedy_chains` from it, one request per distinct length.
`WholeChain` is a `backends.base.Chain` read whole, for any backend whose reply comes at
once. The interface itself is `backends.base`'s.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

from backends.base import Backend, Candidate, Chain, Positions


class WholeChain(list[list[Candidate]]):
    """A `Chain` read whole: its length is known at once, and closing it frees nothing."""

    def known_length(self) -> int:
        return len(self)

    def close(self) -> None:
        """Nothing to stop: the path was read whole."""


class GreedyPathBackend(Backend):
    """A server backend whose one request answers many contexts at once, each for a
    number of positions along its greedy path; single steps are paths of length one."""

    @abstractmethod
    def _complete(
        self, contexts: list[list[int]], k: int, length: int, stops: tuple[str, ...] = ()
    ) -> list[Positions]:
        """For each context, the top-k at each of `length` greedy positions (at least one),
        or fewer where the path's text reached one of `stops`."""

    def top_logprobs(self, contexts: list[list[int]], k: int) -> list[list[Candidate]]:
        return [chain[0] for chain in self._complete(contexts, k, 1)]

    def greedy_chains(self, contexts, k, lengths, *, stops=()):
        """One request per distinct length (a search's depth asks one length for all)."""
        chains: list = [None] * len(contexts)
        for length in sorted(set(lengths)):
            rows = [i for i, n in enumerate(lengths) if n == length]
            answers = self._chains([contexts[i] for i in rows], k, length, stops)
            for i, chain in zip(rows, answers, strict=True):
                chains[i] = chain
        return chains

    def _chains(
        self, contexts: list[list[int]], k: int, length: int, stops: tuple[str, ...] = ()
    ) -> Sequence[Chain]:
        """The chains of one request: `_complete`'s, read whole, unless a backend gives
        chains whose positions arrive as the server makes them."""
        return [WholeChain(chain) for chain in self._complete(contexts, k, length, stops)]
