"""The page's flows through Streamlit's AppTest: elements asserted, never an exception.

Most flows run on the deterministic fake model (the flow is under test, not the model),
installed through `weave.session.backend_factory`; one runs on the real embedded model,
and a few on real llama.cpp-shaped servers that answer badly (tests/hostile_servers.py).
Every test gets its own data folder (LLOOM_DATA_DIR) and a fresh shared backend.
"""

from __future__ import annotations

import json
import math
import socket
import sqlite3
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from backends import BackendError
from tests.fake_backend import FakeBackend
from tests.hostile_servers import hostile_server
from weave import session, store

PAGE = str(Path(__file__).resolve().parent.parent / "lloom.py")
FIRST = "Once upon a time,"


class StoryFake(FakeBackend):
    """The fake model, reading any story (unknown characters read as 'x'); `down` makes
    it fail as an unreachable server would."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.down = False

    def tokenize(self, text: str) -> list[int]:
        return super().tokenize("".join(c if c in "abc., xé" else "x" for c in text))

    def top_logprobs(self, contexts, k):
        if self.down:
            raise BackendError("connection refused; is the server running?", backend="fake",
                               url="http://127.0.0.1:9")  # fmt: skip
        return super().top_logprobs(contexts, k)


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LLOOM_DATA_DIR", str(tmp_path))
    st.cache_resource.clear()  # settings and backend are per process: start afresh
    yield tmp_path
    st.cache_resource.clear()


@pytest.fixture
def fake(data_dir, monkeypatch) -> StoryFake:
    backend = StoryFake(seed=1)
    monkeypatch.setattr(session, "backend_factory", lambda settings: backend)
    return backend


def app(**query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def started(text: str | None = None) -> AppTest:
    at = app()
    if text is not None:
        at.radio(key="start_choice").set_value("✍️ Write my own").run()
        at.text_area(key="start_text").set_value(text)
    at.button(key="start").click().run()
    assert not at.exception
    return at


def story(at: AppTest) -> str:
    return at.text_area(key="story_text").value


def suggestions(at: AppTest) -> list[str]:
    return [box.value for box in at.text_input if box.key.startswith("sg_")]


def accept(at: AppTest, index: int) -> AppTest:
    box = [b for b in at.text_input if b.key.startswith("sg_")][index]
    return at.button(key=f"{box.key}_go").click().run()


def backend_error(at: AppTest) -> str:
    """The page's one message about the model ('' when there is none)."""
    return " ".join(e.value for e in at.error if e.icon == "🔌")


def workspace(at: AppTest) -> session.Workspace:
    return at.session_state["ws"]


def history(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith("History"))


# -- the floor ------------------------------------------------------------------------------
def test_start_page_offers_the_starting_stories(fake):
    at = app()
    assert not at.exception
    options = at.radio(key="start_choice").options
    assert options[0] == FIRST and len(options) == 4
    assert at.button(key="start")


def test_start_shows_story_suggestions_graph_and_stats(fake):
    at = started()
    assert story(at) == FIRST
    assert 5 <= len(suggestions(at)) <= 25
    assert at.get("graphviz_chart")
    labels = {b.label for b in at.get("download_button")}
    assert {"DOT", "PNG", "Story .txt", "Story .md", "Tree .json", "Graph .svg"} <= labels
    sidebar = " ".join(m.value for m in at.sidebar.markdown)
    assert "forward calls" in sidebar and "fake-model" in sidebar
    assert at.status[0].label.endswith("tokens/s")


def test_own_story_with_nothing_written_asks_for_words(fake):
    at = app()
    at.radio(key="start_choice").set_value("✍️ Write my own").run()
    at.button(key="start").click().run()
    assert not at.exception
    assert "Write a few words" in at.warning[0].value
    assert "story_text" not in [area.key for area in at.text_area]


def test_accept_appends_exactly_the_suggestion(fake):
    at = started()
    best = workspace(at).last_result().suggestions[0]
    assert suggestions(at)[0] == best.text.removeprefix(" ")  # shown without prefix space
    accept(at, 0)
    assert not at.exception
    accepted = workspace(at).history[1]
    assert accepted.kind == "accept" and accepted.text == FIRST + best.text
    assert story(at).startswith(FIRST + best.text)  # a lone next suggestion may follow


def test_an_edited_suggestion_is_accepted_as_edited(fake):
    at = started()
    box = [b for b in at.text_input if b.key.startswith("sg_")][1]
    had_space = workspace(at).last_result().suggestions[1].text.startswith(" ")
    box.set_value("my own words").run()
    accept(at, 1)
    assert not at.exception
    space = " " if had_space else ""
    assert workspace(at).history[1].text == FIRST + space + "my own words"


def test_without_prefix_space_the_box_holds_the_whole_text(fake):
    at = started()
    at.checkbox(key="cfg_prefix_space").uncheck().run()
    best = workspace(at).last_result().suggestions[0]
    assert suggestions(at)[0] == best.text
    accept(at, 0)
    assert workspace(at).history[1].text == FIRST + best.text


def test_edit_applies_and_searches_again(fake):
    at = started()
    before = suggestions(at)
    at.text_area(key="story_text").set_value("ab ab").run()
    assert not at.exception
    assert story(at) == "ab ab"
    assert suggestions(at) != before
    assert "2 states" in history(at)


def test_undo_and_redo_walk_the_history(fake):
    at = started()
    after_start = suggestions(at)
    at.text_area(key="story_text").set_value("ab ab").run()
    at.button(key="undo").click().run()
    assert story(at) == FIRST and suggestions(at) == after_start
    assert "at 1 of 2" in history(at)
    at.button(key="redo").click().run()
    assert story(at) == "ab ab" and "at 2 of 2" in history(at)
    assert not at.exception


def test_a_lone_suggestion_is_accepted_by_itself_a_few_times_at_most(data_dir, monkeypatch):
    certain = StoryFake(table=lambda beam: {"a": 0.95})  # one beam: nothing clears the cutoff
    monkeypatch.setattr(session, "backend_factory", lambda settings: certain)
    at = started()
    assert not at.exception
    ws = workspace(at)
    kinds = [change.kind for change in ws.history]
    assert kinds == ["start"] + ["accept"] * session.AUTO_ACCEPTS
    assert story(at) == FIRST + "a" * 12 * session.AUTO_ACCEPTS
    assert len(suggestions(at)) == 1  # then the writer decides
    at.button(key="undo").click().run()
    assert len(ws.history) == 1 + session.AUTO_ACCEPTS and ws.can_redo  # undo stays undone


def test_config_change_searches_with_the_new_parameters(fake):
    at = started()
    at.slider(key="cfg_max_suggestions").set_value(5).run()
    assert not at.exception
    assert len(suggestions(at)) == 5
    at.slider(key="cfg_max_depth").set_value(2).run()
    assert all(len(text) <= 2 * 4 for text in suggestions(at))


def test_config_defaults_come_from_the_model_settings(fake):
    at = started()
    assert at.slider(key="cfg_cutoff").value == pytest.approx(0.2)  # [search]: fake has none
    assert at.slider(key="cfg_max_depth").value == 12
    assert at.checkbox(key="cfg_auto_stop").value is True


def test_backend_error_keeps_story_and_suggestions(fake):
    at = started()
    shown = suggestions(at)
    fake.down = True
    at.button(key="again").click().run()
    assert not at.exception
    assert story(at) == FIRST
    assert suggestions(at) == shown
    message = backend_error(at)
    assert "connection refused" in message and "127.0.0.1:9" in message
    fake.down = False
    at.button(key="again").click().run()
    assert not backend_error(at) and suggestions(at) == shown


def test_a_backend_that_cannot_load_leaves_the_page_working(data_dir, monkeypatch):
    def broken(settings):
        raise BackendError("no server address: set LLAMA_API_URL", backend="llamacpp")

    monkeypatch.setattr(session, "backend_factory", broken)
    at = started()
    assert not at.exception
    assert story(at) == FIRST
    assert "LLAMA\\_API\\_URL" in backend_error(at)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the socket is


@pytest.mark.parametrize(
    "variable, name", [("LLAMA_API_URL", "llamacpp"), ("VLLM_API_URL", "vllm")]
)
def test_an_unreachable_server_is_one_clear_message(data_dir, monkeypatch, variable, name):
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv(variable, url)  # a real connection, refused
    at = started()
    assert not at.exception
    assert story(at) == FIRST
    error = backend_error(at)
    assert "cannot connect" in error and url in error
    assert name in " ".join(m.value for m in at.sidebar.markdown)
    at.text_area(key="story_text").set_value(FIRST + " still here").run()
    assert not at.exception and story(at) == FIRST + " still here"
    at.button(key="retry_backend").click().run()  # tries again, fails the same way
    assert not at.exception and "cannot connect" in backend_error(at)


# -- the real embedded model ----------------------------------------------------------------
@pytest.mark.slow
def test_the_real_model_suggests_and_accepting_costs_no_prefill(data_dir):
    at = started()  # session.backend_factory is the real registry: MLX, embedded model
    assert not at.exception and not backend_error(at)
    ws = workspace(at)
    first = ws.last_result()
    assert first.stats.backend == "mlx" and first.stats.model == "SmolLM2-135M-Instruct"
    assert len(first.suggestions) >= 5 and all(s.text.strip() for s in first.suggestions)
    assert suggestions(at)[0] == first.suggestions[0].text.removeprefix(" ")
    at.slider(key="cfg_max_depth").set_value(4).run()
    at.slider(key="cfg_max_suggestions").set_value(5).run()
    best = ws.last_result().suggestions[0]
    accept(at, 0)
    assert not at.exception and not backend_error(at)
    assert ws.history[1].text == FIRST + best.text
    after = next(r for (text, _), r in ws.results.items() if text == FIRST + best.text)
    # the accepted beam's ids were kept, so its KV was reused: nothing to prefill
    assert after.stats.prefill_tokens == 0
    assert len(suggestions(at)) >= 1


# -- nothing lost ---------------------------------------------------------------------------
def story_id(at: AppTest) -> str:
    return at.query_params["story"]


def test_a_refreshed_tab_comes_back_to_the_same_story(fake):
    at = started()
    accept(at, 0)
    at.slider(key="cfg_max_depth").set_value(7).run()
    text, shown = story(at), suggestions(at)
    calls = len(fake.calls)
    again = app(story=story_id(at))  # a new session with the same URL
    assert not again.exception
    assert story(again) == text
    assert history(again) == history(at)
    assert again.slider(key="cfg_max_depth").value == 7
    assert suggestions(again) == shown and len(fake.calls) == calls  # no search needed
    again.button(key="undo").click().run()
    assert story(again) == workspace(at).history[-2].text


def test_an_unknown_story_in_the_url_says_so(fake):
    at = app(story="no-such-story")
    assert not at.exception
    assert "no-such-story" in at.warning[0].value
    assert at.button(key="start")


def test_stories_are_listed_reopened_renamed_and_new_ones_started(fake):
    at = started()
    at.text_input(key=f"title_{story_id(at)}").set_value("My fox tale").run()
    first_id = story_id(at)
    at.button(key="close").click().run()
    assert "story" not in at.query_params
    assert at.button(key=f"open_{first_id}").label == "📖 My fox tale"
    at = started("ab ab")  # a second story, in a new session
    at.button(key="close").click().run()
    assert len([b for b in at.button if b.key.startswith("open_")]) == 2
    at.button(key=f"open_{first_id}").click().run()
    assert not at.exception and story(at) == FIRST and story_id(at) == first_id


def test_delete_asks_first_and_keeps_the_story_until_purged(fake):
    at = started()
    sid = story_id(at)
    at.button(key="close").click().run()
    at.button(key=f"delete_{sid}").click().run()
    assert "stays recoverable" in at.warning[0].value
    at.button(key=f"delete_no_{sid}").click().run()
    assert at.button(key=f"open_{sid}")
    at.button(key=f"delete_{sid}").click().run()
    at.button(key=f"delete_yes_{sid}").click().run()
    assert f"open_{sid}" not in [b.key for b in at.button]
    at.button(key=f"restore_{sid}").click().run()
    assert at.button(key=f"open_{sid}")
    at.button(key=f"delete_{sid}").click().run()
    at.button(key=f"delete_yes_{sid}").click().run()
    at.button(key=f"purge_{sid}").click().run()
    at.button(key=f"purge_yes_{sid}").click().run()
    assert not at.exception
    assert sid not in " ".join(b.key for b in at.button)
    gone = app(story=sid)
    assert gone.warning and gone.button(key="start")


def test_a_session_exported_and_imported_is_the_same_story(fake):
    at = started()
    accept(at, 0)
    at.slider(key="cfg_max_suggestions").set_value(7).run()
    ws = workspace(at)
    exported = session.export_session(ws)
    labels = {b.label for b in at.get("download_button")}
    assert "Session .json" in labels
    fresh = app()
    fresh.file_uploader[0].set_value(("s.json", exported.encode(), "application/json")).run()
    assert not fresh.exception
    assert story(fresh) == story(at)
    assert history(fresh) == history(at)
    assert fresh.slider(key="cfg_max_suggestions").value == 7
    assert suggestions(fresh) == suggestions(at)
    assert story_id(fresh) != story_id(at)  # a new story, the old one untouched


@pytest.mark.parametrize(
    "content",
    [b"not json", b'{"format": "other"}', b'{"format": "lloom-session", "history": []}',
     b"\xff\xfe", b'{"format": "lloom-session", "history": [3]}'],
)  # fmt: skip
def test_a_bad_import_is_a_clear_message(fake, content):
    at = app()
    at.file_uploader[0].set_value(("bad.json", content, "application/json")).run()
    assert not at.exception
    assert "cannot be imported" in " ".join(e.value for e in at.error)
    assert at.button(key="start")


def test_a_damaged_search_or_settings_in_an_import_fall_back(fake):
    data = {
        "format": "lloom-session",
        "history": [{"text": "ab", "kind": "start"}, {"text": "ab \ud800 c", "kind": "edit"}],
        "position": 99,
        "settings": {"max_depth": "deep", "cutoff": 7, "score": "nonsense"},
        "search": {"params": {}, "tree": "nope"},
    }
    at = app()
    blob = json.dumps(data).encode()
    at.file_uploader[0].set_value(("odd.json", blob, "application/json")).run()
    assert not at.exception
    assert story(at) == "ab \ufffd c"
    assert at.slider(key="cfg_cutoff").value == 1.0  # clamped into the slider's range
    assert at.slider(key="cfg_max_depth").value == 12  # unusable: the default
    assert suggestions(at)  # searched afresh


def test_a_restarted_app_lists_the_saved_stories(fake, data_dir):
    at = started()
    accept(at, 0)
    text, sid = story(at), story_id(at)
    st.cache_resource.clear()  # as after a restart: the store is opened afresh from disk
    again = app()
    assert not again.exception
    [entry] = [b for b in again.button if b.key == f"open_{sid}"]
    assert entry.label == f"📖 {FIRST}"
    assert any(c.value.startswith("edited ") for c in again.caption)
    entry.click().run()
    assert story(again) == text
    assert (data_dir / "stories.sqlite3").exists()
    assert f"saved in `{data_dir}`" in " ".join(c.value for c in again.sidebar.caption)


def storage_alarm(at: AppTest) -> str:
    return " ".join(e.value for e in at.error if e.icon == "💾")


def test_a_corrupt_database_is_left_alone_and_the_page_works_in_memory(fake, data_dir):
    garbage = b"this is not SQLite " * 100
    (data_dir / "stories.sqlite3").write_bytes(garbage)
    at = started()
    assert not at.exception
    assert "in memory only" in storage_alarm(at)
    assert "not a LLooM database" in storage_alarm(at)
    assert story(at) == FIRST and suggestions(at)
    accept(at, 0)
    assert not at.exception
    assert (data_dir / "stories.sqlite3").read_bytes() == garbage


def test_a_damaged_story_entry_is_a_message_not_a_crash(fake, data_dir):
    at = started()
    sid = story_id(at)
    with sqlite3.connect(data_dir / "stories.sqlite3") as db:
        db.execute("UPDATE stories SET settings = '{broken' WHERE id = ?", (sid,))
    again = app(story=sid)
    assert not again.exception
    assert "cannot be read" in storage_alarm(again)
    assert not again.warning  # not 'no such story': it is there, and damaged
    assert again.button(key="start")


def test_an_unusable_data_folder_means_memory_and_says_so(fake, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("LLOOM_DATA_DIR", str(blocker / "data"))
    at = started()
    assert not at.exception
    assert "cannot create the data folder" in storage_alarm(at)
    assert story(at) == FIRST and suggestions(at)
    assert "in memory only" in " ".join(c.value for c in at.sidebar.caption)


def test_a_locked_database_keeps_the_change_and_saves_once_free(fake, data_dir, monkeypatch):
    monkeypatch.setattr(store, "BUSY_MS", 300)
    at = started()
    sid = story_id(at)
    lock = sqlite3.connect(data_dir / "stories.sqlite3", isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    at.text_area(key="story_text").set_value("ab ab").run()
    assert not at.exception
    assert "could not be saved" in storage_alarm(at) and "locked" in storage_alarm(at)
    assert story(at) == "ab ab"
    lock.execute("ROLLBACK")
    lock.close()
    at.text_area(key="story_text").set_value("ab ab c").run()
    assert not storage_alarm(at)
    assert store.Store(data_dir).load(sid).history[-1].text == "ab ab c"


# -- bad input ------------------------------------------------------------------------------
def test_a_hundred_thousand_character_story_works(fake):
    long = ("a b c. " * 15_000)[:100_000]
    at = started(long)
    assert not at.exception and not backend_error(at)
    assert story(at) == long
    assert suggestions(at)
    at.text_area(key="story_text").set_value(long + " x").run()
    assert not at.exception and story(at) == long + " x"


def test_the_status_tells_how_far_a_long_story_has_been_read():
    import lloom
    from weave.search import Progress

    reading = Progress(0, 0, 0, 512, 3.0, "", story_read=512, story_tokens=30_000)
    assert lloom.live(reading) == "Reading the story… 512 of 30,000 tokens"
    weaving = Progress(2, 1, 3, 40, 3.5, " the king")
    assert lloom.live(weaving).startswith("Weaving… depth 2, 1 found, 3 growing")


ODD = 'Emoji 👩‍👩‍👧, e\u0301, עברית, NUL \x00, $x$ *y* quote " back \\ <b>&amp;</b>'


def test_odd_characters_in_the_story_work(fake):
    at = started(ODD)
    assert not at.exception and not backend_error(at)
    assert story(at) == ODD
    assert suggestions(at) and at.get("graphviz_chart")
    source = at.get("graphviz_chart")[0].proto.spec
    assert 'quote \\" back \\\\ <b>&amp;amp;</b>' in source  # the story's tail, escaped


def test_a_lone_surrogate_is_replaced_not_a_crash():
    # a browser cannot send one (widget values are UTF-8); an imported file can
    ws = session.Workspace()
    ws.start("broken \ud800 text")
    assert ws.story.text == "broken \ufffd text"
    ws.edit("again \udfff")
    assert ws.story.text == "again \ufffd"


class FlakyBook(session.MemoryBook):
    """A book that fails while `down` (a full disk, a lock held too long)."""

    down = True

    def _fail(self):
        if self.down:
            raise session.BookError("disk full")

    def create(self, *args, **kwargs):
        self._fail()
        return super().create(*args, **kwargs)

    def record(self, *args):
        self._fail()
        return super().record(*args)


def test_a_story_the_book_could_not_take_is_saved_at_the_next_change():
    book = FlakyBook()
    ws = session.Workspace(book)
    ws.start("Once")
    assert ws.story_id is None and ws.save_error == "disk full"
    ws.edit("Once more")
    assert ws.story_id is None and ws.story.text == "Once more"  # kept in memory
    book.down = False
    ws.edit("Once more, again")
    assert ws.save_error is None
    assert book.load(ws.story_id).history[-1].text == "Once more, again"
    assert book.load(ws.story_id).title == "Once"


# -- bad data: a server answering badly, NaN in a saved or imported search ----------------
def notices(at) -> str:
    return " ".join(w.value for w in at.warning)


@pytest.mark.parametrize("mode, said", [("nan", "finite log-probability"), ("drip", "too slow")])
def test_a_server_answering_badly_is_one_clear_message(data_dir, monkeypatch, mode, said):
    with hostile_server("llamacpp", mode) as url:
        monkeypatch.setenv("LLAMA_API_URL", url)
        monkeypatch.setenv("LLAMA_TIMEOUT", "1")
        at = started()
    assert not at.exception
    assert story(at) == FIRST
    error = backend_error(at)
    assert said in error and url in error


def nan_search(data_dir, the_id: str) -> None:
    """Put NaN into a story's saved search, as a version that let NaN through saved it."""
    with sqlite3.connect(data_dir / "stories.sqlite3") as db:
        (tree,) = db.execute("SELECT tree FROM stories WHERE id = ?", (the_id,)).fetchone()
        search = json.loads(tree)
        search["suggestions"][0]["probability"] = math.nan
        db.execute("UPDATE stories SET tree = ? WHERE id = ?", (json.dumps(search), the_id))


def test_a_stored_search_holding_nan_is_ignored_with_a_message(fake, data_dir):
    at = started()
    nan_search(data_dir, story_id(at))
    again = app(story=story_id(at))  # reopened: the page used to crash here, every time
    assert not again.exception
    assert "not a finite number" in notices(again)
    assert story(again) == FIRST and suggestions(again)  # searched afresh


def test_an_imported_search_holding_nan_is_ignored_with_a_message(fake):
    at = started()
    exported = json.loads(session.export_session(at.session_state["ws"]))
    exported["search"]["tree"]["children"][0]["logprob"] = math.inf
    exported["settings"]["cutoff"] = math.nan  # not JSON: the story's own defaults instead
    fresh = app()
    blob = json.dumps(exported).encode()
    fresh.file_uploader[0].set_value(("nan.json", blob, "application/json")).run()
    assert not fresh.exception
    assert "not a finite number" in notices(fresh)
    assert story(fresh) == FIRST and suggestions(fresh)


class GgufNamed(StoryFake):
    """The fake model, named as llama-server names the embedded model."""

    @property
    def model_name(self) -> str:
        return "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_the_model_section_applies_to_a_gguf_name_and_the_page_says_which(data_dir, monkeypatch):
    monkeypatch.setattr(session, "backend_factory", lambda settings: GgufNamed(seed=1))
    at = started()
    assert not at.exception
    assert at.slider(key="cfg_cutoff").value == pytest.approx(0.1)  # not [search]'s 0.2
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert '[models."SmolLM2-135M-Instruct"]' in captions
