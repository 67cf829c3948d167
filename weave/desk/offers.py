"""What a node offers a writer: its suggestions through one door (`Offers.show`), its
draws, and the model's alternatives at the story's tokens.

`Offers` runs a tab's searches and draws at a `Spot` (a node of a story) and keeps the
latest few per (node, parameters, steering in force) and per node (`weave.lru`); a search
is also saved beside its node and read back from there, but never shown under other
steering than it was made under (`Spot.in_force`), nor under other bans: the story's
bans (`weave.story.bans`) guard its searches, look-ahead's and draws alike and key them
too. `show` answers the page's one question, "what does this node offer with these
parameters?": search now, take look-ahead's search,
show the kept one or, after a failure, the node's earlier ones; or, where the story must
first be read at length, read it in the background (`weave.desk.reading`) and say how far
it has got; a `Shown` says which.
Everything sent is the steered context (`Offers.context`). The values (`Shown` among them) are
`weave.desk.spot`'s, a search's JSON `weave.search.codec`'s, the alternatives
`weave.desk.alternatives`'; the moves are `weave.desk.session`'s.
"""

from __future__ import annotations

from collections.abc import Callable

from backends.base import Backend, TokenAlternatives, always
from backends.errors import BackendError
from weave.desk.alternatives import Alternatives, Choice, alternatives_at, whole_words
from weave.desk.library import Library
from weave.desk.lookahead import LookAhead
from weave.desk.reading import Reading, ReadState
from weave.desk.spot import Draw, Offer, Shown, Spot
from weave.lru import LRU
from weave.search.beams import ProgressCallback, SearchResult, expand
from weave.search.codec import search_from_dict, search_steering, search_to_dict, unshowable
from weave.search.params import SearchParams
from weave.search.ramify import RamifyParams, ramify
from weave.search.rows import lone
from weave.story.bans import Bans
from weave.story.context import Context
from weave.story.guard import Pruned
from weave.story.model_context import Contexts, sent_ids
from weave.story.steering import Steering

KEPT_RESULTS = 16  # searches (and draws) remembered per tab


class Offers:
    """A tab's searches per (node, parameters) and draws per node, and how the last went:
    `error` (a backend's), `failed` (not searched again until asked), `notice` (a saved
    search not shown, and why)."""

    def __init__(
        self, library: Library, ahead: LookAhead | None = None, reading: Reading | None = None
    ) -> None:
        self.library = library
        self.contexts = Contexts()
        self.results: LRU[tuple, SearchResult] = LRU(KEPT_RESULTS)  # by `_key`
        self.draws: LRU[str, Draw] = LRU(KEPT_RESULTS)
        self.ahead = ahead or LookAhead(0)  # searches made while the writer reads
        self.reading = reading or Reading()  # a long story read apart, before its search
        self._ahead_made: set[tuple[str, SearchParams]] = set()  # results kept from it
        self.settle()
        self.forced = False  # 'Suggest again': search even where a result is kept

    def settle(self) -> None:
        """Forget how the last search went, and stop looking ahead and reading (the writer
        moved)."""
        self.ahead.cancel()
        self.reading.cancel()
        self.error: str | None = None
        self.failed: tuple[str, SearchParams, Steering, Bans] | None = None
        self.notice: str | None = None

    def show(
        self,
        backend: Backend | None,
        spot: Spot,
        params: SearchParams,
        *,
        searching: Callable[[], ProgressCallback | None] = lambda: None,
        alive: Callable[[], bool] | None = None,
    ) -> Shown:
        """What `spot` offers with `params`: searched now where nothing is kept for them
        (unless the last search here failed and no retry was asked), from look-ahead where
        it made the search, else what is kept. `searching()` is called just before a
        search the writer waits for, and gives what hears its progress. Given `alive` (the
        tab's, cheap and thread-safe), a search that would first read much of the story
        reads it in the background instead and answers "reading" meanwhile (the page asks
        again once it is read); without, the search reads it in line. Raises the
        backend's `Cancelled` (the tab is gone)."""
        model = backend.model_name if backend is not None else None
        if self.forced and _key(spot, params) != self.failed:
            kept = self.offer(spot, params, model=model)
            if kept is not None:  # the search is exact: again, it would make the same tree
                self.forced = False
                return Shown(kept, "same")
        if backend is not None and self._needs_search(spot, params, model=model):
            ready = not self.forced and self._ready_ahead(backend, spot, params)
            reading = None if ready or alive is None else self._read(backend, spot, params, alive)
            if reading is None:
                offer = self.suggest(backend, spot, params, None if ready else searching())
            elif reading.error is None:
                return Shown(self.latest(spot.node_id), "reading", reading=reading)
            else:  # failed as the search would have: not read again until asked
                offer, self.forced = None, False
                self.error, self.failed = reading.error, _key(spot, params)
            if offer is None:
                earlier = self.latest(spot.node_id)
                return Shown(earlier, "earlier" if earlier else "none", error=self.error)
            only = lone(offer.result.suggestions)
            lone_piece = offer.piece(only) if only is not None else None
            return Shown(offer, "ahead" if self.from_ahead(offer) else "searched", lone_piece)
        offer = self.offer(spot, params, model=model)
        if offer is not None:
            return Shown(offer, "ahead" if self.from_ahead(offer) else "kept")
        earlier = self.latest(spot.node_id)
        return Shown(earlier, "earlier" if earlier else "none")

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
            if (restored and restored.params == params and restored.result.stats.model == model
                    and search_steering(saved) == spot.in_force
                    and saved.get("bans") == _bans_dict(spot.bans)):  # fmt: skip
                result = restored.result
                self.results.put(_key(spot, params), result)
        return None if result is None else Offer(spot.node_id, params, result)

    def pruned(self, node_id: str) -> tuple[Pruned, ...]:
        """What the node's latest search pruned (the bans panel lists it)."""
        latest = self.latest(node_id)
        return latest.result.pruned if latest is not None else ()

    def latest(self, node_id: str) -> Offer | None:
        """The node's latest search, whatever its parameters (shown while a new one fails)."""
        for (at, params, *_), result in reversed(self.results.items()):
            if at == node_id:
                return Offer(at, params, result)
        return None

    def _needs_search(self, spot: Spot, params: SearchParams, *, model: str | None) -> bool:
        if not spot.loom.text():
            return False
        key = _key(spot, params)
        return self.forced or (self.offer(spot, params, model=model) is None and key != self.failed)

    def _ready_ahead(self, backend: Backend, spot: Spot, params: SearchParams) -> bool:
        """Whether look-ahead made this search before it was asked (no forward, no wait)."""
        try:
            ids = self._sent(backend, spot, params)
            return self.ahead.ready(backend.model_name, ids, params, spot.bans)
        except (BackendError, ValueError):
            return False

    def _read(self, backend: Backend, spot: Spot, params: SearchParams, alive) -> ReadState | None:
        """How the background read of what a search at `spot` sends stands (None: nothing
        to wait for); a failure to tell is left to the search, which says it."""
        try:
            return self.reading.wait_for(backend, self._sent(backend, spot, params), alive=alive)
        except (BackendError, ValueError):
            return None

    def retry(self) -> None:
        """'Suggest again': search once more where the last search failed or nothing is kept
        (the suggestions shown stay until it succeeds); where the suggestions kept were
        made with these very parameters, steering, bans and model, `show` answers them as
        "same": the search would only make them again."""
        self.forced, self.failed = True, None

    def suggest(
        self,
        backend: Backend,
        spot: Spot,
        params: SearchParams,
        progress: ProgressCallback | None = None,
    ) -> Offer | None:
        """Search at `spot` (or take look-ahead's search); on a backend error keep
        everything and remember why. Returns the suggestions, or None (see `error`)."""
        node_id, forced, self.forced = spot.node_id, self.forced, False
        try:
            ids = self._sent(backend, spot, params)
            found = None if forced else self.ahead.take(backend.model_name, ids, params, spot.bans)
            result = found or expand(backend, ids, params, progress=progress, guard=spot.guard())
        except (BackendError, ValueError) as e:
            self.error, self.failed = str(e), _key(spot, params)
            return None
        self.error, self.failed = None, None
        self.results.put(_key(spot, params), result)
        made = self._ahead_made.add if found is not None else self._ahead_made.discard
        made((node_id, params))
        if spot.saved:
            data, store = search_to_dict(result, params, spot.in_force), self.library.store
            data |= {"bans": _bans_dict(spot.bans)} if spot.bans.active else {}
            self.library.save(lambda: store.save_suggestions(spot.story_id, node_id, data))
        return Offer(node_id, params, result)

    def look_ahead(
        self, backend: Backend, spot: Spot, offer: Offer, *, rows: int, alive=always, after=0.0
    ) -> bool:
        """While the writer reads `offer` at `spot`, search from its top `rows` exact
        suggestions as if each were accepted (`weave.desk.lookahead`, beginning `after`
        seconds from now), so that a search after accepting one finds its search made; a
        move stops it (`settle`). Returns at once: False where it refuses, the story being
        read (`reading_state`: its own search comes first, and look-ahead marks nothing)."""
        if self.reading.running():
            return False
        self.ahead.rows = rows
        if not rows or offer.node_id != spot.node_id:
            return True
        try:
            ids = self._sent(backend, spot, offer.params)
        except (BackendError, ValueError):  # the writer's own next search says why
            return True
        suggestions = offer.result.suggestions
        self.ahead.start(backend, ids, suggestions, offer.params, alive=alive, after=after,
                         bans=spot.bans, text=spot.loom.text(spot.node_id))  # fmt: skip
        return True

    def reading_state(self) -> ReadState | None:
        """How far the story's background read has got while it runs (None: none runs)."""
        state = self.reading.state()
        return state if self.reading.running() else None

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
                if self.ahead.ready(model, s.after(ids), offer.params, spot.bans)}  # fmt: skip

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
        self.draws.put(spot.node_id, draw)
        return draw

    def alternatives(self, backend: Backend, spot: Spot, *, k: int, last: int) -> Alternatives:
        """What the model offered at the last `last` tokens of the story at `spot`."""
        try:
            context = self.context(backend, spot, room=0)
        except (BackendError, ValueError) as e:
            return Alternatives(spot.story_id, spot.node_id, error=str(e))
        return alternatives_at(backend, context, spot.story_id, spot.node_id, k=k, last=last)

    def choices(self, backend: Backend, spot: Spot, row: TokenAlternatives) -> tuple[Choice, ...]:
        """The alternatives at `row` (one of `alternatives`' rows at `spot`) as the writer
        picks them, each word read on to its end (`whole_words`); where the backend fails
        to read on, the tokens as the model offered them (they still branch)."""
        try:
            context = self.context(backend, spot, room=0)
            return whole_words(backend, context.ids, row)
        except (BackendError, ValueError):
            return tuple(Choice(c.token_id, c.text, c.logprob) for c in row.top)

    def _sent(self, backend: Backend, spot: Spot, params: SearchParams) -> list[int]:
        """The ids a search at `spot` with `params` sends: look-ahead keys its searches by
        them, so a child whose context is its parent's plus the accepted ids finds its own."""
        return sent_ids(backend, self.context(backend, spot, room=params.max_depth))

    def context(self, backend: Backend, spot: Spot, *, room: int) -> Context:
        """What `backend` reads for a search at `spot` that adds `room` tokens (`Contexts.of`).
        Raises `BackendError` (tokenizing) or `ValueError` (it cannot fit)."""
        return self.contexts.of(backend, spot.loom, spot.node_id, spot.steering, room=room)


def _key(spot: Spot, params: SearchParams) -> tuple[str, SearchParams, Steering, Bans]:
    """A search's place among those kept: its node, parameters, steering in force and bans."""
    return spot.node_id, params, spot.in_force, spot.bans


def _bans_dict(bans: Bans) -> dict | None:
    """The bans a saved search records (None: it was made without any)."""
    return bans.to_dict() if bans.active else None
