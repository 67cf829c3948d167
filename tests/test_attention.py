"""The rows attention's softmax step against float64: in range, exp(score) is used as it
is; beyond, scores are shifted by the row's max first. Either way, weights over totals
are the softmax."""

from __future__ import annotations

import numpy as np
import pytest

from backends.mlx.attention import EXP_SAFE, _exp_in_place


@pytest.mark.parametrize("offset", [0.0, EXP_SAFE - 1, EXP_SAFE + 30, -EXP_SAFE - 30, 500.0])
def test_weights_over_totals_are_the_softmax_over_every_part(offset):
    """A row's keys split between its own part and a prefix part (rows 1-2 only), scores
    around `offset`: in range the subtraction is skipped, beyond it is not."""
    rng = np.random.default_rng(7)
    own = (rng.normal(size=(3, 2, 4, 50)) * 5 + offset).astype(np.float32)
    prefix = (rng.normal(size=(2, 2, 4, 70)) * 5 + offset).astype(np.float32)
    own[0, ..., :3] = -np.inf  # row 0's left padding
    wide = [own.astype(np.float64), prefix.astype(np.float64)]
    joined = np.concatenate([wide[0][1:], wide[1]], axis=-1)  # rows 1-2 see both parts
    expected_0 = np.exp(wide[0][:1] - wide[0][:1].max(-1, keepdims=True))
    expected_0 /= expected_0.sum(-1, keepdims=True)
    expected_12 = np.exp(joined - joined.max(-1, keepdims=True))
    expected_12 /= expected_12.sum(-1, keepdims=True)
    totals = _exp_in_place([(slice(0, 3), own), (slice(1, 3), prefix)])
    assert np.isfinite(totals).all() and (totals > 0).all()
    got_0 = own[:1] / totals[:1]
    got_12 = np.concatenate([own[1:], prefix], axis=-1) / totals[1:]
    assert np.abs(got_0 - expected_0).max() <= 1e-6
    assert np.abs(got_12 - expected_12).max() <= 1e-6
