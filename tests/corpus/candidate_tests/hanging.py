"""Candidate tests that hang: one on every implementation, one only where a blocked row gives NaN."""
import numpy as np

from solution import causal_mask, stable_softmax


def test_waits_forever():
    done = False
    while not done:
        done = bool(np.asarray(causal_mask(1, 2))[0, 0, 1])   # never True on correct code


def test_spins_on_nan():
    out = np.asarray(stable_softmax([3.0, 4.0], [False, False]), float)
    while np.isnan(out).any():       # NaN never goes away: this loops on the blocked-row-nan bug
        pass
    assert out.tolist() == [0.0, 0.0]


def test_masks_fine():
    assert np.array_equal(causal_mask(1, 2), [[[True, False], [True, True]]])
