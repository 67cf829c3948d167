"""A node's one door (`Offers.show`): what it decides, and what its `Shown` says, with the
fake model (the search itself is test_search.py's; look-ahead's own rules test_lookahead.py's)."""

from __future__ import annotations

from backends.errors import BackendError
from tests.background import ended
from tests.fake_backend import FakeBackend
from weave.desk.session import Workspace
from weave.loom.store import LoomStore
from weave.search.params import SearchParams
from weave.view import messages

PARAMS = SearchParams(cutoff=0.1, max_depth=6, max_suggestions=12)


class Down(FakeBackend):
    """The fake model whose server went away."""

    def top_logprobs(self, contexts, k):
        raise BackendError("connection refused", backend="fake", url="http://127.0.0.1:9")


def opened(tmp_path, text: str = "a b") -> Workspace:
    ws = Workspace(LoomStore(tmp_path))
    assert ws.start(text)
    return ws


def test_a_node_is_searched_once_then_its_kept_suggestions_are_shown(tmp_path):
    backend, ws, reports = FakeBackend(seed=5), opened(tmp_path), []
    searching = lambda: reports.append("start") or reports.append  # noqa: E731
    first = ws.offers.show(backend, ws.spot, PARAMS, searching=searching)
    assert first.source == "searched" and first.error is None and first.lone is None
    assert reports[0] == "start" and len(reports) > 1  # its progress, depth by depth
    calls, reports[:] = len(backend.calls), []
    again = ws.offers.show(backend, ws.spot, PARAMS, searching=searching)
    assert again.source == "kept" and again.offer == first.offer
    assert len(backend.calls) == calls and reports == []  # nothing asked, no live line
    status = messages.shown_status(again.offer.result, again.source, failed=False)
    assert status.startswith("✔️ 12 suggestions kept from an earlier search here (")


def test_a_failed_search_shows_the_earlier_suggestions_and_is_not_repeated_until_asked(tmp_path):
    ws = opened(tmp_path)
    before = ws.offers.show(FakeBackend(seed=5), ws.spot, PARAMS)
    other = SearchParams(cutoff=0.2, max_depth=6, max_suggestions=12)
    down = Down(seed=5)
    failed = ws.offers.show(down, ws.spot, other)
    assert failed.source == "earlier" and failed.offer == before.offer
    assert "connection refused" in failed.error
    assert messages.shown_status(failed.offer.result, failed.source, failed=True) == (
        "⚠️ No suggestions: see below"
    )
    quiet = ws.offers.show(down, ws.spot, other)  # the page reruns: no new search
    assert (quiet.source, quiet.error, quiet.offer) == ("earlier", None, before.offer)
    assert messages.shown_status(quiet.offer.result, quiet.source, failed=False) is None
    ws.retry()
    assert ws.offers.show(FakeBackend(seed=5), ws.spot, other).source == "searched"


def test_nothing_to_show_without_a_backend_or_a_story(tmp_path):
    ws = opened(tmp_path)
    assert ws.offers.show(None, ws.spot, PARAMS).source == "none"
    ws.edit("")
    shown = ws.offers.show(FakeBackend(seed=5), ws.spot, PARAMS)
    assert (shown.source, shown.offer, shown.error) == ("none", None, None)


def test_a_lone_suggestion_is_offered_to_be_taken_once_searched_never_when_kept(tmp_path):
    backend, ws = FakeBackend(seed=5), opened(tmp_path, "a b.")  # ends a sentence: not healed
    lone = SearchParams(cutoff=0.1, max_depth=6, max_suggestions=1)
    shown = ws.offers.show(backend, ws.spot, lone)
    assert shown.lone == shown.offer.piece(shown.offer.result.suggestions[0])
    assert ws.offers.show(backend, ws.spot, lone).lone is None  # kept: shown, not taken
    assert ws.take_lone(shown.lone, prefix_space=False)
    assert ws.text == "a b." + shown.lone.text and ws.lone_chain().texts == (shown.lone.text,)


def test_suggest_again_lets_a_lone_suggestion_it_finds_be_taken_where_the_writer_went_back(
    tmp_path,
):
    """`Workspace.retry`: where the writer went back nothing is taken by itself, until they
    ask again; suggestions kept that the search would only make again are shown, not taken."""
    backend, ws = FakeBackend(seed=5), opened(tmp_path, "a b.")
    lone = SearchParams(cutoff=0.1, max_depth=6, max_suggestions=1)
    assert ws.take_lone(ws.offers.show(backend, ws.spot, lone).lone, prefix_space=False)
    ws.undo()  # deliberate: held
    other = SearchParams(cutoff=0.1, max_depth=5, max_suggestions=1)
    held = ws.offers.show(backend, ws.spot, other)
    assert held.lone is not None and not ws.take_lone(held.lone, prefix_space=False)
    ws.retry()
    same = ws.offers.show(backend, ws.spot, other)
    assert (same.source, same.lone) == ("same", None)
    shallow = SearchParams(cutoff=0.1, max_depth=4, max_suggestions=1)
    assert ws.offers.show(Down(seed=5), ws.spot, shallow).error  # failed: asked again below
    ws.retry()
    again = ws.offers.show(backend, ws.spot, shallow)
    assert again.source == "searched" and ws.take_lone(again.lone, prefix_space=False)
    assert ws.text == "a b." + again.lone.text


def test_a_lone_row_standing_for_variants_is_the_writers_choice_not_taken(tmp_path):
    """ " b," and " b." are one row (weave.search.rows): the writer may want either."""
    table = {(): {" ": 0.6, "x": 0.2}, (" ",): {"b": 0.9}, (" ", "b"): {",": 0.5, ".": 0.45}}
    backend = FakeBackend(lambda beam: table.get(beam, {"c": 0.9}))
    ws = opened(tmp_path, "x")  # one id (not healed): the tables read what follows it
    shown = ws.offers.show(backend, ws.spot, SearchParams(cutoff=0.5, multiplier=1.0, max_depth=3))
    [row] = shown.offer.result.suggestions
    assert row.variants and shown.lone is None


def test_a_search_look_ahead_made_is_shown_as_its_own_without_a_live_line(tmp_path):
    backend, ws = FakeBackend(seed=5), opened(tmp_path)
    shown = ws.offers.show(backend, ws.spot, PARAMS)
    ws.offers.look_ahead(backend, ws.spot, shown.offer, rows=1)
    ended(ws.ahead, timeout=30)
    top = shown.offer.result.suggestions[0]
    ws.accept(shown.offer.piece(top), None, prefix_space=False)
    calls, reports = len(backend.calls), []
    after = ws.offers.show(backend, ws.spot, PARAMS, searching=lambda: reports.append("start"))
    assert after.source == "ahead" and after.offer.node_id == ws.cursor
    assert len(backend.calls) == calls and reports == []
    assert ws.offers.show(backend, ws.spot, PARAMS).source == "ahead"  # kept: still its own
    assert "from look-ahead" in messages.shown_status(
        after.offer.result, after.source, failed=False
    )


class FailingReads(FakeBackend):
    """The fake model whose long reads fail (its server went away while reading)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed=seed)
        self.reads = 0

    def unread(self, context):
        return 2048

    def read_ahead(self, context, k, report):
        self.reads += 1
        raise BackendError("connection reset", backend="fake", url="http://127.0.0.1:9")


def test_a_failed_background_read_is_said_once_and_not_repeated_until_asked(tmp_path):
    ws, backend = opened(tmp_path), FailingReads(seed=5)
    alive = lambda: True  # noqa: E731
    assert ws.offers.show(backend, ws.spot, PARAMS, alive=alive).source == "reading"
    ended(ws.offers.reading)
    failed = ws.offers.show(backend, ws.spot, PARAMS, alive=alive)
    assert (failed.source, failed.offer) == ("none", None) and "connection reset" in failed.error
    quiet = ws.offers.show(backend, ws.spot, PARAMS, alive=alive)  # a rerun: no new read
    assert (quiet.source, quiet.error, backend.reads) == ("none", None, 1)
    ws.retry()
    assert ws.offers.show(backend, ws.spot, PARAMS, alive=alive).source == "reading"
    ended(ws.offers.reading)
    assert backend.reads == 2
