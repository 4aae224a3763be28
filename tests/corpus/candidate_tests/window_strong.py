"""A strong candidate test file for sliding-window: a loop oracle, both window edges, causality,
edge windows, large scores, input hygiene and a tracemalloc memory test."""
import math
import tracemalloc

import numpy as np
import pytest

from solution import sliding_window_attention


def oracle(q, k, v, window):
    B, H, T, d = q.shape
    out = np.zeros_like(v, dtype=float)
    for b in range(B):
        for h in range(H):
            for i in range(T):
                keys = [j for j in range(T) if i - window < j <= i]
                s = [float(q[b, h, i] @ k[b, h, j]) / math.sqrt(d) for j in keys]
                top = max(s)
                e = [math.exp(x - top) for x in s]
                out[b, h, i] = sum(w * v[b, h, j] for w, j in zip(e, keys)) / sum(e)
    return out


def qkv(T, d=4, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(1, 2, T, d)) * scale, rng.normal(size=(1, 2, T, d)) * scale, rng.normal(size=(1, 2, T, d))


@pytest.mark.parametrize("T, window", [(6, 1), (9, 2), (9, 3), (5, 5), (4, 10)])
def test_matches_oracle(T, window):
    q, k, v = qkv(T, seed=T + window)
    np.testing.assert_allclose(sliding_window_attention(q, k, v, window), oracle(q, k, v, window), atol=1e-10)


def test_scaling_with_wide_heads():
    q, k, v = qkv(6, d=16, seed=3)
    np.testing.assert_allclose(sliding_window_attention(q, k, v, 3), oracle(q, k, v, 3), atol=1e-10)


def test_editing_one_key_moves_exactly_the_window():
    q, k, v = qkv(10, seed=4)
    before = sliding_window_attention(q, k, v, 3)
    k2, v2 = k.copy(), v.copy()
    k2[:, :, 2] += 1.0
    v2[:, :, 2] += 5.0
    after = sliding_window_attention(q, k2, v2, 3)
    moved = [i for i in range(10) if not np.allclose(before[:, :, i], after[:, :, i])]
    assert moved == [2, 3, 4]



def test_batch_rows_are_independent():
    rng = np.random.default_rng(6)
    q, k, v = (rng.normal(size=(3, 2, 7, 4)) for _ in range(3))
    together = np.asarray(sliding_window_attention(q, k, v, 3), float)
    for b in range(3):
        alone = sliding_window_attention(q[b:b + 1], k[b:b + 1], v[b:b + 1], 3)
        np.testing.assert_allclose(together[b:b + 1], alone, atol=1e-12)
    np.testing.assert_allclose(together, oracle(q, k, v, 3), atol=1e-10)


def test_large_scores_are_finite():
    q, k, v = qkv(6, seed=5, scale=40.0)
    out = sliding_window_attention(q, k, v, 3)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, oracle(q, k, v, 3), rtol=1e-7, atol=1e-9)


def test_inputs_untouched_and_bad_window():
    q, k, v = qkv(5, seed=6)
    saved = q.copy(), k.copy(), v.copy()
    sliding_window_attention(q, k, v, 2)
    for a, b in zip((q, k, v), saved):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError):
        sliding_window_attention(q, k, v, 0)


def test_memory_is_linear_in_t():
    q, k, v = qkv(2048, d=16, seed=7)
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    sliding_window_attention(q, k, v, 32)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert peak <= 64 * 1 * 2 * 2048 * (32 + 16)
