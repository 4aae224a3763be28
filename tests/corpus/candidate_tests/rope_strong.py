"""A strong candidate test file for rope: an independent loop oracle with explicit 2×2 rotations,
the rotation properties, shift invariance, blocked rows, large scores and argument hygiene."""
import copy
import math

import numpy as np
import pytest

from solution import apply_rope, rope_attention


def rotate(u, p, base=10000.0):
    """One vector rotated plane by plane, (i, i + hd/2), by p·base^(-2i/hd)."""
    hd, half = len(u), len(u) // 2
    out = list(u)
    for i in range(half):
        a = p * base ** (-2 * i / hd)
        out[i] = u[i] * math.cos(a) - u[i + half] * math.sin(a)
        out[i + half] = u[i + half] * math.cos(a) + u[i] * math.sin(a)
    return out


def oracle(x, p, H, positions=None, mask=None):
    x = np.asarray(x, float)
    B, T, D = x.shape
    hd = D // H
    positions = list(range(T)) if positions is None else list(positions)

    def proj(w, b):
        W = np.asarray(p[w], float)
        y = np.array([[[sum(x[bb, t, i] * W[i, j] for i in range(D)) for j in range(D)] for t in range(T)]
                      for bb in range(B)])
        return y + np.asarray(p[b], float) if p.get(b) is not None else y

    q, k, v = proj("Wq", "bq"), proj("Wk", "bk"), proj("Wv", "bv")
    weights = np.zeros((B, H, T, T))
    concat = np.zeros((B, T, D))
    for bb in range(B):
        for h in range(H):
            cols = slice(h * hd, (h + 1) * hd)
            qr = [rotate(list(q[bb, t, cols]), positions[t]) for t in range(T)]
            kr = [rotate(list(k[bb, t, cols]), positions[t]) for t in range(T)]
            for i in range(T):
                allowed = [True] * T if mask is None else [bool(m) for m in mask[bb][i]]
                if not any(allowed):
                    continue
                s = [sum(a * c for a, c in zip(qr[i], kr[j])) / math.sqrt(hd) for j in range(T)]
                top = max(s[j] for j in range(T) if allowed[j])
                e = [math.exp(s[j] - top) if allowed[j] else 0.0 for j in range(T)]
                weights[bb, h, i] = np.array(e) / sum(e)
                concat[bb, i, cols] = weights[bb, h, i] @ v[bb, :, cols]
    out = concat @ np.asarray(p["Wo"], float)
    if p.get("bo") is not None:
        out = out + np.asarray(p["bo"], float)
    return out, weights


def make(B, T, D, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(B, T, D)) * scale
    p = {f"W{n}": rng.normal(size=(D, D)) / math.sqrt(D) for n in "qkvo"}
    p.update({f"b{n}": rng.normal(size=D) for n in "qkvo"})
    return x, p


def test_apply_rope_matches_explicit_rotations():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 2, 4, 8))
    positions = [5, -3, 5, 120]
    got = np.asarray(apply_rope(x, positions), float)
    for b in range(2):
        for h in range(2):
            for t in range(4):
                np.testing.assert_allclose(got[b, h, t], rotate(list(x[b, h, t]), positions[t]), atol=1e-12)


def test_known_vector_turns_the_right_way():
    got = np.asarray(apply_rope([[[[1.0, 0.0, 0.0, 0.0]]]], [1]), float)[0, 0, 0]
    np.testing.assert_allclose(got, [math.cos(1), 0, math.sin(1), 0], atol=1e-12)
    got = np.asarray(apply_rope([[[[0.0, 1.0, 0.0, 0.0]]]], [1]), float)[0, 0, 0]
    np.testing.assert_allclose(got, [0, math.cos(0.01), 0, math.sin(0.01)], atol=1e-12)


def test_position_zero_is_identity_and_norms_are_kept():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(1, 2, 3, 6))
    np.testing.assert_allclose(np.asarray(apply_rope(x, [0, 0, 0]), float), x, atol=1e-15)
    rot = np.asarray(apply_rope(x, [7, 300, -2]), float)
    np.testing.assert_allclose(np.linalg.norm(rot, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)


@pytest.mark.parametrize("B,T,D,H", [(1, 3, 4, 1), (2, 4, 8, 2), (1, 5, 12, 3)])
def test_attention_matches_oracle(B, T, D, H):
    x, p = make(B, T, D, seed=T * 10 + H)
    positions = [3, 0, 9, -4, 4][:T]
    out, w = rope_attention(x, p, H, positions, None, return_weights=True)
    want_out, want_w = oracle(x, p, H, positions)
    np.testing.assert_allclose(np.asarray(w, float), want_w, atol=1e-9)
    np.testing.assert_allclose(np.asarray(out, float), want_out, atol=1e-9)


def test_shifting_positions_changes_nothing():
    x, p = make(1, 4, 8, seed=5)
    out, w = rope_attention(x, p, 2, [0, 1, 2, 3], None, return_weights=True)
    out2, w2 = rope_attention(x, p, 2, [50, 51, 52, 53], None, return_weights=True)
    np.testing.assert_allclose(np.asarray(w2, float), np.asarray(w, float), atol=1e-9)
    np.testing.assert_allclose(np.asarray(out2, float), np.asarray(out, float), atol=1e-9)


def test_causal_mask_and_blocked_rows():
    x, p = make(1, 4, 4, seed=6)
    mask = np.tril(np.ones((1, 4, 4), bool))
    mask[0, 2] = False                                   # query 2 sees nothing
    out, w = rope_attention(x, p, 2, None, mask, return_weights=True)
    want_out, want_w = oracle(x, p, 2, None, mask)
    np.testing.assert_allclose(np.asarray(w, float), want_w, atol=1e-9)
    assert np.all(np.asarray(w, float)[0, :, 2] == 0)
    np.testing.assert_allclose(np.asarray(out, float)[0, 2], p["bo"], atol=0)


def test_large_scores_stay_finite():
    x, p = make(1, 3, 4, seed=7, scale=40.0)
    out = np.asarray(rope_attention(x, p, 2), float)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, oracle(x, p, 2)[0], rtol=1e-7, atol=1e-7)



def test_a_blocked_key_far_above_the_allowed_ones_takes_nothing():
    rng = np.random.default_rng(10)
    x = 25.0 + rng.normal(0.0, 0.1, size=(1, 4, 4))
    x[0, -1] = 60.0 + rng.normal(0.0, 0.1, size=4)     # its key scores ~2000, the others ~1250
    p = {"Wq": np.eye(4), "Wk": np.eye(4), "Wv": rng.normal(size=(4, 4)), "Wo": rng.normal(size=(4, 4))}
    mask = np.tril(np.ones((1, 4, 4), bool))             # the hot key is blocked for queries 0..2
    out, w = rope_attention(x, p, 2, [0, 0, 0, 0], mask, return_weights=True)
    want_out, want_w = oracle(x, p, 2, [0, 0, 0, 0], mask)
    np.testing.assert_allclose(np.asarray(w, float), want_w, atol=1e-9)
    np.testing.assert_allclose(np.asarray(out, float), want_out, rtol=1e-7, atol=1e-7)


def test_inputs_are_not_modified():
    x, p = make(1, 3, 4, seed=8)
    heads = np.random.default_rng(9).normal(size=(1, 2, 3, 4))
    saved = copy.deepcopy((x, p, heads))
    apply_rope(heads, [1, 2, 3])
    rope_attention(x, p, 2, [1, 2, 3])
    np.testing.assert_array_equal(heads, saved[2])
    np.testing.assert_array_equal(x, saved[0])
    for name in p:
        np.testing.assert_array_equal(p[name], saved[1][name])
