"""The README's test-tests example (tests/test_readme_figures.py runs it): one wrong expectation
(the causal mask is believed to exclude the diagonal) and one test that catches the bugs of fully
blocked rows."""
import numpy as np

from solution import causal_mask, multi_head_attention, stable_softmax


def test_softmax_sums_to_one():
    assert abs(float(np.sum(stable_softmax([0.1, 2.0, -1.0]))) - 1.0) < 1e-12


def test_causal_mask_excludes_diagonal():
    mask = np.asarray(causal_mask(1, 3))
    assert not mask[0, 1, 1], "a token must not attend to itself"


def test_blocked_row_is_zero():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 3, 4))
    params = {f"W{n}": rng.normal(size=(4, 4)) for n in "qkvo"} | {"bo": np.arange(4.0)}
    mask = np.ones((1, 3, 3), dtype=bool)
    mask[0, 1, :] = False                        # query 1 sees no key
    out = np.asarray(multi_head_attention(x, params, 2, mask=mask))
    assert np.all(np.isfinite(out))
    assert np.allclose(out[0, 1], params["bo"])


def test_output_shape():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 4))
    params = {f"W{n}": rng.normal(size=(4, 4)) for n in "qkvo"}
    assert np.shape(multi_head_attention(x, params, 2)) == (2, 5, 4)
