"""What a node offers a writer: a search's suggestions, a draw's samples, the model's
alternatives at the story's tokens, and the one JSON form of a search.

Suggestions belong to the node they were made for: `Offers` runs a tab's searches and
draws at a `Spot` (a node of a story) and keeps them per (node, parameters) and per
node, the latest few of each, so that going back shows a node's own at once; a search
is also saved beside its node, and read back from there. A search is made under the
story's steering and kept and saved with what of it was in force (`Spot.in_force`: the
memory, the note, the entries that fired): a search made under other steering is not
shown as this steering's. The story's bans (`weave.bans`) guard its searches and draws
alike and key them too (look-ahead, made without them, is not used under them).
Searches, draws and alternatives send the steered context
(`Offers.context`: the one place that turns a node into what a backend is sent). A
`Piece` is one continuation to take (a suggestion or a sample) with what made it.
`search_to_dict`/`search_from_dict` are the one codec of a search, for the store and the
command line. The search itself is `weave.search`'s and `weave.ramify`'s; the cursor
and its moves are `weave.session`'s.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from backends.base import Backend, BackendError, Candidate, TokenAlternatives
from weave.bans import Bans, Guard
from weave.context import Context
from weave.finite import non_finite
from weave.library import Library
from weave.lookahead import LookAhead, always
from weave.loom import Loom
from weave.model_context import fitted_context, sent_ids, story_alternatives
from weave.present import accepted_text
from weave.ramify import RamifyParams, RamifyResult, Sample, ramify
from weave.search import ProgressCallback, SearchParams, SearchResult, SearchStats, expand
from weave.steering import Steering
from weave.token_ids import TokenIds
from weave.tree import Suggestion, TreeNode

KEPT_RESULTS = 16  # searches (and draws) remembered per tab
KEPT_CONTEXTS = 8  # contexts remembered per tab (the page shows the current one each run)


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

    def text_as(self, shown: str | None, prefix_space: bool) -> str:
        """The text taken when the box showed `shown` (None: unchanged)."""
        return accepted_text(self.text, shown, prefix_space=prefix_space)


def _tag(node_id: str, params, stats: SearchStats) -> str:
    """A name for one run's widgets (a search's or a draw's) at a node, so that widgets of
    another run never show its texts."""
    return f"{abs(hash((node_id, params, stats.seconds, stats.model_tokens))):x}"


@dataclass(frozen=True)
class Offer:
    """A search's suggestions for one node: what the page shows there, and nowhere else."""

    node_id: str
    params: SearchParams
    result: SearchResult

    @property
    def tag(self) -> str:
        """Names this search's widgets, so that another search's never show its texts."""
        return _tag(self.node_id, self.params, self.result.stats)

    def piece(self, suggestion: Suggestion) -> Piece:
        return Piece(self.node_id, suggestion.text, suggestion.token_ids, suggestion.exact,
                     self.result.stats.model, asdict(self.params), suggestion.score)  # fmt: skip


@dataclass(frozen=True)
class Draw:
    """A ramification's samples for one node (n8loom's ramify): shown there, and nowhere else."""

    node_id: str
    params: RamifyParams
    result: RamifyResult

    @property
    def tag(self) -> str:
        return _tag(self.node_id, self.params, self.result.stats)

    def piece(self, sample: Sample) -> Piece:
        """A sample to take: its text is the detokenization of exactly its ids."""
        return Piece(self.node_id, sample.text, sample.token_ids, True, self.result.stats.model,
                     asdict(self.params), sample.logprob, kind="sampled")  # fmt: skip


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


class Offers:
    """A tab's searches per (node, parameters) and draws per node, and how the last went:
    `error` (a backend's), `failed` (not searched again until asked), `notice` (a saved
    search not shown, and why)."""

    def __init__(self, library: Library, ahead: LookAhead | None = None) -> None:
        self.library = library
        self.ids = TokenIds()
        self.results: OrderedDict[tuple, SearchResult] = OrderedDict()  # by `_key`
        self.contexts: OrderedDict[tuple, Context] = OrderedDict()
        self.draws: OrderedDict[str, Draw] = OrderedDict()
        self.ahead = ahead or LookAhead(0)  # searches made while the writer reads
        self._ahead_made: set[tuple[str, SearchParams]] = set()  # results kept from it
        self.settle()
        self.forced = False  # 'Suggest again': search even where a result is kept

    def settle(self) -> None:
        """Forget how the last search went, and stop looking ahead (the writer moved)."""
        self.ahead.cancel()
        self.error: str | None = None
        self.failed: tuple[str, SearchParams, Steering, Bans] | None = None
        self.notice: str | None = None

    def offer(self, spot: Spot, params: SearchParams, *, model: str | None) -> Offer | None:
        """The suggestions made at `spot` with `params` (by `model`, under the spot's
        steering), kept or saved."""
        result = self.results.get(_key(spot, params))
        if result is not None and model is not None and result.stats.model != model:
            result = None  # another model's (the page switched models): not this one's
        if result is None and spot.saved:
            store = self.library.store
            read = lambda: store.suggestions(spot.story_id, spot.node_id)  # noqa: E731
            saved = self.library.save(read, reading=True)
            self.notice = unshowable(saved, "The saved suggestions") or self.notice
            restored = search_from_dict(saved) if saved else None
            if (restored and restored[1] == params and restored[0].stats.model == model
                    and search_steering(saved) == spot.in_force
                    and saved.get("bans") == _bans_dict(spot.bans)):  # fmt: skip
                result = restored[0]
                _keep(self.results, _key(spot, params), result)
        return None if result is None else Offer(spot.node_id, params, result)

    def latest(self, node_id: str) -> Offer | None:
        """The node's latest search, whatever its parameters (shown while a new one fails)."""
        for (at, params, *_), result in reversed(self.results.items()):
            if at == node_id:
                return Offer(at, params, result)
        return None

    def needs_search(self, spot: Spot, params: SearchParams, *, model: str | None) -> bool:
        if not spot.loom.text():
            return False
        key = _key(spot, params)
        return self.forced or (self.offer(spot, params, model=model) is None and key != self.failed)

    def ready_ahead(self, backend: Backend, spot: Spot, params: SearchParams) -> bool:
        """Whether `suggest` would take its search from look-ahead, made before it asked
        (no forward, no wait)."""
        if self.forced:
            return False
        try:
            ids = tuple(self._sent(backend, spot, params))
        except (BackendError, ValueError):
            return False
        return self.ahead.ready(backend.model_name, ids, params)

    def retry(self) -> None:
        """'Suggest again': search once more; the suggestions shown stay until it succeeds."""
        self.forced, self.failed = True, None

    def suggest(
        self,
        backend: Backend,
        spot: Spot,
        params: SearchParams,
        progress: ProgressCallback | None = None,
    ) -> Offer | None:
        """Search at `spot`; on a backend error keep everything and remember why.

        Returns the suggestions, or None when the search failed (see `error`).
        """
        node_id, forced, self.forced = spot.node_id, self.forced, False
        try:
            ids = self._sent(backend, spot, params)
            # Look-ahead searches without the bans: its searches do not count under them.
            ahead = not forced and not spot.bans.active
            found = self.ahead.take(backend.model_name, ids, params) if ahead else None
            result = found or expand(backend, ids, params, progress=progress, guard=spot.guard())
        except (BackendError, ValueError) as e:
            self.error, self.failed = str(e), _key(spot, params)
            return None
        self.error, self.failed = None, None
        _keep(self.results, _key(spot, params), result)
        made = self._ahead_made.add if found is not None else self._ahead_made.discard
        made((node_id, params))
        if spot.saved:
            data, store = search_to_dict(result, params, spot.in_force), self.library.store
            data |= {"bans": _bans_dict(spot.bans)} if spot.bans.active else {}
            self.library.save(lambda: store.save_suggestions(spot.story_id, node_id, data))
        return Offer(node_id, params, result)

    def look_ahead(
        self, backend: Backend, spot: Spot, offer: Offer, *, rows: int, alive=always, after=0.0
    ) -> None:
        """While the writer reads `offer` at `spot`, search from its top `rows` exact
        suggestions as if each were accepted (`weave.lookahead`, beginning `after` seconds
        from now), so that `suggest` after accepting one finds its search made; a move
        stops it (`settle`). Returns at once."""
        self.ahead.rows = rows
        if not rows or offer.node_id != spot.node_id:
            return
        try:
            ids = self._sent(backend, spot, offer.params)
        except (BackendError, ValueError):  # the writer's own next search says why
            return
        suggestions = offer.result.suggestions
        self.ahead.start(backend, ids, suggestions, offer.params, alive=alive, after=after)

    def hold_look_ahead(self, seconds: float) -> None:
        """The page is drawing: look-ahead begins no forward for `seconds` (it goes on
        after, unless a move stopped it)."""
        self.ahead.hold(seconds)

    def ahead_ready(self, backend: Backend, spot: Spot, offer: Offer) -> set[tuple[int, ...]]:
        """The token ids of `offer`'s suggestions whose next suggestions look-ahead made."""
        if offer.node_id != spot.node_id or not self.ahead.rows:
            return set()
        try:
            ids = tuple(self._sent(backend, spot, offer.params))
        except (BackendError, ValueError):
            return set()
        model = backend.model_name
        return {s.token_ids for s in offer.result.suggestions
                if self.ahead.ready(model, ids + s.token_ids, offer.params)}  # fmt: skip

    def from_ahead(self, offer: Offer) -> bool:
        """Whether `offer` came from look-ahead (made while the writer read its parent's)."""
        return (offer.node_id, offer.params) in self._ahead_made

    def draw(self, node_id: str) -> Draw | None:
        """The samples last drawn at the node in this tab (not saved until taken or kept)."""
        return self.draws.get(node_id)

    def sample(
        self,
        backend: Backend,
        spot: Spot,
        params: RamifyParams,
        progress: ProgressCallback | None = None,
    ) -> Draw | None:
        """Draw `params.n` continuations at `spot`; None on a backend error (see `error`)."""
        try:
            context = self.context(backend, spot, room=params.max_tokens)
            result = ramify(backend, sent_ids(backend, context), params, progress, spot.guard())
        except (BackendError, ValueError) as e:
            self.error = str(e)
            return None
        self.error = None
        draw = Draw(spot.node_id, params, result)
        _keep(self.draws, spot.node_id, draw)
        return draw

    def alternatives(self, backend: Backend, spot: Spot, *, k: int, last: int) -> Alternatives:
        """What the model offered at the last `last` tokens of the story at `spot`."""
        where = (spot.story_id, spot.node_id)
        try:
            context = self.context(backend, spot, room=0)
            rows = story_alternatives(backend, context, k, last=last)
        except (BackendError, ValueError) as e:
            return Alternatives(*where, error=str(e))
        if rows is None:
            return Alternatives(*where, unsupported=True)
        return Alternatives(*where, rows=tuple(rows))

    def _sent(self, backend: Backend, spot: Spot, params: SearchParams) -> list[int]:
        """The ids a search at `spot` with `params` sends: look-ahead keys its searches by
        them, so a child whose context is its parent's plus the accepted ids finds its own."""
        return sent_ids(backend, self.context(backend, spot, room=params.max_depth))

    def context(self, backend: Backend, spot: Spot, *, room: int) -> Context:
        """What `backend` reads for a search at `spot` that adds `room` tokens: the story's
        path ids (`TokenIds`) under the spot's steering, fitted to the model's window.

        Raises `BackendError` (tokenizing) or `ValueError` (it cannot fit).
        """
        ids = self.ids.path_ids(backend, spot.loom, spot.node_id)
        key = (backend.model_name, ids, spot.steering, room)
        if key not in self.contexts:
            text = spot.loom.text(spot.node_id)
            context = fitted_context(backend, spot.steering, text, ids, room=room)
            _keep(self.contexts, key, context, KEPT_CONTEXTS)
        return self.contexts[key]


def _key(spot: Spot, params: SearchParams) -> tuple[str, SearchParams, Steering, Bans]:
    """A search's place among those kept: its node, parameters, steering in force and bans."""
    return spot.node_id, params, spot.in_force, spot.bans


def _bans_dict(bans: Bans) -> dict | None:
    """The bans a saved search records (None: it was made without any)."""
    return bans.to_dict() if bans.active else None


def _keep(kept: OrderedDict, key, value, most: int = KEPT_RESULTS) -> None:
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > most:
        kept.popitem(last=False)


# -- alternatives at the story's tokens -------------------------------------------------
@dataclass(frozen=True)
class Alternatives:
    """What the model offered at the last tokens of the story at a node: `rows`, else why
    there are none (`unsupported`: the backend cannot say; `error`: what failed)."""

    story_id: str
    node_id: str
    rows: tuple[TokenAlternatives, ...] = ()
    unsupported: bool = False
    error: str | None = None

    def failed(self, error: str) -> Alternatives:
        return Alternatives(self.story_id, self.node_id, error=error)


def branch_text(
    text: str, rows: Sequence[TokenAlternatives], at: TokenAlternatives, choice: Candidate
) -> str:
    """The story up to the token `at`, then `choice` in its place: what a loom edit
    branches with when the writer picks another token there.

    Args:
        text: the story's text.
        rows: `Backend.alternatives` for the story's ids, through its last token (their
            texts join to the story's end).
        at: the row of the token replaced; choice: one of its alternatives.
    Raises:
        ValueError: when the rows' texts are not the end of `text` (another story's).
    """
    tail = "".join(row.text for row in rows if row.position >= at.position)
    if not text.endswith(tail):
        raise ValueError("these alternatives belong to another text than the story's")
    return text[: len(text) - len(tail)] + choice.text


# -- searches as JSON ---------------------------------------------------------------------
def search_to_dict(
    result: SearchResult, params: SearchParams | None = None, steering: Steering | None = None
) -> dict:
    """A search as JSON: parameters and steering (when given), stats, the ranked
    suggestions and the whole tree."""
    data = {} if params is None else {"params": asdict(params)}
    data |= {} if steering is None else {"steering": steering.to_dict()}
    return data | {
        "stats": result.stats.to_dict(),
        "suggestions": [asdict(s) for s in result.suggestions],
        "tree": result.tree.to_dict(),
        "context_tokens": len(result.context_ids),
    }


def search_from_dict(data: dict) -> tuple[SearchResult, SearchParams] | None:
    """`search_to_dict`'s inverse; None when the data is not a search we can show
    (one holding NaN or an infinity, say)."""
    if non_finite(data):
        return None
    try:
        params = SearchParams(**_known(SearchParams, data["params"]))
        suggestions = [_suggestion(s) for s in data["suggestions"]]
        stats = SearchStats(**_known(SearchStats, data["stats"]))
        tree = TreeNode.from_dict(data["tree"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return SearchResult(suggestions, tree, stats, context_ids=()), params


def search_steering(data: dict) -> Steering | None:
    """The steering a saved search was made under (none recorded: no steering); None when
    what is recorded is not steering we can read."""
    try:
        return Steering.from_dict(data.get("steering", {}))
    except ValueError:
        return None


def unshowable(search: object, what: str, where: str = "search") -> str | None:
    """Why a saved or imported search is not shown, when it holds NaN or an infinity."""
    broken = non_finite(search, where)
    if broken is None:
        return None
    return f"{what} are not shown: {broken} is not a finite number. The story is searched again."


def unshowable_import(data: bytes | str) -> str | None:
    """Why an imported file's suggestions were left out (the store keeps none holding NaN
    or an infinity): the loom's per node, or an older file's one search."""
    doc = json.loads(data)  # the store has read it: it is a JSON object
    searches = {key: doc[key] for key in ("suggestions", "search", "tree") if key in doc}
    return unshowable(searches, "The file's suggestions", "")


def _suggestion(data: dict) -> Suggestion:
    values = _known(Suggestion, data)
    for name in ("token_ids", "token_pieces", "token_logprobs"):
        values[name] = tuple(values[name])
    return Suggestion(**values)


def _known(cls, data: dict) -> dict:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}
