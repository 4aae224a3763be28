"""A strong candidate test file for mha-screen: an independent loop-based oracle, exact masks,
stability, fully blocked rows and argument hygiene. Expected to catch every known bug."""
import copy
import math

import numpy as np
import pytest

from solution import causal_mask, multi_head_attention, padding_mask, stable_softmax


def naive_attention(x, p, H, mask=None):
    """Written out with loops, sharing nothing with the code under test."""
    x = np.asarray(x, float)
    B, T, D = x.shape
    hd = D // H

    def proj(w, b):
        y = x @ np.asarray(p[w], float)
        return y + np.asarray(p[b], float) if p.get(b) is not None else y

    q, k, v = proj("Wq", "bq"), proj("Wk", "bk"), proj("Wv", "bv")
    weights = np.zeros((B, H, T, T))
    concat = np.zeros((B, T, D))
    for b in range(B):
        for h in range(H):
            cols = slice(h * hd, (h + 1) * hd)
            for i in range(T):
                allowed = [True] * T if mask is None else [bool(a) for a in mask[b][i]]
                if not any(allowed):
                    continue
                s = [float(q[b, i, cols] @ k[b, j, cols]) / math.sqrt(hd) for j in range(T)]
                top = max(s[j] for j in range(T) if allowed[j])
                e = [math.exp(s[j] - top) if allowed[j] else 0.0 for j in range(T)]
                for j in range(T):
                    weights[b, h, i, j] = e[j] / sum(e)
                concat[b, i, cols] = weights[b, h, i] @ v[b, :, cols]
    out = concat @ np.asarray(p["Wo"], float)
    if p.get("bo") is not None:
        out = out + np.asarray(p["bo"], float)
    return out, weights


def make(B, T, D, seed, biases=True, scale=1.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(B, T, D)) * scale
    p = {f"W{n}": rng.normal(size=(D, D)) / math.sqrt(D) for n in "qkvo"}
    if biases:
        p.update({f"b{n}": rng.normal(size=D) for n in "qkvo"})
    return x, p


@pytest.mark.parametrize("B,T,D,H", [(1, 3, 4, 1), (2, 3, 8, 2), (2, 5, 8, 4), (1, 4, 6, 3)])
def test_matches_loop_oracle_without_mask(B, T, D, H):
    x, p = make(B, T, D, seed=B * 100 + T * 10 + H, scale=2.0)
    out, w = multi_head_attention(x, p, H, return_weights=True)
    want_out, want_w = naive_attention(x, p, H)
    np.testing.assert_allclose(np.asarray(w, float), want_w, atol=1e-9)
    np.testing.assert_allclose(np.asarray(out, float), want_out, atol=1e-9)


def test_matches_loop_oracle_with_random_mask_and_blocked_rows():
    B, T, D, H = 2, 4, 8, 2
    x, p = make(B, T, D, seed=7)
    rng = np.random.default_rng(8)
    mask = rng.random((B, T, T)) < 0.6
    mask[:, :, 0] = True
    mask[0, 2] = False            # a query with no allowed key
    out, w = multi_head_attention(x, p, H, mask.tolist(), return_weights=True)
    want_out, want_w = naive_attention(x, p, H, mask)
    np.testing.assert_allclose(np.asarray(w, float), want_w, atol=1e-9)
    np.testing.assert_allclose(np.asarray(out, float), want_out, atol=1e-9)


def test_fully_blocked_query_outputs_bo_and_zero_weights():
    x, p = make(1, 3, 4, seed=3)
    mask = [[[True, True, True], [False, False, False], [True, False, True]]]
    out, w = multi_head_attention(x, p, 2, mask, return_weights=True)
    assert np.all(np.asarray(w)[0, :, 1, :] == 0.0), "a fully blocked query must have zero weights"
    np.testing.assert_allclose(np.asarray(out)[0, 1], p["bo"], atol=0)


def test_causal_mask_exact():
    assert np.array_equal(causal_mask(2, 3), [[[True, False, False], [True, True, False], [True, True, True]]] * 2)


def test_masks_are_booleans():
    """True = allowed: 0/1 integers read as indices by masked code, so masks must be bool."""
    for mask in (causal_mask(2, 3), padding_mask([1, 3], 3)):
        values = np.asarray(mask)
        assert values.dtype == np.bool_, values.dtype


def test_padding_mask_exact():
    assert np.array_equal(padding_mask([1, 3], 3), [[[True, False, False]] * 3, [[True, True, True]] * 3])


def test_causal_attention_ignores_the_future():
    x, p = make(1, 4, 4, seed=11)
    changed = x.copy()
    changed[0, 3] += 10.0
    a = np.asarray(multi_head_attention(x, p, 2, causal_mask(1, 4)), float)
    b = np.asarray(multi_head_attention(changed, p, 2, causal_mask(1, 4)), float)
    np.testing.assert_allclose(a[0, :3], b[0, :3], atol=1e-12)
    assert not np.allclose(a[0, 3], b[0, 3])


def test_softmax_large_scores_and_blocked_max():
    np.testing.assert_allclose(stable_softmax([1000.0, 999.0]), stable_softmax([1.0, 0.0]), atol=1e-12)
    got = stable_softmax([-1000.0, 1000.0, -999.0], [True, False, True])
    np.testing.assert_allclose(got, [1 / (1 + math.e), 0.0, math.e / (1 + math.e)], atol=1e-12)


def test_softmax_all_blocked_is_zero():
    assert list(np.asarray(stable_softmax([3.0, 4.0], [False, False]), float)) == [0.0, 0.0]


def test_layer_stable_at_large_scores():
    x, p = make(1, 3, 4, seed=5, scale=40.0)
    out = np.asarray(multi_head_attention(x, p, 2, causal_mask(1, 3)), float)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, naive_attention(x, p, 2, causal_mask(1, 3))[0], rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("as_lists", [True, False])
def test_arguments_left_unchanged(as_lists):
    x, p = make(1, 3, 4, seed=9)
    scores = [3.0, 1.0, 2.0]
    mask = [[[True, False, True]] * 3]
    args = [x.tolist(), {k: v.tolist() for k, v in p.items()}, mask] if as_lists else [x, p, np.array(mask)]
    before = copy.deepcopy(args)
    multi_head_attention(args[0], args[1], 2, args[2])
    s = scores if as_lists else np.array(scores)
    stable_softmax(s, [True, True, False])
    assert np.array_equal(np.asarray(s), [3.0, 1.0, 2.0]), "stable_softmax changed its scores argument"
    for a, b in zip(before[:1] + before[2:], args[:1] + args[2:]):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    for k in p:
        assert np.array_equal(np.asarray(before[1][k]), np.asarray(args[1][k]))
    weights_only = {k: v for k, v in args[1].items() if k.startswith("W")}   # optional biases omitted
    multi_head_attention(args[0], weights_only, 2, args[2])
    assert sorted(weights_only) == ["Wk", "Wo", "Wq", "Wv"], "params gained or lost keys"
