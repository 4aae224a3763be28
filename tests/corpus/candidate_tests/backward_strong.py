"""A strong candidate test file for attention-backward: central finite differences of an
independent forward along random directions, T ≠ S and T = S, masks with blocked rows, large
scores, and untouched inputs."""
import numpy as np
import pytest

from solution import attention_backward


def forward(q, k, v, mask=None):
    s = np.einsum("bhtd,bhsd->bhts", q, k) / np.sqrt(q.shape[-1])
    ok = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask[:, None], s.shape)
    m = np.where(ok, s, -np.inf).max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.where(ok, np.exp(np.where(ok, s - m, 0)), 0)
    z = e.sum(-1, keepdims=True)
    return np.einsum("bhts,bhsd->bhtd", e / np.where(z > 0, z, 1), v)


def make(T, S, d, dv, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(1, 2, T, d)) * scale, rng.normal(size=(1, 2, S, d)) * scale,
            rng.normal(size=(1, 2, S, dv)), rng.normal(size=(1, 2, T, dv)))


def check_fd(q, k, v, dout, mask, grads, seed):
    rng = np.random.default_rng(seed)
    eps = 1e-6
    for i in range(3):
        args = [q, k, v]
        delta = rng.normal(size=args[i].shape)
        plus, minus = list(args), list(args)
        plus[i], minus[i] = args[i] + eps * delta, args[i] - eps * delta
        num = (np.sum(forward(*plus, mask) * dout) - np.sum(forward(*minus, mask) * dout)) / (2 * eps)
        assert np.sum(np.asarray(grads[i]) * delta) == pytest.approx(num, rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("T, S, d, dv", [(3, 5, 4, 2), (4, 4, 3, 3), (5, 5, 16, 2)])
def test_finite_differences(T, S, d, dv):
    q, k, v, dout = make(T, S, d, dv, seed=T * 10 + S)
    check_fd(q, k, v, dout, None, attention_backward(q, k, v, dout), seed=1)


def test_finite_differences_with_mask():
    q, k, v, dout = make(4, 4, 3, 2, seed=7)
    mask = np.random.default_rng(8).random((1, 4, 4)) < 0.6
    mask[0, :, 0] = True
    check_fd(q, k, v, dout, mask, attention_backward(q, k, v, dout, mask), seed=2)


def test_blocked_rows_have_zero_gradient():
    q, k, v, dout = make(3, 3, 2, 2, seed=9)
    mask = np.ones((1, 3, 3), bool)
    mask[0, 1] = False
    dq, dk, dv = attention_backward(q, k, v, dout, mask)
    assert np.all(np.isfinite(dq)) and np.all(np.asarray(dq)[:, :, 1] == 0)
    check_fd(q, k, v, dout, mask, (dq, dk, dv), seed=3)



def test_batch_rows_are_independent():
    rng = np.random.default_rng(12)
    q, k = rng.normal(size=(2, 2, 3, 4)), rng.normal(size=(2, 2, 5, 4))
    v, dout = rng.normal(size=(2, 2, 5, 2)), rng.normal(size=(2, 2, 3, 2))
    mask = rng.random((2, 3, 5)) < 0.7
    mask[:, :, 0] = True
    together = attention_backward(q, k, v, dout, mask)
    for b in range(2):
        alone = attention_backward(q[b:b + 1], k[b:b + 1], v[b:b + 1], dout[b:b + 1], mask[b:b + 1])
        for g, a in zip(together, alone):
            np.testing.assert_allclose(np.asarray(g)[b:b + 1], a, atol=1e-12)
    check_fd(q, k, v, dout, mask, together, seed=4)


def test_one_allowed_key_takes_all_the_weight_even_far_below_the_blocked_ones():
    q, k, v, dout = make(4, 4, 3, 2, seed=13)
    mask = np.eye(4, dtype=bool)[None]                 # query i sees key i only
    dq, dk, dv = attention_backward(q * 1000.0, k, v, dout, mask)
    np.testing.assert_allclose(dv, dout, atol=1e-9)     # weight 1 on its own key, whatever the scores
    np.testing.assert_allclose(dq, 0.0, atol=1e-9)
    np.testing.assert_allclose(dk, 0.0, atol=1e-9)


def test_large_scores_are_finite():
    q, _, v, dout = make(3, 3, 4, 2, seed=10, scale=25.0)
    k = q.copy()                                       # q·k = |q|² for matching rows: scores in the thousands
    grads = attention_backward(q, k, v, dout)
    assert all(np.isfinite(g).all() for g in grads)


def test_inputs_untouched():
    q, k, v, dout = make(3, 3, 2, 2, seed=11)
    saved = [a.copy() for a in (q, k, v, dout)]
    attention_backward(q, k, v, dout)
    for a, b in zip((q, k, v, dout), saved):
        np.testing.assert_array_equal(a, b)
