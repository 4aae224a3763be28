"""A strong candidate test file for paged-attention: a dense loop oracle, shuffled tables, NaN in
every unused slot, edge lengths, large scores and a read-only pool."""
import math

import numpy as np
import pytest

from solution import paged_attention


def dense(q, keys, values):
    H, d = len(q), len(q[0])
    out = []
    for h in range(H):
        if not keys:
            out.append([0.0] * len(values[0][h]) if values else [0.0] * d)
            continue
        s = [sum(q[h][c] * key[h][c] for c in range(d)) / math.sqrt(d) for key in keys]
        top = max(s)
        e = [math.exp(x - top) for x in s]
        out.append([sum(w * val[h][c] for w, val in zip(e, values)) / sum(e) for c in range(d)])
    return out


def make(lengths, bs, H=2, d=4, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    need = [-(-n // bs) for n in lengths]
    N = sum(need) + 3
    k_pool = np.full((N, bs, H, d), np.nan)
    v_pool = np.full((N, bs, H, d), np.nan)
    ids = list(rng.permutation(N))
    tables, keys, values = [], [], []
    for n, m in zip(lengths, need):
        table = [int(ids.pop()) for _ in range(m + 1)]          # one spare block
        ks = rng.normal(size=(n, H, d)) * scale
        vs = rng.normal(size=(n, H, d))
        for t in range(n):
            k_pool[table[t // bs], t % bs] = ks[t]
            v_pool[table[t // bs], t % bs] = vs[t]
        tables.append(table)
        keys.append(ks.tolist())
        values.append(vs.tolist())
    q = rng.normal(size=(len(lengths), H, d)) * scale
    return q, k_pool, v_pool, tables, keys, values


@pytest.mark.parametrize("lengths, bs", [([5, 3], 4), ([1, 8, 4], 4), ([6, 7], 3), ([9], 1), ([0, 2], 2)])
def test_matches_dense_oracle_with_nan_garbage(lengths, bs):
    q, kp, vp, tables, keys, values = make(lengths, bs, seed=len(lengths) * 10 + bs)
    got = np.asarray(paged_attention(q, kp, vp, tables, lengths), float)
    for b in range(len(lengths)):
        want = dense(q[b].tolist(), keys[b], values[b]) if lengths[b] else np.zeros((2, 4))
        np.testing.assert_allclose(got[b], want, atol=1e-10)


def test_table_order_matters():
    q, kp, vp, tables, keys, values = make([10], 2, seed=3)
    got = np.asarray(paged_attention(q, kp, vp, tables, [10]), float)
    np.testing.assert_allclose(got[0], dense(q[0].tolist(), keys[0], values[0]), atol=1e-10)


def test_large_scores():
    q, kp, vp, tables, keys, values = make([6], 4, seed=4, scale=30.0)
    got = np.asarray(paged_attention(q, kp, vp, tables, [6]), float)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got[0], dense(q[0].tolist(), keys[0], values[0]), rtol=1e-7, atol=1e-9)


def test_wide_heads_are_scaled():
    q, kp, vp, tables, keys, values = make([5], 4, d=16, seed=5)
    np.testing.assert_allclose(np.asarray(paged_attention(q, kp, vp, tables, [5]), float)[0],
                               dense(q[0].tolist(), keys[0], values[0]), atol=1e-10)


def test_nothing_is_written():
    q, kp, vp, tables, _, _ = make([5, 2], 4, seed=6)
    saved = q.copy(), kp.copy(), vp.copy()
    paged_attention(q, kp, vp, tables, [5, 2])
    for a, b in zip((q, kp, vp), saved):
        np.testing.assert_array_equal(a, b)
