"""LLooM's lone rule, as a tab keeps it: a lone suggestion is accepted by itself, a few
times in a row at most, and one undo takes such a chain back.

`Lone` is a tab's lone-accept state, one value: how many lone suggestions were accepted
by themselves in a row and the `LoneChain` they made. `weave.desk.session.Workspace`
takes them (`take_lone`) and returns the state to `armed` or `held` with each move; which
suggestion is lone is `weave.search.rows.lone`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

AUTO_ACCEPTS = 8  # lone suggestions accepted in a row before the writer is asked again


@dataclass(frozen=True)
class LoneChain:
    """Lone suggestions accepted by themselves one after another: from `start` to `end`."""

    start: str  # the node the first was accepted at: one undo goes back there
    end: str
    texts: tuple[str, ...]  # what each appended, in order


@dataclass(frozen=True)
class Lone:
    """A tab's lone-accept state, one value: how many lone suggestions were accepted by
    themselves in a row (`taken`: at AUTO_ACCEPTS none is, until the writer acts) and the
    last `chain` they made. A move returns it to `armed` (the writer acted: lone ones may
    be taken again) or `held` (a deliberate place: none is taken by itself there)."""

    taken: int = 0
    chain: LoneChain | None = None

    def armed(self) -> Lone:
        return replace(self, taken=0)

    def held(self) -> Lone:
        return replace(self, taken=AUTO_ACCEPTS)

    def may_take(self) -> bool:
        """Whether a lone suggestion may be accepted by itself now."""
        return self.taken < AUTO_ACCEPTS

    def chain_at(self, cursor: str) -> LoneChain | None:
        """The chain of lone accepts that led to `cursor`, if any."""
        return self.chain if self.chain is not None and self.chain.end == cursor else None

    def took(self, before: Lone, start: str, end: str, text: str) -> Lone:
        """After one more lone suggestion (`text`) was accepted by itself at `start`, the
        cursor now at `end` (still `start`: nothing was added), from `before`'s state."""
        taken = before.taken + 1
        if end == start:
            return replace(self, taken=taken)
        chain = before.chain_at(start)
        first, texts = (chain.start, chain.texts) if chain else (start, ())
        return Lone(taken, LoneChain(first, end, (*texts, text)))
