"""Candidate tests with one wrong expectation: the causal mask is believed to exclude the diagonal."""
import numpy as np

from solution import causal_mask, stable_softmax


def test_softmax_sums_to_one():
    assert abs(float(np.sum(stable_softmax([0.1, 2.0, -1.0]))) - 1.0) < 1e-12


def test_causal_mask_excludes_diagonal():
    mask = np.asarray(causal_mask(1, 3))
    assert not mask[0, 1, 1], "a token must not attend to itself"


def test_padding_is_not_tested_here():
    assert True
