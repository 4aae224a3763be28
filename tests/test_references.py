"""The mha-screen references against an independent oracle: PyTorch's own attention.

torch computes the projections, scaled_dot_product_attention the softmax-weighted values, and
torch.softmax the weights; only the "no allowed key -> zeros" rule (which torch leaves as NaN) is
applied by hand. In CI (CI=true) a missing torch fails these tests instead of skipping them.
"""

from __future__ import annotations

import numpy as np
import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.diagnosis.diagnose import load_module

from conftest import need_torch

torch = need_torch()  # CI installs torch; a missing torch fails there instead of skipping
F = torch.nn.functional

REFS = {name: load_module(str(solutions_dir("mha-screen") / f"reference_{name}.py")) for name in ("lists", "numpy")}


def torch_attention(x, p, H, mask):
    """Independent computation with torch; mask is B×T×T bool (True = allowed) or None."""
    x = torch.tensor(x, dtype=torch.float64)
    B, T, D = x.shape
    hd = D // H

    def proj(w, b):
        y = x @ torch.tensor(p[w], dtype=torch.float64)
        return y + torch.tensor(p[b], dtype=torch.float64) if p.get(b) is not None else y

    def heads(y):
        return y.view(B, T, H, hd).transpose(1, 2)

    q, k, v = heads(proj("Wq", "bq")), heads(proj("Wk", "bk")), heads(proj("Wv", "bv"))
    allowed = torch.ones(B, 1, T, T, dtype=torch.bool) if mask is None else torch.tensor(mask)[:, None]
    empty = ~allowed.any(-1, keepdim=True)  # B×1×T×1
    safe = allowed | empty  # give empty rows something to attend to
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=safe)
    ctx = torch.where(empty, torch.zeros_like(ctx), ctx)
    scores = (q @ k.transpose(-1, -2)) / hd**0.5
    weights = torch.softmax(scores.masked_fill(~safe, float("-inf")), dim=-1)
    weights = torch.where(empty, torch.zeros_like(weights), weights)
    out = ctx.transpose(1, 2).reshape(B, T, D) @ torch.tensor(p["Wo"], dtype=torch.float64)
    if p.get("bo") is not None:
        out = out + torch.tensor(p["bo"], dtype=torch.float64)
    return out.numpy(), weights.numpy()


def random_case(rng):
    B, T, H = rng.integers(1, 4), rng.integers(1, 7), rng.integers(1, 5)
    D = H * rng.integers(1, 4)
    scale = 20.0 if rng.random() < 0.3 else 1.0
    x = rng.normal(0, scale, size=(B, T, D))
    p = {f"W{n}": rng.normal(0, 1 / np.sqrt(D), size=(D, D)) for n in "qkvo"}
    if rng.random() < 0.7:
        p.update({f"b{n}": rng.normal(0, 1, size=D) for n in "qkvo"})
    kind = rng.integers(4)
    if kind == 0:
        mask = None
    elif kind == 1:
        mask = np.tril(np.ones((T, T), bool))[None].repeat(B, 0)
    elif kind == 2:
        lengths = rng.integers(0, T + 1, size=B)
        mask = (np.arange(T)[None, None, :] < lengths[:, None, None]).repeat(T, 1)
    else:
        mask = rng.random((B, T, T)) < 0.5
        mask[:, 0, :] = False  # at least one fully blocked row
    return x, p, int(H), mask


@pytest.mark.parametrize("name", sorted(REFS))
def test_reference_matches_torch_on_random_cases(name):
    ref = REFS[name]
    rng = np.random.default_rng(2024)
    for _ in range(40):
        x, p, H, mask = random_case(rng)
        args = (
            (x, p, H, mask)
            if name == "numpy"
            else (x.tolist(), {k: v.tolist() for k, v in p.items()}, H, None if mask is None else mask.tolist())
        )
        out, weights = ref.multi_head_attention(*args, return_weights=True)
        t_out, t_weights = torch_attention(x, p, H, mask)
        np.testing.assert_allclose(np.asarray(out), t_out, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(np.asarray(weights), t_weights, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(REFS))
def test_reference_softmax_matches_torch(name):
    ref = REFS[name]
    rng = np.random.default_rng(7)
    for n in range(1, 9):
        scores = rng.normal(0, 400, size=n)
        allowed = rng.random(n) < 0.6
        got = np.asarray(ref.stable_softmax(scores.tolist(), allowed.tolist()))
        t = torch.tensor(scores).masked_fill(~torch.tensor(allowed), float("-inf"))
        expected = torch.softmax(t, 0).nan_to_num(0.0).numpy() if allowed.any() else np.zeros(n)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("name", sorted(REFS))
def test_reference_matches_the_statement_examples(name):
    ref = REFS[name]
    np.testing.assert_allclose(
        ref.stable_softmax([1000.0, 999.0, -5.0], allowed=[True, True, False]), [0.7310585786300049, 0.2689414213699951, 0.0], rtol=1e-15
    )
    assert list(ref.stable_softmax([3.0, 4.0], allowed=[False, False])) == [0.0, 0.0]
    assert np.asarray(ref.causal_mask(1, 3)).tolist() == [[[True, False, False], [True, True, False], [True, True, True]]]
    assert np.asarray(ref.padding_mask([2, 3], 3)).tolist() == [[[True, True, False]] * 3, [[True, True, True]] * 3]
    x = [[[1, 0, 1, 0], [0, 2, 0, 1], [1, 1, -1, 2]]]
    eye = np.eye(4).tolist()
    p = {
        "Wq": eye,
        "Wo": eye,
        "bo": [0.5, 0, 0, -0.5],
        "Wk": [[1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 1]],
        "Wv": [[1, 2, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 3, 1]],
    }
    out, w = ref.multi_head_attention(x, p, 2, ref.causal_mask(1, 3), return_weights=True)
    np.testing.assert_allclose(out, [[[1.5, 2, 1, -0.5], [0.555807, 2, 2, 0], [1.194305, 2.619985, 4.889062, 1.444531]]], atol=1e-6)
    np.testing.assert_allclose(w[0][1][2], [0.013770, 0.027928, 0.958302], atol=1e-6)
    t_out, _ = torch_attention(np.array(x, float), {k: np.array(v, float) for k, v in p.items()}, 2, np.asarray(ref.causal_mask(1, 3)))
    np.testing.assert_allclose(out, t_out, atol=1e-12)


# --- mla-decode: the absorbed reference against torch's attention over up-projected heads --------


MLA = load_module(str(solutions_dir("mla-decode") / "reference_numpy.py"))


def torch_rope(x, positions):
    """RoPE as a complex multiplication: the pair (first half, second half) is a + ib, turned by
    e^{i·p·θ}; x is …×T×n, one position per row."""
    half = x.shape[-1] // 2
    theta = 10000.0 ** (-2 * torch.arange(half, dtype=torch.float64) / x.shape[-1])
    turn = torch.polar(torch.ones(len(positions), half, dtype=torch.float64), torch.tensor(positions, dtype=torch.float64)[:, None] * theta)
    z = torch.complex(x[..., :half], x[..., half:]) * turn
    return torch.cat([z.real, z.imag], dim=-1)


def torch_mla(x, p, H, positions):
    """Causal multi-head attention with every head's keys and values up-projected from the latents,
    computed by torch's scaled_dot_product_attention (its default scale is 1/sqrt(d_nope + d_R))."""
    x = torch.tensor(x, dtype=torch.float64)
    W = {k: torch.tensor(v, dtype=torch.float64) for k, v in p.items()}
    B, T, _ = x.shape
    d_R = W["W_kr"].shape[1]
    d_nope, d_v = W["W_uk"].shape[1] // H, W["W_uv"].shape[1] // H
    c = x @ W["W_dkv"]
    k_rope = torch_rope(x @ W["W_kr"], positions)  # B×T×d_R
    q = (x @ W["W_q"]).view(B, T, H, d_nope + d_R).transpose(1, 2)  # B×H×T×(d_nope+d_R)
    q = torch.cat([q[..., :d_nope], torch_rope(q[..., d_nope:], positions)], dim=-1)
    k_nope = (c @ W["W_uk"]).view(B, T, H, d_nope).transpose(1, 2)
    k = torch.cat([k_nope, k_rope[:, None].expand(B, H, T, d_R)], dim=-1)
    v = (c @ W["W_uv"]).view(B, T, H, d_v).transpose(1, 2)
    heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # B×H×T×d_v
    return (heads.transpose(1, 2).reshape(B, T, H * d_v) @ W["W_o"]).numpy()


def test_mla_reference_matches_torch_step_by_step():
    rng = np.random.default_rng(37)
    for _ in range(25):
        B, T, H, D = (int(v) for v in (rng.integers(1, 4), rng.integers(1, 8), rng.integers(1, 5), rng.integers(2, 9)))
        d_c, d_R, d_nope, d_v = int(rng.integers(1, 7)), 2 * int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(1, 5))
        shapes = {
            "W_dkv": (D, d_c),
            "W_uk": (d_c, H * d_nope),
            "W_uv": (d_c, H * d_v),
            "W_q": (D, H * (d_nope + d_R)),
            "W_kr": (D, d_R),
            "W_o": (H * d_v, D),
        }
        p = {name: rng.normal(0, 1 / np.sqrt(rows), size=(rows, cols)) for name, (rows, cols) in shapes.items()}
        x = rng.normal(0, 20.0 if rng.random() < 0.3 else 1.0, size=(B, T, D))
        start = int(rng.integers(0, 3000))
        positions = list(range(start, start + T))
        want = torch_mla(x, p, H, positions)
        cache = None
        for t in range(T):
            out, cache = MLA.mla_decode_step(x[:, t], p, H, positions[t], cache)
            np.testing.assert_allclose(out, want[:, t], rtol=1e-9, atol=1e-9)
        assert sum(np.size(v) for v in cache.values()) == B * T * (d_c + d_R)


# --- varlen-prefill: both references against torch's attention, one document at a time -----------


VARLEN = {name: load_module(str(solutions_dir("varlen-prefill") / name)) for name in ("reference_numpy.py", "reference_padded.py")}


def torch_varlen(q, k, v, cu_q, cu_k):
    """Each document alone through scaled_dot_product_attention: RoPE as a complex multiplication
    (torch_rope) at positions from 0 in the document, the chunk's queries after its cache, a
    bottom-right causal mask (torch's is_causal is top-left when n_q < n_k), and enable_gqa for
    the grouped K/V heads."""
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[2], dtype=torch.float64)
    for i in range(len(cu_q) - 1):
        n_q, n_k = int(cu_q[i + 1] - cu_q[i]), int(cu_k[i + 1] - cu_k[i])
        if n_q == 0:
            continue
        qd = torch.tensor(q[cu_q[i] : cu_q[i + 1]], dtype=torch.float64).transpose(0, 1)  # H×n_q×d
        kd = torch.tensor(k[cu_k[i] : cu_k[i + 1]], dtype=torch.float64).transpose(0, 1)
        vd = torch.tensor(v[cu_k[i] : cu_k[i + 1]], dtype=torch.float64).transpose(0, 1)
        qd = torch_rope(qd, list(range(n_k - n_q, n_k)))
        kd = torch_rope(kd, list(range(n_k)))
        mask = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
        out[cu_q[i] : cu_q[i + 1]] = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask, enable_gqa=True).transpose(0, 1)
    return out.numpy()


@pytest.mark.parametrize("name", sorted(VARLEN))
def test_varlen_references_match_torch_per_document(name):
    rng = np.random.default_rng(37)
    for n in range(25):
        docs = int(rng.integers(1, 6))
        n_q = rng.integers(0, 7, size=docs)
        n_k = n_q + rng.integers(0, 5, size=docs) * (rng.random(docs) < 0.6)
        cu_q, cu_k = (np.concatenate([[0], np.cumsum(a)]).astype(np.int32) for a in (n_q, n_k))
        H_kv = int(rng.integers(1, 4))
        H, d, dv = H_kv * int(rng.integers(1, 4)), 2 * int(rng.integers(1, 5)), int(rng.integers(1, 5))
        scale = 20.0 if n % 5 == 4 else 1.0
        q = rng.normal(0, scale, size=(int(cu_q[-1]), H, d))
        k = rng.normal(0, scale, size=(int(cu_k[-1]), H_kv, d))
        v = rng.normal(size=(int(cu_k[-1]), H_kv, dv))
        np.testing.assert_allclose(
            VARLEN[name].varlen_prefill(q, k, v, cu_q, cu_k), torch_varlen(q, k, v, cu_q, cu_k), rtol=1e-9, atol=1e-9
        )
