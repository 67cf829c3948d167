"""Where a tab is, and the values a node offers there.

A `Spot` is a node of a story (with the loom and the story's steering); an `Offer` is a
search's suggestions for one node and a `Draw` a ramification's samples, each shown at
that node and nowhere else; a `Piece` is one continuation to take (a suggestion or a
sample) with what made it, and `accepted_text` the rule of what taking it adds; a `Shown`
is what `Offers.show` answers the page for a node.
Values only: `weave.desk.offers` makes and keeps them, `weave.desk.session` takes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from weave.desk.reading import ReadState
from weave.loom.formats import without_surrogates
from weave.loom.loom import Loom
from weave.loom.provenance import Provenance, probability, taken
from weave.search.beams import SearchResult
from weave.search.params import SearchParams
from weave.search.ramify import RamifyParams, RamifyResult, Sample
from weave.search.tree import Suggestion
from weave.story.bans import Bans
from weave.story.guard import Guard
from weave.story.steering import Steering

SOURCES = ("searched", "ahead", "kept", "same", "earlier", "reading", "none")  # a `Shown`'s sources


@dataclass(frozen=True)
class Piece:
    """A continuation offered at a node (a suggestion or a sample), and what made it."""

    node_id: str  # the node it was made for: taking it adds a child there
    text: str
    token_ids: tuple[int, ...]
    exact: bool  # `token_ids` spell `text` exactly
    model: str
    params: dict[str, Any]
    score: float
    kind: str = "accepted"
    provenance: Provenance | None = None  # who made it, as offered (taking it may change `how`)

    def text_as(self, shown: str | None, prefix_space: bool) -> str:
        """The text taken when the box showed `shown` (None: unchanged)."""
        return accepted_text(self.text, shown, prefix_space=prefix_space)

    def grower(
        self, shown: str | None, prefix_space: bool, made: str, stored: Callable[[str], str]
    ) -> Callable[[Loom, str], Loom]:
        """How to grow this piece, as the box showed it (`shown`), as node `made` at its
        node (the stored node `stored` says it stands for): a move given the loom and how
        ("accept" or "keep"). Its ids go with it only where its text is unchanged."""
        text = self.text_as(None if shown is None else without_surrogates(shown), prefix_space)
        exact, changed = text == self.text and self.exact, text != self.text
        node = {"id": made, "kind": self.kind, "params": self.params, "score": self.score}
        node |= {"token_ids": self.token_ids, "model": self.model} if exact else {}
        return lambda loom, how: getattr(loom.at(stored(self.node_id)), how)(
            text, **node, provenance=taken(self.provenance, how, changed=changed)
        )


def accepted_text(text: str, shown: str | None, *, prefix_space: bool) -> str:
    """The accept rule: what is appended when a suggestion of `text`, shown (and maybe
    edited) as `shown`, is accepted (None: unchanged). The leading space a row leaves
    off (`weave.view.present.shown_text`) comes back when `text` had one and "prefix
    space" is on."""
    if shown is None:
        return text
    space = " " if prefix_space and text.startswith(" ") else ""
    return space + shown


class Run:
    """What a search's `Offer` and a draw's `Draw` share: one run's results at a node."""

    node_id: str
    params: SearchParams | RamifyParams
    result: SearchResult | RamifyResult

    @property
    def tag(self) -> str:
        """A name for this run's widgets, so that widgets of another run never show its
        texts."""
        stats = self.result.stats
        return f"{abs(hash((self.node_id, self.params, stats.seconds, stats.model_tokens))):x}"

    def _piece(self, text: str, token_ids: tuple[int, ...], exact: bool, score: float, *,
               how: str, kind: str = "accepted", **more: Any) -> Piece:  # fmt: skip
        """A piece this run offered, with the provenance of what `how` made (`more`: its
        rank, its seed)."""
        stats = self.result.stats
        made = Provenance(how, probability=probability(score), backend=stats.backend,
                          model=stats.model, latency_ms=stats.seconds * 1000, **more)  # fmt: skip
        return Piece(self.node_id, text, token_ids, exact, stats.model, asdict(self.params),
                     score, kind=kind, provenance=made)  # fmt: skip


@dataclass(frozen=True)
class Offer(Run):
    """A search's suggestions for one node: what the page shows there, and nowhere else."""

    node_id: str
    params: SearchParams
    result: SearchResult

    def piece(self, suggestion: Suggestion) -> Piece:
        rank = next((i for i, s in enumerate(self.result.suggestions, 1) if s == suggestion), None)
        # A healed suggestion's ids begin inside the story: they are not its text's alone.
        exact = suggestion.exact and not suggestion.healed
        return self._piece(suggestion.text, suggestion.token_ids, exact, suggestion.score,
                           how="suggestion", rank=rank)  # fmt: skip


@dataclass(frozen=True)
class Draw(Run):
    """A ramification's samples for one node (n8loom's ramify): shown there, and nowhere else."""

    node_id: str
    params: RamifyParams
    result: RamifyResult

    def piece(self, sample: Sample) -> Piece:
        """A sample to take: its text is the detokenization of exactly its ids (a healed
        one's, less the typed text: its ids are then not its own text's)."""
        return self._piece(sample.text, sample.token_ids, not sample.healed, sample.logprob,
                           how="sampled", kind="sampled", seed=self.params.seed)  # fmt: skip


@dataclass(frozen=True)
class Spot:
    """Where a tab is: the node at `loom`'s cursor in story `story_id`; `saved` when no
    move of the tab is pending (what is made here may then be stored beside the node)."""

    story_id: str
    loom: Loom
    saved: bool
    steering: Steering = Steering()  # the story's memory, note and lorebook
    bans: Bans = Bans()  # the story's bans, bias and repetition guard

    @property
    def node_id(self) -> str:
        return self.loom.cursor

    @property
    def in_force(self) -> Steering:
        """The steering a search here is made under (`Steering.in_force`)."""
        return self.steering.in_force(self.loom.text(self.node_id))

    def guard(self) -> Guard | None:
        """The bans compiled for the story here; None where there are none."""
        return Guard(self.bans, self.loom.text(self.node_id)) if self.bans.active else None


@dataclass(frozen=True)
class Shown:
    """What a node offers for the parameters asked, and where it came from (`source`):
    "searched" now; "ahead", made by look-ahead while the writer read; "kept" from before
    (in this tab or saved); "same", the kept ones when 🔁 Again asked for a search that
    would make them again (nothing changed); "earlier", none for these parameters but the
    node's latest (after a failure); "reading", the node's latest (or none) while the
    story is read in the background before its search (`reading`: how far,
    `weave.desk.reading`); "none".
    `lone`: a lone suggestion searched now, which LLooM's rule accepts by itself
    (`Workspace.take_lone`). `error`: why a search made now failed."""

    offer: Offer | None
    source: str
    lone: Piece | None = None
    error: str | None = None
    reading: ReadState | None = None

    def __post_init__(self) -> None:
        assert self.source in SOURCES, self.source
