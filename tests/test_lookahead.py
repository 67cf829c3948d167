"""Look-ahead's engine (`weave.desk.lookahead`) on the fake model, and the batcher's order of
service (`backends.mlx.batching`): writers first, look-ahead after, never joined.

Look-ahead against the real MLX model is in test_lookahead_mlx.py."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from backends.base import Cancelled
from backends.mlx.batching import Batcher, Forward
from backends.mlx.worker import MLXWorker
from tests.background import ended
from tests.fake_backend import VOCAB, FakeBackend
from weave.config import ConfigError, LookAheadSettings, load_settings, settings_from_table
from weave.desk.lookahead import LookAhead
from weave.desk.session import Workspace
from weave.desk.spot import Offer
from weave.loom.store import LoomStore
from weave.search.beams import expand
from weave.search.params import SearchParams
from weave.story.bans import BanRule, Bans
from weave.story.guard import Guard
from weave.view import messages

STORY = [6, 0, 6, 1, 4]  # " a b,": an end no healing gives back (see test_healing.py)
PARAMS = SearchParams(cutoff=0.1, max_depth=6, max_suggestions=12)


def searched(backend, context, params=PARAMS):
    return expand(backend, list(context), params)


def same_search(a, b) -> bool:
    return a.suggestions == b.suggestions and a.tree.to_dict() == b.tree.to_dict()


@pytest.mark.parametrize("chains", [False, True])
def test_each_look_ahead_equals_the_search_made_after_accepting(chains):
    backend = FakeBackend(seed=5, chains=chains)
    shown = searched(backend, STORY)
    assert len(shown.suggestions) >= 4
    ahead = LookAhead(3)
    ahead.start(backend, STORY, shown.suggestions, PARAMS)
    ended(ahead, timeout=30)
    exact = [s for s in shown.suggestions if s.exact][:3]
    for s in exact:
        after = searched(FakeBackend(seed=5, chains=chains), STORY + list(s.token_ids))
        found = ahead.take("fake-model", STORY + list(s.token_ids), PARAMS)
        assert found is not None and same_search(found, after)
    fourth = shown.suggestions[3]
    assert ahead.take("fake-model", STORY + list(fourth.token_ids), PARAMS) is None


def test_a_lone_suggestion_found_ahead_is_followed_as_the_page_will_take_it():
    """After "a" the model is sure of "b" (one suggestion, which the page takes by itself),
    then of "c": look-ahead searches after each, so the writer who takes "a" is shown what
    follows the lone one without waiting."""
    table = {(): {"a": 0.5, "x": 0.4}, ("a",): {"b": 0.99}, ("a", "b"): {"c": 0.99}}
    params = SearchParams(cutoff=0.5, max_depth=1, max_suggestions=4, auto_stop=False)
    backend = FakeBackend(lambda beam: table.get(beam, {"x": 0.99}))
    story = [VOCAB.index("x")]  # the fake's tables read what follows the story's one id
    [top] = [s for s in searched(backend, story, params).suggestions if s.text == "a"]
    ahead = LookAhead(1)
    ahead.start(backend, story, [top], params)
    ended(ahead, timeout=30)
    [lone] = ahead.take("fake-model", story + list(top.token_ids), params).suggestions
    assert lone.text == "b" and not lone.variants
    after_lone = ahead.take("fake-model", story + list(top.token_ids + lone.token_ids), params)
    assert after_lone is not None and [s.text for s in after_lone.suggestions] == ["c"]


class Paced(FakeBackend):
    """The fake model, each forward's start time noted; the first one waits for `go`."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.starts: list[float] = []
        self.running, self.go = threading.Event(), threading.Event()

    def top_logprobs(self, contexts, k):
        self.starts.append(time.monotonic())
        self.running.set()
        assert self.go.wait(30)
        return super().top_logprobs(contexts, k)


def test_a_hold_keeps_look_ahead_from_the_cpu_until_it_passes_then_it_goes_on():
    shown = searched(FakeBackend(seed=5), STORY)
    backend, ahead = Paced(seed=5), LookAhead(2)
    ahead.start(backend, STORY, shown.suggestions, PARAMS)
    assert backend.running.wait(30)  # a forward is under way when the page begins a run
    held_at = time.monotonic()
    ahead.hold(0.5)
    backend.go.set()  # the forward in progress ends; the next waits out the hold
    ended(ahead, timeout=30)
    later = [t for t in backend.starts if t > held_at]
    assert later and min(later) >= held_at + 0.5
    for s in [s for s in shown.suggestions if s.exact][:2]:  # nothing was dropped for it
        assert ahead.ready("fake-model", STORY + list(s.token_ids), PARAMS)


def test_a_move_during_a_hold_stops_look_ahead_without_waiting_it_out():
    shown = searched(FakeBackend(seed=5), STORY)
    backend, ahead = FakeBackend(seed=5), LookAhead(2)
    ahead.hold(3600)  # an hour: a run that waited it out would fail the wait below
    ahead.start(backend, STORY, shown.suggestions, PARAMS)
    ahead.cancel()
    ended(ahead, timeout=5)
    assert not any(ahead.ready("fake-model", STORY + list(s.token_ids), PARAMS)
                   for s in shown.suggestions)  # fmt: skip


def test_results_are_keyed_by_model_and_parameters():
    backend = FakeBackend(seed=5)
    shown = searched(backend, STORY)
    ahead = LookAhead(1)
    ahead.start(backend, STORY, shown.suggestions, PARAMS)
    ended(ahead, timeout=30)
    ids = STORY + list(shown.suggestions[0].token_ids)
    assert ahead.ready("fake-model", ids, PARAMS)
    assert not ahead.ready("other-model", ids, PARAMS)
    assert not ahead.ready("fake-model", ids, replace(PARAMS, cutoff=0.2))
    assert not ahead.ready("fake-model", STORY, PARAMS)


def test_no_look_ahead_from_a_suggestion_whose_ids_do_not_spell_its_text():
    backend = FakeBackend(seed=5)
    shown = searched(backend, STORY)
    edited = [replace(s, exact=False) for s in shown.suggestions[:2]] + shown.suggestions[2:]
    ahead = LookAhead(2)
    plans = ahead.plans("fake-model", STORY, edited, PARAMS)
    assert [p.context[len(STORY) :] for p in plans] == [
        tuple(s.token_ids) for s in shown.suggestions[2:4]
    ]
    ahead.start(backend, STORY, edited, PARAMS)
    ended(ahead, timeout=30)
    for s in shown.suggestions[:2]:
        assert not ahead.ready("fake-model", STORY + list(s.token_ids), PARAMS)


def test_no_look_ahead_where_the_next_search_would_not_fit_the_window():
    """Near the window's end the accepted node's context is cut by build_context: ids
    look-ahead cannot know, so it makes no search there (one it made would not be found)."""
    backend = FakeBackend(seed=5)
    shown = searched(backend, STORY)
    lengths = sorted({len(s.token_ids) for s in shown.suggestions[:4] if s.exact})
    assert len(lengths) > 1  # the window below keeps the short ones only
    window = len(STORY) + lengths[0] + PARAMS.max_depth
    ahead = LookAhead(4)
    plans = ahead.plans("fake-model", STORY, shown.suggestions, PARAMS, window=window)
    everything = ahead.plans("fake-model", STORY, shown.suggestions, PARAMS)
    assert plans == [p for p in everything if len(p.context) == len(STORY) + lengths[0]]
    assert plans and len(plans) < len(everything)
    fitted = FakeBackend(seed=5, context_length=window)
    ahead.start(fitted, STORY, shown.suggestions, PARAMS)
    ended(ahead, timeout=30)
    assert [p for p in everything if ahead.ready("fake-model", p.context, PARAMS)] == plans


def test_zero_rows_searches_nothing():
    backend = FakeBackend(seed=5)
    shown = searched(backend, STORY)
    calls = len(backend.calls)
    ahead = LookAhead(0)
    ahead.start(backend, STORY, shown.suggestions, PARAMS)
    ended(ahead, timeout=30)
    assert len(backend.calls) == calls


class Gated(FakeBackend):
    """Each call waits for the test to open the gate, so it can act between depths."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.asked = threading.Semaphore(0)
        self.gate = threading.Semaphore(0)

    def top_logprobs(self, contexts, k):
        self.asked.release()
        assert self.gate.acquire(timeout=30)
        return super().top_logprobs(contexts, k)


def test_cancel_stops_the_run_at_its_next_depth_and_keeps_nothing_unfinished():
    backend = FakeBackend(seed=5)
    shown = searched(backend, STORY)
    gated = Gated(seed=5)
    ahead = LookAhead(3)
    ahead.start(gated, STORY, shown.suggestions, PARAMS)
    assert gated.asked.acquire(timeout=30)  # the first depth is being asked
    ahead.cancel()
    gated.gate.release()  # it answers; the search stops before asking another
    ended(ahead, timeout=30)
    assert gated.calls == [1]
    assert not any(
        ahead.ready("fake-model", STORY + list(s.token_ids), PARAMS) for s in shown.suggestions
    )


def lookahead_threads() -> list[threading.Thread]:
    """The look-ahead runs still alive (other tests' servers and pools may hold threads)."""
    return [t for t in threading.enumerate() if t.name == "lloom-lookahead"]


def test_a_new_start_replaces_the_run_and_a_tab_gone_stops_it():
    backend = FakeBackend(seed=5)
    shown = searched(backend, STORY)
    gated = Gated(seed=5)
    ahead = LookAhead(3)
    ahead.start(gated, STORY, shown.suggestions, PARAMS)
    assert gated.asked.acquire(timeout=30)
    alive = threading.Event()  # never set: the tab is gone
    ahead.start(gated, STORY, shown.suggestions[1:], PARAMS, alive=alive.is_set)
    for _ in range(2):
        gated.gate.release()
    deadline = time.monotonic() + 30
    while lookahead_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not ahead.running() and not lookahead_threads()
    assert len(gated.calls) <= 2  # each run stopped after the depth it was in


def test_asked_again_for_the_same_searches_a_run_goes_on_and_after_a_cancel_starts_again():
    shown = searched(FakeBackend(seed=5), STORY)
    plain = FakeBackend(seed=5)
    for s in shown.suggestions[:2]:
        searched(plain, STORY + list(s.token_ids))
    gated = Gated(seed=5)
    ahead = LookAhead(2)
    ahead.start(gated, STORY, shown.suggestions, PARAMS)
    assert gated.asked.acquire(timeout=30)
    ahead.start(gated, STORY, shown.suggestions, PARAMS)  # a page rerun: nothing restarts
    for _ in range(1000):
        gated.gate.release()
    ended(ahead, timeout=30)
    assert gated.calls == plain.calls
    assert all(
        ahead.ready("fake-model", STORY + list(s.token_ids), PARAMS) for s in shown.suggestions[:2]
    )
    ahead.cancel()
    ahead.start(gated, STORY, shown.suggestions[2:], replace(PARAMS, cutoff=0.3))
    ended(ahead, timeout=30)
    assert ahead.ready("fake-model", STORY + list(shown.suggestions[2].token_ids),
                       replace(PARAMS, cutoff=0.3))  # fmt: skip


# -- settings ----------------------------------------------------------------------------
def test_defaults_are_three_rows_on_mlx_and_off_for_openai():
    settings = load_settings(env={})
    assert settings.lookahead == LookAheadSettings(rows=None)
    assert settings.lookahead_rows("mlx") == 3
    assert settings.lookahead_rows("openai") == 0


def test_rows_from_the_file_and_the_environment_apply_to_every_backend():
    assert settings_from_table({"lookahead": {"rows": 5}}).lookahead_rows("openai") == 5
    assert load_settings(env={"LLOOM_LOOKAHEAD": "0"}).lookahead_rows("mlx") == 0
    assert load_settings(env={"LLOOM_LOOKAHEAD": "2"}).lookahead_rows("vllm") == 2


@pytest.mark.parametrize(
    "table, env, message",
    [
        ({"lookahead": {"rows": 11}}, {}, "[lookahead] rows must be a whole number in 0..10"),
        ({"lookahead": {"rows": -1}}, {}, "not -1"),
        ({"lookahead": {"rows": 1.5}}, {}, "expected a whole number, got 1.5"),
        ({"lookahead": {"row": 1}}, {}, "unknown key 'row'"),
        ({}, {"LLOOM_LOOKAHEAD": "99"}, "LLOOM_LOOKAHEAD must be a whole number in 0..10"),
        ({}, {"LLOOM_LOOKAHEAD": "three"}, "LLOOM_LOOKAHEAD='three' is not a valid int"),
    ],
)
def test_rows_out_of_range_are_refused_by_name(tmp_path, table, env, message):
    path = tmp_path / "config.toml"
    lines = [f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items())
             for name, keys in table.items()]  # fmt: skip
    path.write_text("".join(lines))
    with pytest.raises(ConfigError) as refused:
        load_settings(path, env)
    assert message in str(refused.value)


# -- the batcher: writers first --------------------------------------------------------------
class Recorder:
    """Stands for the backend's forward: records each call's contexts, and holds a call
    until the test lets it go when `hold` is set."""

    def __init__(self):
        self.calls: list[set] = []
        self.hold = threading.Event()
        self.held = threading.Event()
        self.go = threading.Event()

    def __call__(self, contexts, k, asked, background=False):
        self.calls.append(set(contexts))
        if self.hold.is_set():
            self.held.set()
            assert self.go.wait(30)
        answers = {c: [f"{c}:{i}" for i in range(k)] for c in contexts}
        return answers, [Forward(tuple(sorted(contexts)), 1, prefill=False)]


def on_thread(fn):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("future", fn()))
    t.start()
    t.join()
    return box["future"]


def test_pending_writers_run_before_look_ahead_and_never_in_its_forward():
    worker, run = MLXWorker(), Recorder()
    batcher = Batcher(worker.submit, run, window=0.0)
    busy = threading.Event()
    worker.submit(busy.wait)
    try:
        ahead = on_thread(lambda: batcher.ask({(9, 1)}, 2, background=True))
        writer_a = on_thread(lambda: batcher.ask({(1, 1)}, 2))
        writer_b = on_thread(lambda: batcher.ask({(2, 1)}, 2))
        busy.set()
        for f in (ahead, writer_a, writer_b):
            f.result(timeout=30)
        assert run.calls == [{(1, 1), (2, 1)}, {(9, 1)}]
    finally:
        busy.set()
        worker.stop()


def test_look_ahead_waits_for_a_writers_search_to_end_however_slow_between_depths():
    worker, run = MLXWorker(), Recorder()
    batcher = Batcher(worker.submit, run, window=0.0)  # no window: the wait is by design
    ahead = []
    try:

        def writer():
            with batcher.searching():
                for depth in range(3):
                    batcher.ask({(1, depth)}, 1).result(timeout=30)
                    if depth == 0:  # look-ahead asks while this writer is between depths
                        ahead.append(on_thread(lambda: batcher.ask({(9,)}, 1, background=True)))
                    time.sleep(0.3)  # the writer's own Python, slow on a loaded machine

        t = threading.Thread(target=writer)
        t.start()
        t.join(timeout=60)
        ahead[0].result(timeout=30)  # served once the writer's search has ended
        assert run.calls == [{(1, 0)}, {(1, 1)}, {(1, 2)}, {(9,)}]
    finally:
        worker.stop()


def test_a_writer_never_waits_for_the_window_after_look_ahead():
    worker, run = MLXWorker(), Recorder()
    batcher = Batcher(worker.submit, run, window=3600.0)  # a wait would take an hour
    try:
        on_thread(lambda: batcher.ask({(9,)}, 1, background=True)).result(timeout=30)
        started = time.monotonic()
        batcher.ask({(1,)}, 1).result(timeout=30)
        assert time.monotonic() - started < 5
    finally:
        worker.stop()


def test_a_writer_arriving_during_a_look_ahead_forward_runs_next():
    worker, run = MLXWorker(), Recorder()
    batcher = Batcher(worker.submit, run, window=0.0)
    try:
        run.hold.set()
        ahead = on_thread(lambda: batcher.ask({(9, 1)}, 1, background=True))
        assert run.held.wait(30)  # look-ahead's forward is running
        run.hold.clear()
        more_ahead = on_thread(lambda: batcher.ask({(9, 2)}, 1, background=True))
        writer = on_thread(lambda: batcher.ask({(1, 1)}, 1))
        run.go.set()
        for f in (ahead, more_ahead, writer):
            f.result(timeout=30)
        assert run.calls == [{(9, 1)}, {(1, 1)}, {(9, 2)}]
    finally:
        run.go.set()
        worker.stop()


def test_look_ahead_no_longer_wanted_is_dropped_unrun():
    worker, run = MLXWorker(), Recorder()
    batcher = Batcher(worker.submit, run, window=0.0)
    busy = threading.Event()
    worker.submit(busy.wait)
    try:
        ahead = on_thread(lambda: batcher.ask({(9,)}, 1, lambda: False, background=True))
        busy.set()
        with pytest.raises(Cancelled):
            ahead.result(timeout=30)
        assert run.calls == []
    finally:
        busy.set()
        worker.stop()


# -- through a tab's offers (weave.desk.offers, weave.desk.session) ----------------------------
def read_with_look_ahead(tmp_path, rows: int) -> tuple[FakeBackend, Workspace, Offer]:
    """A tab showing the suggestions after "a b", and look-ahead from its top `rows` done."""
    backend = FakeBackend(seed=5)
    ws = Workspace(LoomStore(tmp_path))
    assert ws.start("a b")
    shown = ws.offers.suggest(backend, ws.spot, PARAMS)
    ws.offers.look_ahead(backend, ws.spot, shown, rows=rows)
    ended(ws.ahead, timeout=30)
    return backend, ws, shown


def test_accepting_a_suggestion_looked_ahead_shows_its_search_at_once(tmp_path):
    backend, ws, shown = read_with_look_ahead(tmp_path, rows=2)
    top = shown.result.suggestions[0]
    assert ws.offers.ahead_ready(backend, ws.spot, shown) == {
        s.token_ids for s in shown.result.suggestions[:2]
    }
    ws.accept(shown.piece(top), None, prefix_space=False)
    calls = len(backend.calls)
    offer = ws.offers.suggest(backend, ws.spot, PARAMS)
    assert len(backend.calls) == calls  # nothing asked of the model
    assert ws.offers.from_ahead(offer)
    assert "from look-ahead" in messages.search_status(offer.result, ahead=True)
    ids = ws.offers.contexts.ids.path_ids(backend, ws.spot.loom, ws.cursor)
    assert same_search(offer.result, searched(FakeBackend(seed=5), ids))


def test_an_edited_suggestion_searches_normally_and_a_move_stops_look_ahead(tmp_path):
    backend, ws, shown = read_with_look_ahead(tmp_path, rows=3)
    top = shown.result.suggestions[0]
    ws.accept(shown.piece(top), top.text + "a", prefix_space=False)  # edited before accepting
    offer = ws.offers.suggest(backend, ws.spot, PARAMS)
    assert not ws.offers.from_ahead(offer)
    ids = ws.offers.contexts.ids.path_ids(backend, ws.spot.loom, ws.cursor)
    assert same_search(offer.result, searched(FakeBackend(seed=5), ids))
    gated = Gated(seed=5)
    ws.offers.look_ahead(gated, ws.spot, offer, rows=3)
    assert gated.asked.acquire(timeout=30)
    ws.undo()  # the writer moves: look-ahead stops at its next depth
    gated.gate.release()
    ended(ws.ahead, timeout=30)
    assert gated.calls == [1]


def test_suggest_again_searches_anew_even_where_look_ahead_made_it(tmp_path):
    backend, ws, shown = read_with_look_ahead(tmp_path, rows=1)
    ws.accept(shown.piece(shown.result.suggestions[0]), None, prefix_space=False)
    ws.retry()
    calls = len(backend.calls)
    offer = ws.offers.suggest(backend, ws.spot, PARAMS)
    assert len(backend.calls) > calls and not ws.offers.from_ahead(offer)


def test_under_bans_look_ahead_searches_with_them_and_accepting_shows_its_search(tmp_path):
    """Issue 33: look-ahead searched without the story's bans, so it was not used under them."""
    bans = Bans((BanRule("the"),))
    backend, ws = FakeBackend(seed=5), Workspace(LoomStore(tmp_path))
    assert ws.start("a b")
    ws.set_settings(replace(ws.settings, bans=bans))
    shown = ws.offers.suggest(backend, ws.spot, PARAMS)
    ws.offers.look_ahead(backend, ws.spot, shown, rows=2)
    ended(ws.ahead, timeout=30)
    top = shown.result.suggestions[0]
    assert ws.offers.ahead_ready(backend, ws.spot, shown) == {
        s.token_ids for s in shown.result.suggestions[:2]
    }
    ws.accept(shown.piece(top), None, prefix_space=False)
    calls = len(backend.calls)
    offer = ws.offers.suggest(backend, ws.spot, PARAMS)
    assert len(backend.calls) == calls and ws.offers.from_ahead(offer)  # nothing asked anew
    story = ws.spot.loom.text(ws.cursor)
    ids = ws.offers.contexts.ids.path_ids(backend, ws.spot.loom, ws.cursor)
    guarded = expand(FakeBackend(seed=5), ids, PARAMS, guard=Guard(bans, story))
    assert same_search(offer.result, guarded) and offer.result.pruned == guarded.pruned

    def banned_in(result) -> int:
        find = bans.compiled().banned.find
        return sum(
            any(h.end > len(story) for h in find(story + s.text)) for s in result.suggestions
        )

    assert banned_in(searched(FakeBackend(seed=5), ids)) > 0  # without the bans: "the" is there
    assert banned_in(offer.result) == 0 and offer.result.pruned
    # under other bans (none), look-ahead's search is not that one
    ws.set_settings(replace(ws.settings, bans=Bans()))
    assert not ws.offers.ahead.ready(backend.model_name, ids, PARAMS)
