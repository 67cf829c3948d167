"""Taking part of a suggestion (issue 39, item 5; `weave.desk.partial`) at the desk, on the real
embedded model: a row taken up to a word keeps the ids of its tokens where the cut falls on
a token boundary and is text only where it falls inside a token (or the suggestion was
healed); either part says it is a "partial suggestion", at the rank it was offered, with the
probability of its own tokens; the rest, offered at the node the part made, takes the story
to the whole row."""

from __future__ import annotations

import math

import pytest

from weave.desk.partial import Offered, beside, word_ends
from weave.desk.session import Workspace
from weave.desk.spot import Piece
from weave.loom.store import LoomStore
from weave.search.params import SearchParams
from weave.search.tree import Suggestion

STORY = "The fox crept to the well and looked down into the dark water."
PARAMS = SearchParams(cutoff=0.1, max_depth=8, max_suggestions=8, auto_stop=False)


def test_a_row_is_taken_up_to_a_word_its_punctuation_a_word_of_its_own():
    assert word_ends(" want of a wife, and") == (5, 8, 10, 15, 16, 20)
    text = ' "Yes," she said\u2014well-known isn\'t it.\n\n'
    assert [text[:end] for end in word_ends(text)][:4] == [' "', ' "Yes', ' "Yes,"', ' "Yes," she']
    assert text[: word_ends(text)[5]].endswith("said\u2014")  # a dash between two words
    assert text[: word_ends(text)[6]].endswith("\u2014well-known")  # a hyphen inside one
    assert text[: word_ends(text)[7]].endswith(" isn't")
    assert word_ends(text)[-1] == len(text)  # the whitespace at the end goes with the last word
    assert word_ends("\n\nChapter 2") == (9, 11) and word_ends("  ") == (2,) and word_ends("") == ()


def row(text: str) -> Offered:
    s = Suggestion(text, (), -1.0, math.exp(-1.0), -1.0, (text,), (-1.0,), exact=False)
    return Offered(Piece("node", text, (), False, "model", {}, -1.0), s)


def test_the_rest_is_offered_unless_a_suggestion_there_holds_it():
    rest = row(" of a wife,")
    assert beside(rest, [row(" want of it.").suggestion]) == rest
    for held in [" of a wife,", " of a wife.", "\nof  a wife", " of a wife, and a fortune"]:
        assert beside(rest, [row(held).suggestion]) is None, held
    assert beside(row(","), [row(", and then").suggestion]) is not None  # no word to read
    assert beside(row(" of a"), [row(" of a wife.").suggestion, row(" b").suggestion]) is None
    assert beside(None, []) is None


def searched(tmp_path, backend, story: str = STORY) -> tuple[Workspace, list]:
    ws = Workspace(LoomStore(tmp_path))
    assert ws.start(story)
    offer = ws.offers.suggest(backend, ws.spot, PARAMS)
    rows = [(rank, Offered(offer.piece(s), s)) for rank, s in enumerate(offer.result.suggestions, 1)
            if len(word_ends(s.text)) >= 3]  # fmt: skip
    assert rows, offer.result.suggestions
    return ws, rows


def starts(offered: Offered) -> list[int]:
    """Where each token of the row begins in its text."""
    return [sum(map(len, offered.suggestion.token_pieces[:i]))
            for i in range(len(offered.suggestion.token_pieces) + 1)]  # fmt: skip


@pytest.mark.slow
def test_a_part_on_a_token_boundary_keeps_its_ids_and_the_rest_follows(tmp_path, mlx_backend):
    ws, rows = searched(tmp_path, mlx_backend)
    rank, offered = rows[0]
    s, parent = offered.suggestion, ws.cursor
    end = word_ends(s.text)[1]  # after the second word: a token boundary in this BPE
    k = starts(offered).index(end)
    ws.accept(offered.up_to(end), None, prefix_space=True)
    loom = ws.store.load(ws.story_id)
    node = loom.node(ws.cursor)
    assert ws.text == STORY + s.text[:end] and node.parent == parent
    assert node.token_ids == s.token_ids[:k] and node.model == mlx_backend.model_name
    assert mlx_backend.detokenize(list(node.token_ids)) == s.text[:end]
    made = node.provenance
    assert (made.how, made.rank) == ("partial suggestion", rank)
    assert made.probability == pytest.approx(math.exp(sum(s.token_logprobs[:k])))
    assert "partial suggestion" in made.describe()

    rest = offered.after(end, ws.cursor)
    assert rest.piece.node_id == ws.cursor and rest.suggestion.text == s.text[end:]
    assert rest.piece.token_ids == s.token_ids[k:] and rest.piece.exact
    assert word_ends(rest.suggestion.text)[0] == word_ends(s.text)[2] - end  # the next word
    ws.accept(rest.piece, None, prefix_space=True)
    loom = ws.store.load(ws.story_id)
    assert ws.text == STORY + s.text  # the whole row, in two nodes
    assert node.token_ids + loom.node(ws.cursor).token_ids == s.token_ids
    assert loom.node(ws.cursor).provenance.how == "partial suggestion"
    assert offered.up_to(len(s.text)) == offered.piece  # the last word is the whole row


@pytest.mark.slow
def test_a_part_that_ends_inside_a_token_is_text_only(tmp_path, mlx_backend):
    ws, rows = searched(tmp_path, mlx_backend)
    rank, offered = next((rank, o) for rank, o in rows
                         if any(len(p) >= 3 for p in o.suggestion.token_pieces[1:]))  # fmt: skip
    s = offered.suggestion
    j = next(i for i, p in enumerate(s.token_pieces) if i and len(p) >= 3)
    end = starts(offered)[j] + 2  # two characters into token j
    part = offered.up_to(end)
    assert part.text == s.text[:end] and part.token_ids == () and not part.exact
    ws.accept(part, None, prefix_space=True)
    node = ws.store.load(ws.story_id).node(ws.cursor)
    assert node.text == s.text[:end] and node.token_ids is None  # text only
    assert (node.provenance.how, node.provenance.rank) == ("partial suggestion", rank)
    assert node.provenance.probability == pytest.approx(math.exp(sum(s.token_logprobs[: j + 1])))
    rest = offered.after(end, ws.cursor)
    assert rest.suggestion.text == s.text[end:] and rest.piece.token_ids == ()
    assert rest.suggestion.token_pieces[0] == s.token_pieces[j][2:]  # shaded from the cut on
    ws.accept(rest.piece, None, prefix_space=True)
    assert ws.text == STORY + s.text
    assert ws.store.load(ws.story_id).node(ws.cursor).token_ids is None


@pytest.mark.slow
def test_a_healed_suggestion_keeps_no_ids_even_at_a_token_boundary(tmp_path, mlx_backend):
    story = "The fox crept to the we"  # half a word: the search heals it
    ws, rows = searched(tmp_path, mlx_backend, story)
    _, offered = rows[0]
    assert offered.suggestion.healed
    end = word_ends(offered.suggestion.text)[1]
    part = offered.up_to(end)
    assert part.token_ids == () and not part.exact
    ws.accept(part, None, prefix_space=True)
    assert ws.text == story + offered.suggestion.text[:end]
    assert ws.store.load(ws.story_id).node(ws.cursor).token_ids is None
    assert offered.after(end, ws.cursor).piece.token_ids == ()
