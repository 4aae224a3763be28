"""Input builders shared by the suites: random parameters, masks, and conversion to lists.

Inputs go to the candidate as nested lists unless a check says otherwise (lists work for list
and NumPy solutions alike); expected values come from the reference in the kit's process.
"""

from __future__ import annotations

import numpy as np


def lists(value):
    """NumPy arrays (also inside dicts, lists, tuples) -> nested Python lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {k: lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(lists(v) for v in value)
    return value


def params(
    rng, d_in: int, d_out: int | None = None, biases: bool = True, scale: float = 1.0, names: tuple[str, ...] = ("q", "k", "v", "o")
) -> dict:
    """Projection weights W<name> (d_in×d_out, std scale/sqrt(d_in)) and biases b<name>."""
    d_out = d_out or d_in
    out = {}
    for n in names:
        rows = d_out if n == "o" else d_in
        out[f"W{n}"] = rng.normal(0.0, scale / np.sqrt(rows), size=(rows, d_out)).round(6)
        if biases:
            out[f"b{n}"] = rng.normal(0.0, 0.5, size=d_out).round(6)
    return out


def tokens(rng, B: int, T: int, D: int, scale: float = 1.0) -> np.ndarray:
    return (rng.normal(0.0, 1.0, size=(B, T, D)) * scale).round(6)


def random_mask(rng, B: int, T: int, S: int | None = None, blocked_rows: int = 1) -> np.ndarray:
    """Random True/False entries with at least `blocked_rows` fully blocked query rows per batch
    (when T allows) and every other row with at least one allowed key."""
    S = S or T
    mask = rng.random((B, T, S)) < 0.6
    for b in range(B):
        for i in range(T):
            if not mask[b, i].any():
                mask[b, i, rng.integers(S)] = True
        for i in rng.choice(T, size=min(blocked_rows, max(T - 1, 0)), replace=False):
            mask[b, i] = False
    return mask


def causal(B: int, T: int) -> np.ndarray:
    return np.broadcast_to(np.tril(np.ones((T, T), dtype=bool)), (B, T, T)).copy()


def padding(lengths, T: int) -> np.ndarray:
    n = np.asarray(lengths).reshape(-1, 1, 1)
    return np.broadcast_to(np.arange(T).reshape(1, 1, T) < n, (len(lengths), T, T)).copy()


# --- follow-up exercises (gqa, tiled-softmax) ----------------------------------------------------


def gqa_params(rng, D: int, num_heads: int, num_kv_heads: int, biases: bool = True, scale: float = 1.0) -> dict:
    """Wq, Wo (D×D) and Wk, Wv (D×(num_kv_heads·hd)), with biases of matching widths."""
    out = params(rng, D, biases=biases, scale=scale, names=("q", "o"))
    kv_width = num_kv_heads * (D // num_heads)
    for n in ("k", "v"):
        out[f"W{n}"] = rng.normal(0.0, scale / np.sqrt(D), size=(D, kv_width)).round(6)
        if biases:
            out[f"b{n}"] = rng.normal(0.0, 0.5, size=kv_width).round(6)
    return out


def repeat_kv_heads(p: dict, num_heads: int, num_kv_heads: int) -> dict:
    """Plain multi-head parameters equivalent to grouped-query ones: key/value head g's columns
    copied to query heads g·group … (g+1)·group - 1, so query head h reads K/V head h // group."""
    hd = np.shape(p["Wq"])[1] // num_heads
    group = num_heads // num_kv_heads
    cols = np.concatenate([np.arange(g * hd, (g + 1) * hd) for g in np.arange(num_heads) // group])
    full = dict(p)
    for n in ("k", "v"):
        full[f"W{n}"] = np.asarray(p[f"W{n}"])[:, cols]
        if p.get(f"b{n}") is not None:
            full[f"b{n}"] = np.asarray(p[f"b{n}"])[cols]
    return full


def qkv(rng, T: int, S: int, d: int, dv: int, scale: float = 1.0):
    """One head's q (T×d), k (S×d) and v (S×dv) for tiled attention."""
    return (
        rng.normal(0.0, scale, size=(T, d)).round(6),
        rng.normal(0.0, scale, size=(S, d)).round(6),
        rng.normal(0.0, 1.0, size=(S, dv)).round(6),
    )


def mask_of_kind(rng, kind, B: int, T: int):
    """A B×T×T mask for randomised cases: 'random'/'large' (some rows fully blocked), 'padding'
    (random lengths, 0 included), 'causal', or None for no mask."""
    if kind in ("random", "large"):
        return random_mask(rng, B, T)
    if kind == "padding":
        return padding(rng.integers(0, T + 1, size=B).tolist(), T)
    if kind == "causal":
        return causal(B, T)
    return None


# mha-screen's worked example (B=1, T=3, D=4, two heads, causal): kv-cache decodes the same tokens,
# cross-attention reuses the weights over a context of its own. The statements quote its numbers.
WORKED_X = [[[1.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 1.0], [1.0, 1.0, -1.0, 2.0]]]
WORKED_PARAMS = {
    "Wq": [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]],
    "Wk": [[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0]],
    "Wv": [[1.0, 2.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 3.0, 1.0]],
    "Wo": [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]],
    "bo": [0.5, 0.0, 0.0, -0.5],
}


# --- the headline property "stable at large scores, with a blocked score far above" ------------


def hot_blocked_tokens(rng, B: int, T: int, D: int, base: float = 25.0, hot: float = 60.0) -> np.ndarray:
    """B×T×D tokens near `base` in every feature, except the last token near `hot`.

    With Wq = Wk = identity and head width hd, every score is about hd·base²/sqrt(hd) (in the
    hundreds: exp of it overflows), and the last key scores about hd·base·hot/sqrt(hd) with every
    query (far above the others). Under a causal mask that key is blocked for every query but
    the last, so a max taken over blocked entries too makes the allowed weights underflow to 0.
    """
    x = base + rng.normal(0.0, 0.1, size=(B, T, D))
    x[:, -1] = hot + rng.normal(0.0, 0.1, size=(B, D))
    return x.round(6)


def identity_projections(D: int, kv_width: int | None = None, rng=None) -> dict:
    """Wq = Wk = identity (Wk's first kv_width columns for grouped K/V heads); random Wv, Wo; no biases."""
    rng = rng if rng is not None else np.random.default_rng(0)
    kv_width = kv_width or D
    return {
        "Wq": np.eye(D),
        "Wk": np.eye(D)[:, :kv_width],
        "Wv": rng.normal(0.0, 1 / np.sqrt(D), size=(D, kv_width)).round(6),
        "Wo": rng.normal(0.0, 1 / np.sqrt(D), size=(D, D)).round(6),
    }
