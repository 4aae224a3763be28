"""A weak candidate test file for rope: shapes, the identity at position 0 and one hand-checked
rotation of a vector whose second pair is zero (so interleaving cannot show)."""
import math

import numpy as np

from solution import apply_rope, rope_attention


def test_shapes():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 4))
    p = {f"W{n}": rng.normal(size=(4, 4)) for n in "qkvo"}
    out, w = rope_attention(x, p, 2, return_weights=True)
    assert np.shape(out) == (2, 3, 4) and np.shape(w) == (2, 2, 3, 3)


def test_position_zero_changes_nothing():
    x = [[[[1.0, 2.0, 3.0, 4.0]]]]
    np.testing.assert_allclose(apply_rope(x, [0]), x)


def test_first_pair_turns_by_one_radian():
    got = np.asarray(apply_rope([[[[1.0, 0.0, 0.0, 0.0]]]], [1]), float)[0, 0, 0]
    assert math.isclose(got[0], math.cos(1.0), abs_tol=1e-9)
