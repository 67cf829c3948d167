"""What the page says about suggestions and searches (`weave.view.present`): the row's HTML
read back as a reader sees it, the bars' shares against the ranking, and the status of a
real search on the embedded model, computed and then answered from its cache."""

from __future__ import annotations

import html as ihtml
import math
import re
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backends.base import Candidate, TokenAlternatives
from tests.fake_backend import VOCAB, FakeBackend
from weave.desk.alternatives import branch_text
from weave.desk.spot import accepted_text
from weave.search.beams import expand
from weave.search.params import SearchParams
from weave.search.tree import Suggestion
from weave.view.messages import (
    auto_accept_message,
    bar_caption,
    cache_note,
    few_suggestions_hint,
    search_figures,
    search_status,
    worth_text,
)
from weave.view.present import (
    Words,
    alternative_label,
    bar_shares,
    editable_text,
    share_text,
    shown_text,
    story_tokens_html,
    suggestion_html,
    token_spans,
    typed_text,
    visible,
)


def suggestion(pieces: list[str], probs: list[float], text: str | None = None) -> Suggestion:
    logprobs = tuple(math.log(p) for p in probs)
    return Suggestion(
        text="".join(pieces) if text is None else text,
        token_ids=tuple(range(len(pieces))),
        logprob=sum(logprobs),
        probability=math.exp(sum(logprobs)),
        score=sum(logprobs),
        token_pieces=tuple(pieces),
        token_logprobs=logprobs,
        exact=text is None,
    )


def seen(html: str) -> str:
    """The row as a reader sees it: tags gone, entities decoded."""
    return ihtml.unescape(re.sub(r"<[^>]+>", "", html))


# -- the one-row HTML -------------------------------------------------------------------------
def test_suggestion_html_shades_each_token_with_a_tooltip():
    html = suggestion_html(suggestion([" once", " more"], [0.9, 0.1]), prefix_space=True)
    spans = re.findall(r'<span title="([^"]*)" style="[^"]*rgba\(255, 160, 0, ([\d.]+)\)', html)
    assert [title for title, _ in spans] == ["90.0%", "10.0%"]
    assert float(spans[0][1]) > float(spans[1][1])
    assert seen(html) == "once more"  # the prefix space is not shown
    kept = suggestion_html(suggestion([" once"], [0.5]), prefix_space=False)
    assert seen(kept) == "·once"  # without prefix space, the leading space is marked
    plain = suggestion_html(suggestion([" once", " more"], [0.9, 0.1]), prefix_space=True,
                            shading=False)  # fmt: skip
    assert "title=" not in plain and seen(plain) == "once more"


def test_suggestion_html_wraps_instead_of_cutting():
    html = suggestion_html(suggestion([" word"] * 60, [0.9] * 60), prefix_space=True)
    assert "white-space: pre-wrap" in html and "overflow-wrap: anywhere" in html
    assert seen(html) == " ".join(["word"] * 60)


def test_lookalike_suggestions_look_different():
    rows = {text: seen(suggestion_html(suggestion([text], [0.5]), prefix_space=True))
            for text in [" QQ", "\nQQ", "  QQ", "\n\nQQ", "\tQQ"]}  # fmt: skip
    assert rows == {" QQ": "QQ", "\nQQ": "↵QQ", "  QQ": "·QQ", "\n\nQQ": "↵↵QQ", "\tQQ": "⇥QQ"}
    faint = suggestion_html(suggestion(["\nQQ"], [0.5]), prefix_space=True)
    assert '<span style="opacity: 0.4">↵</span>' in faint


def test_whitespace_only_suggestions_are_not_empty_rows():
    for text, shown in [(" ", "␣"), ("  ", "␣"), ("\n", "↵"), (" \n ", "↵␣")]:
        assert seen(suggestion_html(suggestion([text], [0.5]), prefix_space=True)) == shown


def test_suggestion_html_escapes_html_and_markdown():
    nasty = ['<script>alert("x")</script>', " & *bold* $x$ [link](u) `code`\n"]
    html = suggestion_html(suggestion(nasty, [0.5, 0.5]), prefix_space=True)
    body = re.sub(r"<span[^>]*>|</span>|<div[^>]*>|</div>", "", html)
    for ch in '<>"*$[]()`':
        assert ch not in body
    assert "&#60;script&#62;" in body and "↵" in body
    assert ihtml.unescape(body) == visible("".join(nasty))


def test_a_row_standing_for_other_texts_lists_them_a_hover_away():
    s = replace(suggestion([" want", " of", " a", " wife", ","], [0.5] * 5),
                variants=(" want of a wife.", "\nwant of a <wife>"))  # fmt: skip
    html = suggestion_html(s, prefix_space=True)
    mark = re.search(r'<span class="variants" title="([^"]*)">\+2</span></div>$', html)
    assert mark and seen(html) == "want of a wife,+2"  # after the text, inside its block
    assert ihtml.unescape(mark.group(1)).split("\n") == [
        "Read as this row, also offered:", "“want of a wife.”", "“↵want of a <wife>”"]  # fmt: skip
    assert "<wife>" not in mark.group(1)  # escaped
    assert "variants" not in suggestion_html(suggestion([" once"], [0.5]), prefix_space=True)


def test_a_rows_words_each_take_it_up_to_their_end():
    s = suggestion([" want", " of", " a", " wi", "fe", ",", " and"], [0.5] * 7)
    words = Words("take_pick", "r1", (5, 8, 10, 15, 16, 20))
    html = suggestion_html(s, prefix_space=True, words=words)
    assert re.match(r'<div style="white-space: pre-wrap[^"]*" class="take" '
                    r'data-lloom-box="take_pick">', html)  # fmt: skip
    words = re.findall(r'<span class="w" data-lloom-at="r1@(\d+)" role="button" '
                       r'tabindex="(-?\d)">(.*?)</span></span>', html)  # fmt: skip
    assert [(int(end), tab, seen(body)) for end, tab, body in words] == [
        (5, "0", "want"), (8, "-1", " of"), (10, "-1", " a"), (15, "-1", " wife"),
        (16, "-1", ","), (20, "-1", " and")]  # fmt: skip
    assert len(re.findall(r'title="50.0%"', html)) == 7  # " wi" and "fe": one word, two tokens
    straddling = suggestion([" a", " wife,", " and"], [0.5] * 3)  # a token across two words
    html = suggestion_html(straddling, prefix_space=False, words=Words("b", "r", (2, 7, 8, 12)))
    assert re.findall(r'data-lloom-at="r@(\d+)"', html) == ["2", "7", "8", "12"]
    assert re.findall(r'title="([^"]*)"', html) == ["50.0%"] * 4  # " wife," shaded in both
    assert seen(html) == "·a wife, and"


def test_suggestion_spans_follow_the_cut_and_split_characters():
    cut = suggestion([" end", ".\n\nNext"], [0.5, 0.4], text=" end.")
    assert token_spans(cut) == [(" end", math.log(0.5)), (".", math.log(0.4))]
    split = suggestion([" caf", "\ufffd", "\ufffd"], [0.5, 0.5, 0.5], text=" café")
    spans = token_spans(split)
    assert "".join(text for text, _ in spans) == " café"
    assert spans[-1] == ("é", pytest.approx(math.log(0.25)))


# -- the edit box ---------------------------------------------------------------------------
def test_the_edit_box_shows_whitespace_and_reads_it_back():
    assert editable_text("\nQQ") == "↵QQ"
    assert editable_text("  two\tspaces ") == "␣␣two⇥spaces "
    assert editable_text("   ") == "␣␣␣"
    assert typed_text("↵QQ, and ␣more") == "\nQQ, and  more"


@given(st.text(alphabet=st.characters(blacklist_characters="↵⇥␣", codec="utf-8")))
def test_an_unedited_box_accepts_exactly_the_suggestion(text):
    s = suggestion([text or "x"], [0.5], text=text)
    for prefix_space in (True, False):
        box = editable_text(shown_text(s.text, prefix_space=prefix_space))
        assert accepted_text(s.text, typed_text(box), prefix_space=prefix_space) == text


# -- numbers --------------------------------------------------------------------------------
def test_bars_show_the_share_of_the_score_the_list_is_ranked_by():
    params = SearchParams(cutoff=0.05, split_limit=0, max_depth=6, max_suggestions=30,
                          score="lloom")  # fmt: skip
    result = expand(FakeBackend(seed=5), [VOCAB.index("x")], params)
    ranked = result.suggestions
    shares = bar_shares(ranked, "lloom")
    assert sum(shares) == pytest.approx(1.0)
    assert shares == sorted(shares, reverse=True)  # in rank order, unlike ...
    by_probability = [s.probability for s in ranked]
    assert by_probability != sorted(by_probability, reverse=True)  # ... probability shares
    assert shares[0] == pytest.approx(ranked[0].score / sum(s.score for s in ranked))
    joint = expand(FakeBackend(seed=5), [VOCAB.index("x")], SearchParams(
        cutoff=0.05, split_limit=0, max_depth=6, max_suggestions=30, score="joint"
    )).suggestions  # fmt: skip
    total = sum(s.probability for s in joint)
    assert bar_shares(joint, "joint") == pytest.approx([s.probability / total for s in joint])
    assert "LLooM's score" in bar_caption("lloom") and "probability" in bar_caption("joint")


def test_bars_under_words_are_the_scores_softmax_and_none_reads_as_zero():
    params = SearchParams(cutoff=0.05, split_limit=0, max_depth=6, max_suggestions=30)
    ranked = expand(FakeBackend(seed=5), [VOCAB.index("x")], params).suggestions
    assert params.score == "words" and len(ranked) >= 20
    shares = bar_shares(ranked, "words")
    weights = [math.exp(s.score) for s in ranked]
    assert shares == pytest.approx([w / sum(weights) for w in weights])
    assert shares == sorted(shares, reverse=True)
    assert all(share_text(share) not in ("0%", "0.0%") for share in shares)
    assert "per word" in bar_caption("words")


def test_bar_shares_survive_tiny_probabilities():
    tiny = [suggestion(["a"] * 40, [1e-9] * 40), suggestion(["b"] * 41, [1e-9] * 41)]
    shares = bar_shares(tiny, "joint")  # joint probabilities of ~1e-360: underflow in exp
    assert shares[0] == pytest.approx(1 / (1 + 1e-9))


@pytest.mark.parametrize(
    "share, text",
    [(1.0, "100%"), (0.6931, "69%"), (0.0996, "10%"), (0.0321, "3.2%"), (0.00412, "0.41%"),
     (4.1e-5, "0.0041%"), (1.2e-6, "0.00012%"), (9e-7, "<0.0001%"), (0.0, "0%")],
)  # fmt: skip
def test_a_share_reads_as_something_however_small(share, text):
    assert share_text(share) == text


def test_the_worth_in_words():
    # 0.3 and 0.1: 40% in 1.75 choices, 2 draws (tests/test_worth.py)
    said = worth_text([suggestion(["a"], [0.3]), suggestion(["b"], [0.1])])
    assert (
        said == "40% of the model's probability in 1.8 effective choices "
        "(sampling: at least about 2 draws for as much)"
    )


@pytest.mark.slow
def test_a_search_answered_from_the_cache_says_so(fresh_mlx_backend):
    story = fresh_mlx_backend.tokenize("Once upon a time,")  # not healed: no word to finish
    params = SearchParams(max_suggestions=10)
    first = expand(fresh_mlx_backend, story, params)
    again = expand(fresh_mlx_backend, story, params)
    worth = r"( · (one clear favourite|[a-z ]+ ways on); the model [a-z ]+)"
    made = r"10 suggestions in \d+\.\d s"
    assert re.fullmatch(made + worth, search_status(first))
    assert "tokens/s" in search_figures(first) and "effective choices" in search_figures(first)
    assert cache_note(first.stats) is None
    assert again.stats.forward_calls == 0
    assert re.fullmatch("10 suggestions from cache, 0.0 s" + worth, search_status(again))
    assert "No forward calls" in cache_note(again.stats)


# -- messages -------------------------------------------------------------------------------
def test_the_auto_accept_message_names_what_was_accepted():
    assert auto_accept_message([]) is None
    assert auto_accept_message([" upon"]) == "Accepted a lone suggestion by itself: “ upon”."
    message = auto_accept_message([" a", " time", ",\n" + "x" * 60])
    assert message.startswith("Accepted 3 lone suggestions, one after another: “ a”, “ time”, ")
    assert "“,↵xxx" in message and "…”." in message


def test_the_few_suggestions_hint_gives_the_numbers():
    params = SearchParams(cutoff=0.3, multiplier=1.2, split_limit=3, max_suggestions=25)
    hint = few_suggestions_hint(2, params)
    assert hint.startswith("Only 2 suggestions at cutoff 0.3, times 1.2 per token: lower the")
    assert "more variety" in hint and "as a share of its beam's likeliest" in hint
    v03 = few_suggestions_hint(2, params.under("v03"))
    assert "reaches it)." in v03 and "share" not in v03  # v0.3's cutoff is a probability
    assert few_suggestions_hint(5, params) is None
    assert few_suggestions_hint(3, SearchParams(max_suggestions=3)) is None  # all it asked
    zero = SearchParams(cutoff=0.0, split_limit=2)
    assert few_suggestions_hint(1, zero) == (
        "Only 1 suggestion at split limit 2: raise it for more variety."
    )
    assert few_suggestions_hint(1, SearchParams(cutoff=0.0, split_limit=0)) is None


# -- the story's tokens and their alternatives ------------------------------------------------
STORY = 'Once upon a time, a "quoted" <tag> & 🐉 flew'


@pytest.mark.slow
def test_the_story_tokens_show_shaded_with_their_alternatives(mlx_backend):
    ids = mlx_backend.tokenize(STORY)
    rows = mlx_backend.alternatives(ids, 5)
    html = story_tokens_html(rows, box="alt_pick")
    assert seen(html) == STORY[len(mlx_backend.detokenize(ids[:1])) :]
    titles = re.findall(r' title="([^"]*)" style="background-color', html)
    assert len(titles) == len(rows)
    positions = re.findall(r'<span data-lloom-at="(\d+)" tabindex="-1" role="button"', html)
    assert positions == [str(row.position) for row in rows]  # what a click posts; none picked
    first = ihtml.unescape(titles[0])
    assert re.match(r"\d+(\.\d+)?% · ", first)  # two figures, however small
    assert alternative_label(rows[0].top[0]) in first


def test_a_token_outside_the_top_k_is_left_unshaded_and_everything_is_escaped():
    odd = Candidate(7, '"><b>', math.log(0.5))
    row = TokenAlternatives(3, 9, " *x*\n", None, [odd])
    html = story_tokens_html([row], box="alt_pick")
    assert "rgba(255, 160, 0, 0.00)" in html
    title = re.search(r'title="([^"]*)"', html).group(1)
    assert "<" not in title and '"' not in title
    assert ihtml.unescape(title) == 'not in the top 1 · "><b> 50%'
    assert seen(html) == " *x*↵" and "*" not in re.sub(r"&#\d+;", "", html)


def test_the_picked_token_is_outlined_and_the_one_the_keyboard_reaches():
    rows = [TokenAlternatives(p, p, f" w{p}", math.log(0.5), []) for p in (4, 5, 6)]
    html = story_tokens_html(rows, box="alt_pick", picked=5)
    spans = re.findall(r'<span data-lloom-at="(\d)" tabindex="(-?\d)"[^>]*style="([^"]*)"', html)
    assert [(at, tab) for at, tab, _ in spans] == [("4", "-1"), ("5", "0"), ("6", "-1")]
    assert ["outline" in style for _, _, style in spans] == [False, True, False]
    assert seen(html) == " w4 w5 w6"


@pytest.mark.slow
def test_picking_another_token_gives_the_text_to_branch_with(mlx_backend):
    ids = mlx_backend.tokenize(STORY)
    rows = mlx_backend.alternatives(ids, 5)
    at = next(row for row in rows if row.text == " time")
    choice = next(c for c in at.top if c.token_id != at.token_id)
    assert branch_text(STORY, rows, at, choice) == "Once upon a" + choice.text
    last = rows[-1]
    assert branch_text(STORY, rows, last, last.top[0]) == STORY[: -len(" flew")] + last.top[0].text
    with pytest.raises(ValueError, match="another text"):
        branch_text("Another story altogether", rows, at, choice)
