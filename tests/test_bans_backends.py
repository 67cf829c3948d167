"""Bans and bias on the real servers that run here: a vLLM and a llama.cpp server on the
embedded model (the same tests on MLX are test_bans_mlx.py). The guard reads each beam's
candidates as the server returns them, so a phrase the search offers without a ban
never appears with it, on every backend alike, and the pruned branches' room goes to
the next candidates (the count of suggestions holds). A favoured phrase the server ranks
far below a beam's candidates comes in (the search asks for its tokens), and every
probability shown is the renormalised one."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.servers import real_backend
from weave.search.beams import expand
from weave.search.params import SearchParams
from weave.story.bans import BanRule, Bans
from weave.story.guard import Guard

pytestmark = pytest.mark.slow

STORY = "The old dragon opened its eyes and"
PARAMS = SearchParams()  # the defaults a writer searches with


@pytest.fixture(scope="module", params=["vllm", "llamacpp"])
def backend(request):
    with real_backend(request, request.param) as made:
        yield made


def search(backend, bans: Bans | None, story: str = STORY):
    guard = Guard(bans, story) if bans is not None else None
    return expand(backend, backend.tokenize(story), PARAMS, guard=guard)


def edges(tree) -> list[float]:
    """Every edge's probability in a search's token tree, as the token tree shows them."""
    return [n.probability for leaf in tree.leaves() for n in leaf.path()]


def completing(bans: Bans, texts: list[str]) -> list[str]:
    """The texts that, read after the story, hold a banned literal phrase."""
    find = bans.compiled().banned.find
    return [t for t in texts if any(h.end > len(STORY) for h in find(STORY + t))]


def favourite(texts: list[str]) -> str:
    """The word the suggestions hold most often (the model's favourite here)."""
    words = Counter(w for t in texts for w in set(re.findall(r"[a-z]+", t.lower())))
    return words.most_common(1)[0][0]


def test_a_banned_phrase_the_server_offers_never_appears(backend):
    plain = search(backend, None)
    shown = [s.text for s in plain.suggestions]
    word = favourite(shown)
    bans = Bans((BanRule(word),))
    assert completing(bans, shown)  # without the ban the server's suggestions hold it
    banned = search(backend, bans)
    assert banned.pruned and all(p.by == word for p in banned.pruned)
    assert not completing(bans, [s.text for s in banned.suggestions])
    assert not completing(bans, [leaf.full_text() for leaf in banned.tree.leaves()])
    assert len(banned.suggestions) >= 0.95 * len(plain.suggestions)


def test_a_phrase_of_several_words_and_a_regex_are_pruned_where_they_complete(backend):
    plain = search(backend, None)
    two = next(
        " ".join(words[:2])
        for s in plain.suggestions
        if len(words := re.findall(r"[A-Za-z]+", s.text)) >= 2
    )
    bans = Bans((BanRule(two), BanRule(r"\bthe\b", regex=True)))
    banned = search(backend, bans)
    texts = [s.text for s in banned.suggestions]
    assert not completing(bans, texts)
    assert not any(re.search(r"\bthe\b", t) for t in texts)
    assert {p.by for p in banned.pruned} <= {two, r"\bthe\b"} and banned.pruned
    assert all(two.lower() in p.text.lower() for p in banned.pruned if p.by == two)
    assert texts  # what the bans leave (fewer: a phrase they prune held most of a branch)


# -- bias ------------------------------------------------------------------------------------
def test_bias_brings_in_a_favoured_phrase_the_server_ranks_far_down(backend):
    story = "Once upon a time, there was a"  # " pineapple" is the model's ~3,000th token here
    plain = search(backend, None, story)
    assert not any("pineapple" in s.text.lower() for s in plain.suggestions)
    favoured = search(backend, Bans((BanRule("pineapple", weight=10.0),)), story)
    assert any("pineapple" in s.text.lower() for s in favoured.suggestions)
    assert max(edges(favoured.tree)) <= 1.0 and favoured.notes == ()


@pytest.mark.parametrize("weight", [-20.0, 3.0, 20.0])
def test_bias_of_any_weight_gives_suggestions_no_edge_above_certain(backend, weight):
    result = search(backend, Bans((BanRule("the", weight=weight),)), "Once upon a time, in")
    assert result.suggestions and max(edges(result.tree)) <= 1.0
    assert all(0.0 < s.probability <= 1.0 for s in result.suggestions)
    starts = [s.text.split()[0].lower() for s in result.suggestions if s.text.split()]
    assert ("the" in starts) == (weight > 0)
