"""A weak candidate test file for attention-backward: shapes with T ≠ S and a zero dout."""
import numpy as np

from solution import attention_backward


def test_shapes():
    rng = np.random.default_rng(0)
    q, k, v, dout = rng.normal(size=(1, 1, 2, 3)), rng.normal(size=(1, 1, 4, 3)), rng.normal(size=(1, 1, 4, 5)), \
        rng.normal(size=(1, 1, 2, 5))
    dq, dk, dv = attention_backward(q, k, v, dout)
    assert np.shape(dq) == (1, 1, 2, 3) and np.shape(dk) == (1, 1, 4, 3) and np.shape(dv) == (1, 1, 4, 5)


def test_zero_upstream_gradient_gives_zeros():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(1, 1, 3, 2))
    dq, dk, dv = attention_backward(q, q, q, np.zeros((1, 1, 3, 2)))
    assert not np.any(dq) and not np.any(dk) and not np.any(dv)
