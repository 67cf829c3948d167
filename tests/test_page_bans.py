"""The page's Bans & bias panel, through Streamlit's AppTest on the deterministic fake
model: a phrase banned there is saved with the story, never suggested, and the status
line says how many branches the bans pruned; a bad entry is one line naming it."""

from __future__ import annotations

import time
from dataclasses import replace

from tests.test_page import app, choices, offer, started, status_line, workspace
from weave.story.bans import BanRule, Bans


def key(at, name: str) -> str:
    return f"bans_{name}_{at.query_params['story']}_1"


def test_a_phrase_banned_on_the_page_is_saved_and_never_suggested(fake):
    at = started("a cab. a bac,\nabc abc,\nb a c,")
    before = [s.text for s in offer(at).result.suggestions]
    assert any(" b" in t for t in before)  # the fake model offers the word "b"
    at.text_area(key=key(at, "phrases")).set_value("b").run()
    assert not at.exception
    assert workspace(at).settings.bans == Bans((BanRule("b"),))
    after = offer(at).result
    assert after.pruned and not any(" b" in s.text for s in after.suggestions)
    assert f"🚫 {len(after.pruned)} pruned by the bans" in status_line(at)
    again = app(story=at.query_params["story"], node=at.query_params["node"])
    assert not again.exception and workspace(again).settings.bans == Bans((BanRule("b"),))
    assert again.text_area(key=key(again, "phrases")).value == "b"


def test_a_bad_entry_is_one_line_naming_it_and_the_saved_bans_stay(fake):
    at = started("a cab. a bac,")
    at.text_area(key=key(at, "phrases")).set_value("a").run()
    at.text_area(key=key(at, "regex")).set_value("ok\n(unclosed").run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "**Not saved.** pattern line 2 ('(unclosed') is not a valid regular expression: "
        "missing ): (unclosed"
    ]
    at.text_area(key=key(at, "regex")).set_value("").run()
    at.text_area(key=key(at, "bias")).set_value("c = lots").run()
    assert [e.value for e in at.error] == [
        "**Not saved.** bias line 1: write “phrase = weight”, weight a number"
    ]
    assert workspace(at).settings.bans == Bans((BanRule("a"),))


def test_a_lookbehind_is_refused_by_name_and_a_story_saved_with_one_still_opens(fake):
    at = started("a cab. a bac,")
    at.text_area(key=key(at, "regex")).set_value("(?<=a )b").run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "**Not saved.** pattern line 1 ('(?\\<=a )b') uses a lookbehind (?\\<=…), which "
        "patterns cannot: they run in time linear in the text"
    ]
    ws = workspace(at)
    saved = {"text": "(?<=a )b", "regex": True}  # as a story saved before RE2 keeps it
    ws.store.save_settings(ws.story_id, {"bans": {"rules": [{"text": "c"}, saved]}})
    again = app(story=at.query_params["story"])
    assert not again.exception and workspace(again).settings.bans == Bans((BanRule("c"),))
    warning = " ".join(w.value for w in again.warning)
    assert "A saved ban pattern cannot run and is left out" in warning
    assert "uses a lookbehind" in warning and "other bans apply" in warning


def test_patterns_that_backtrack_forever_in_python_cost_the_page_nothing(fake):
    at = started("a cab. a bac,\nabc abc,\nb a c, " + "a " * 40 + "aaaaaaaaaaaaaaaaaaaaaaaaa.")
    catastrophic = ["(\\w+\\s?)+$", "(a+)+$", "(a|aa)+$", "(a*)*b", "(.*a){25}"]
    started_at = time.monotonic()
    at.text_area(key=key(at, "regex")).set_value("\n".join(catastrophic)).run(timeout=20)
    at.button(key="again").click().run(timeout=20)
    assert not at.exception and time.monotonic() - started_at < 10
    assert [r.text for r in workspace(at).settings.bans.rules] == catastrophic
    assert offer(at).result.pruned  # searched under them, in no time


def test_the_alternatives_the_bans_would_prune_are_marked(data_dir):
    at = started()  # the real embedded model gives the story's own tokens' alternatives
    at.button(key="alt_show").click().run()
    rows = at.session_state["page"].alternatives.rows
    upon = next(row for row in rows if row.text == " upon")
    at.text_input(key="alt_pick").set_value(str(upon.position)).run()  # a click on it
    word = next(c.text.strip() for c in upon.top if c.text.strip().isalpha())
    assert not any(b.label.startswith("🚫") for b in choices(at, upon.position))
    (ws := workspace(at)).set_settings(replace(ws.settings, bans=Bans((BanRule(word),))))
    at.run()
    assert not at.exception
    buttons = choices(at, upon.position)
    marked = [c.text for c, b in zip(upon.top, buttons, strict=True) if b.label.startswith("🚫")]
    assert marked and all(t.strip().lower() == word.lower() for t in marked)
    assert all(word in b.help for b in buttons if b.label.startswith("🚫"))  # and why
