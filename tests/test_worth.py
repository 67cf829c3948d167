"""weave.search.worth's three figures on cases worked out by hand, and kept with a saved search
made on the real embedded model."""

from __future__ import annotations

import json
import math

import pytest

from weave.desk.session import Workspace
from weave.loom.store import LoomStore
from weave.search.params import SearchParams
from weave.search.worth import MAX_SAMPLES, Worth, expected_cover, worth


def test_no_suggestions_are_worth_nothing():
    assert worth([]) == Worth(0.0, 0.0, 0)


def test_one_suggestion_is_one_choice_and_one_sample():
    # The rest (0.5) is one more continuation as likely: one draw covers 0.5 on average.
    assert worth([0.5]) == Worth(0.5, 1.0, 1)


def test_two_suggestions_by_hand():
    # M = 0.4: the whole is 2.5 copies of (0.3, 0.1). Cover after N draws:
    # N=1: 2.5 (0.3 * 0.3 + 0.1 * 0.1) = 0.25 < 0.4
    # N=2: 2.5 (0.3 (1 - 0.7^2) + 0.1 (1 - 0.9^2)) = 2.5 (0.153 + 0.019) = 0.43 >= 0.4
    assert expected_cover([0.3, 0.1], 1) == pytest.approx(0.25)
    assert expected_cover([0.3, 0.1], 2) == pytest.approx(0.43)
    w = worth([0.3, 0.1])
    assert w.mass_covered == pytest.approx(0.4)
    # shares 0.75 and 0.25: exp(-(0.75 ln 0.75 + 0.25 ln 0.25)) = 1.7548
    assert w.effective_choices == pytest.approx(1.7548, abs=1e-4)
    assert w.sampling_equivalent_n == 2


def test_equal_suggestions_are_as_many_choices():
    assert worth([0.1] * 5).effective_choices == pytest.approx(5.0)
    assert worth([0.1] * 5).mass_covered == pytest.approx(0.5)


def test_a_certain_suggestion_needs_one_sample():
    assert worth([1.0]) == Worth(1.0, 1.0, 1)


def test_zero_probabilities_count_for_nothing():
    assert worth([0.3, 0.1, 0.0]) == worth([0.3, 0.1])


def test_rarer_suggestions_need_more_samples():
    # M = 0.3: N=2 covers (0.2 * 0.36 + 0.1 * 0.19) / 0.3 = 0.3033 >= 0.3
    assert worth([0.2, 0.1]).sampling_equivalent_n == 2
    # M = 0.302: N=2 covers (0.072 + 0.019 + 2 * 0.001 * 0.001999) / 0.302 = 0.30134 < 0.302
    assert worth([0.2, 0.1, 0.001, 0.001]).sampling_equivalent_n == 3


def test_whole_mass_in_equal_parts_is_a_finite_count():
    # M = 1: the cover 1 - 0.75^N reaches 1 within rounding at N = 97 (0.75^97 < 1e-12).
    assert worth([0.25] * 4).sampling_equivalent_n == 97
    assert 0.75**96 > 1e-12 > 0.75**97


def test_the_count_is_capped():
    # Everything covered, the last part one in a million: about 14 million draws.
    assert worth([1 - 1e-6, 1e-6]).sampling_equivalent_n == MAX_SAMPLES


@pytest.mark.parametrize("bad", [math.nan, math.inf, -0.1, 1.5])
def test_a_probability_out_of_range_is_refused(bad):
    with pytest.raises(ValueError, match="probability"):
        worth([0.2, bad])


def test_to_dict_is_plain_json():
    assert worth([0.3, 0.1]).to_dict() == {
        "mass_covered": 0.4, "effective_choices": 1.755, "sampling_equivalent_n": 2
    }  # fmt: skip


@pytest.mark.slow
def test_the_saved_search_keeps_what_it_is_worth(tmp_path, mlx_backend):
    ws = Workspace(LoomStore(tmp_path))
    assert ws.start("The old dragon opened its eyes and")
    params = SearchParams(cutoff=0.1, max_depth=6, max_suggestions=12)
    offer = ws.offers.suggest(mlx_backend, ws.spot, params)
    saved = ws.store.suggestions(ws.story_id, ws.cursor)
    json.dumps(saved, allow_nan=False)  # strict JSON
    expected = worth([s.probability for s in offer.result.suggestions])
    assert {k: saved["stats"][k] for k in expected.to_dict()} == expected.to_dict()
    assert 0 < expected.mass_covered < 1 and expected.sampling_equivalent_n >= 1
    assert 1 < expected.effective_choices <= len(offer.result.suggestions)
