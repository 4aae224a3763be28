"""The named stages of the exercises whose reference is not one projected attention layer, as data
(checks/stages.py holds the layer's, the words and the rules): tiled-softmax (each tile's scores,
the running max, the rescale factor, the running sum and accumulator after each tile), paged-
attention (the keys and values gathered through the block table, each sequence's scores and
weights), attention-backward (the forward weights, dv, dP, the row sums, dZ, dq, dk) and
mla-decode (the latent, the rotary key, the cache after the append, the absorbed query, the two
score terms, the weighted latents).

A stage over parts has a list as its value: one entry per tile of keys (tiled-softmax) or per
sequence (paged-attention); the code's value bound inside its loop is compared with each, and
the stage is right when its last part is (kit/grading/locate/matching.py, `parts`).

Everything here runs in the kit's process only (this module is under attn_kit.checks, which the
worker refuses to import).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attn_kit.checks.stages import ATTENTION, VARIANTS, Context, Stage, _arg, _f64, _masked, _softmax

_BY_ID = {s.id: s for s in ATTENTION}


def _shift(m: Any) -> Any:
    return np.where(np.isfinite(m), m, 0.0)


# --- tiled-softmax: one head, key block by key block ----------------------------------------------


def _tiles(ctx: Context, a: Any) -> list:
    block = ctx.extra["block"]
    return [a[..., i : i + block] for i in range(0, a.shape[-1], block)]


def _tile_raw(ctx: Context) -> list:
    q, k, _ = ctx.given
    return _tiles(ctx, q @ k.T)


def _tile_masked(ctx: Context, scaled: list) -> list:
    return [np.where(a, s, -np.inf) for s, a in zip(scaled, _tiles(ctx, ctx.allowed))]


def _running_max(ctx: Context, masked: list) -> list:
    out, m = [], np.full(masked[0].shape[0], -np.inf)
    for s in masked:
        m = np.maximum(m, s.max(axis=-1))
        out.append(m)
    return out


def _rescale(ctx: Context, m: list) -> list:
    before = [np.full(m[0].shape, -np.inf), *m[:-1]]
    return [np.exp(old - _shift(new)) for old, new in zip(before, m)]


def _exponentials(ctx: Context, masked: list, m: list) -> list:
    return [np.exp(s - _shift(top)[:, None]) for s, top in zip(masked, m)]


def _running_sum(ctx: Context, p: list, alpha: list) -> list:
    out, total = [], np.zeros(p[0].shape[0])
    for e, a in zip(p, alpha):
        total = total * a + e.sum(axis=-1)
        out.append(total)
    return out


def _running_acc(ctx: Context, p: list, alpha: list) -> list:
    v = ctx.given[2]
    out, acc = [], np.zeros((p[0].shape[0], v.shape[1]))
    for e, a, start in zip(p, alpha, range(0, v.shape[0], ctx.extra["block"])):
        acc = acc * a[:, None] + e @ v[start : start + e.shape[-1]]
        out.append(acc)
    return out


def _normalised(ctx: Context, acc: list, total: list) -> Any:
    a, n = acc[-1], total[-1]
    return np.where(n[:, None] > 0, a / np.where(n > 0, n, 1.0)[:, None], 0.0)


TILED: tuple[Stage, ...] = (
    Stage("raw", "this tile's raw scores (q · kᵀ over the block's keys)", "qk", (), _tile_raw),
    Stage("scaled", "this tile's scaled scores (q · kᵀ / √d)", "qk", ("raw",), lambda c, r: [s / np.sqrt(c.hd) for s in r], previous="raw"),
    Stage("masked", "this tile's masked scores (blocked keys at -inf)", "qk", ("scaled",), _tile_masked, previous="scaled"),
    Stage("m_run", "the running max after this tile (the old max and the tile's largest score)", "q", ("masked",), _running_max),
    Stage("alpha", "the rescale factor exp(m_old − m_new) for what was summed before", "q", ("m_run",), _rescale),
    Stage("p", "this tile's exponentials exp(s − m_new)", "qk", ("masked", "m_run"), _exponentials),
    Stage("l_run", "the running sum after this tile (l · α + the tile's Σ p)", "q", ("p", "alpha"), _running_sum),
    Stage("acc_run", "the running accumulator after this tile (acc · α + p @ v)", "qd", ("p", "alpha"), _running_acc),
    Stage("out", "the output (acc / l; 0 where l = 0)", "qd", ("acc_run", "l_run"), _normalised),
)


def _bind_tiled(args: tuple, kwargs: dict) -> Context:
    q, k, v = (_f64(a) for a in args[:3])
    mask, block = _arg(args, kwargs, 3, "mask"), int(_arg(args, kwargs, 4, "block_size", 64))
    if q.ndim != 2 or k.ndim != 2 or v.ndim != 2 or block < 1:
        raise ValueError("not the statement's shapes")
    allowed = None if mask is None else np.ascontiguousarray(np.broadcast_to(np.asarray(mask, dtype=bool), (q.shape[0], k.shape[0])))
    return Context(q, k, {}, 1, 1, allowed, given=(q, k, v), table=TILED, extra={"block": block, "parts": "tiles"})


def _probe_tiled(rng: Any) -> tuple[tuple, dict]:
    # three tiles, the last partial; every tile allows some key of every query (no empty row)
    T, S, block = 5, 11, 4
    q, k, v = (rng.normal(size=shape).round(6) for shape in ((T, 4), (S, 4), (S, 3)))
    allowed = rng.random((T, S)) < 0.6
    allowed[:, ::block] = True
    return (q * 2.0, k, v, allowed), {"block_size": block}


# --- attention-backward: the gradients by hand ----------------------------------------------------


def _scores(ctx: Context) -> Any:
    q, k, _ = ctx.given
    return q @ np.swapaxes(k, -1, -2)


def _delta(ctx: Context, weights: Any, dp: Any) -> Any:
    return (weights * dp).sum(axis=-1)


BACKWARD: tuple[Stage, ...] = (
    Stage("raw", "the raw scores (q · kᵀ)", "bhqk", (), _scores),
    _BY_ID["scaled"],
    Stage("masked", "the masked scores (blocked entries at -inf)", "bhqk", ("scaled",), _masked, previous="scaled"),
    _BY_ID["weights"],
    Stage("fwd_out", "the forward output P @ v", "bhtd", ("weights",), lambda c, w: w @ c.given[2]),
    Stage("dv", "dv = Pᵀ @ dout (the values' gradient)", "bhkd", ("weights",), lambda c, w: np.swapaxes(w, -1, -2) @ c.extra["dout"]),
    Stage("dp", "dP = dout @ vᵀ (the weights' gradient)", "bhqk", (), lambda c: c.extra["dout"] @ np.swapaxes(c.given[2], -1, -2)),
    Stage("delta", "the row sums rowsum(P ⊙ dP) (= rowsum(dout ⊙ out))", "bhq", ("weights", "dp"), _delta),
    Stage(
        "dz",
        "dS = P ⊙ (dP − rowsum(P ⊙ dP)) (the scores' gradient)",
        "bhqk",
        ("weights", "dp", "delta"),
        lambda c, w, dp, d: w * (dp - d[..., None]),
    ),
    Stage("dq", "dq = dS @ k / √d (the queries' gradient)", "bhtd", ("dz",), lambda c, dz: dz @ c.given[1] / np.sqrt(c.hd)),
    Stage(
        "dk", "dk = dSᵀ @ q / √d (the keys' gradient)", "bhkd", ("dz",), lambda c, dz: np.swapaxes(dz, -1, -2) @ c.given[0] / np.sqrt(c.hd)
    ),
)


def _bind_backward(args: tuple, kwargs: dict) -> Context:
    q, k, v, dout = (_f64(a) for a in args[:4])
    mask = _arg(args, kwargs, 4, "mask")
    B, H, T, _ = q.shape
    S = k.shape[2]
    allowed = None if mask is None else np.ascontiguousarray(np.broadcast_to(np.asarray(mask, dtype=bool), (B, T, S)))
    return Context(q, k, {}, H, H, allowed, given=(q, k, v), table=BACKWARD, extra={"dout": dout})


def _probe_backward(rng: Any) -> tuple[tuple, dict]:
    B, H, T, S, d, dv = 1, 2, 3, 5, 4, 3
    q, k, v, dout = (rng.normal(size=s).round(6) for s in ((B, H, T, d), (B, H, S, d), (B, H, S, dv), (B, H, T, dv)))
    allowed = rng.random((B, T, S)) < 0.6
    allowed[:, :, 0] = True
    return (q * 2.0, k, v, dout, allowed), {}


# --- paged-attention: one decode step over a block-paged cache ------------------------------------


def _gathered(ctx: Context, pool: str, order: Callable[[Any], Any] = lambda table: table, swapped: bool = False) -> list:
    """Each live sequence's tokens read from `pool` through its block table: token t in block
    table[t // size], slot t % size (`order` and `swapped` read it the classic wrong ways)."""
    size, out = ctx.extra["k_pool"].shape[1], []
    for b in ctx.extra["live"]:
        t = np.arange(int(ctx.extra["lens"][b]))
        table = order(np.asarray([int(x) for x in ctx.extra["tables"][b]], dtype=np.int64))
        blocks, slots = (table[t % size], t // size) if swapped else (table[t // size], t % size)
        out.append(ctx.extra[pool][blocks, slots])
    return out


def _wrong_gather(pool: str, order: Callable[[Any], Any] = lambda table: table, swapped: bool = False) -> Callable[[Context, dict], Any]:
    return lambda c, v: _gathered(c, pool, order, swapped)[-1]


for _stage, _pool in (("k_gathered", "k_pool"), ("v_gathered", "v_pool")):
    VARIANTS[_stage] = (
        (
            "it reads block table[t % block_size], slot t // block_size: the block and the slot are swapped",
            _wrong_gather(_pool, swapped=True),
        ),
        ("it reads the table's blocks in id order, not in the table's order", _wrong_gather(_pool, np.sort)),
    )


def _paged_raw(ctx: Context, keys: list) -> list:
    q = ctx.x
    return [np.einsum("hd,nhd->hn", q[b], k) for b, k in zip(ctx.extra["live"], keys)]


def _paged_out(ctx: Context, weights: list, values: list) -> Any:
    q, v_pool = ctx.x, ctx.extra["v_pool"]
    out = np.zeros((q.shape[0], q.shape[1], v_pool.shape[-1]))
    for b, w, v in zip(ctx.extra["live"], weights, values):
        out[b] = np.einsum("hn,nhd->hd", w, v)
    return out


PAGED: tuple[Stage, ...] = (
    Stage(
        "k_gathered",
        "the sequence's keys gathered through its block table (token order, its length only)",
        "khd",
        (),
        lambda c: _gathered(c, "k_pool"),
    ),
    Stage("v_gathered", "the sequence's values gathered through its block table", "khd", (), lambda c: _gathered(c, "v_pool")),
    Stage("raw", "the sequence's raw scores (q · kᵀ, one row per head)", "hk", ("k_gathered",), _paged_raw),
    Stage(
        "scaled", "the sequence's scaled scores (q · kᵀ / √d)", "hk", ("raw",), lambda c, r: [s / np.sqrt(c.hd) for s in r], previous="raw"
    ),
    Stage(
        "weights",
        "the sequence's attention weights (softmax over its tokens)",
        "hk",
        ("scaled",),
        lambda c, s: [_softmax(c, x) for x in s],
        previous="scaled",
    ),
    Stage("out", "the output (weights @ the gathered values; 0 for an empty sequence)", "bhd", ("weights", "v_gathered"), _paged_out),
)


def _bind_paged(args: tuple, kwargs: dict) -> Context:
    q = _f64(args[0])
    k_pool, v_pool = _f64(args[1]), _f64(args[2])
    tables, lens = list(args[3]), [int(n) for n in args[4]]
    live = [b for b, n in enumerate(lens) if n > 0]
    if q.ndim != 3 or k_pool.ndim != 4 or not live:
        raise ValueError("not the statement's shapes")
    extra = {"k_pool": k_pool, "v_pool": v_pool, "tables": tables, "lens": lens, "live": live, "parts": "sequences"}
    return Context(q, q, {}, q.shape[1], q.shape[1], None, table=PAGED, extra=extra, width=q.shape[-1])


def _probe_paged(rng: Any) -> tuple[tuple, dict]:
    # tables out of order, lengths that end inside a block, garbage in the slots past them; few
    # tokens, so a loop that reads one token a line stays within the harness's records per line
    B, H, d, size, N = 3, 2, 4, 4, 8
    k_pool, v_pool = (rng.normal(size=(N, size, H, d)).round(6) for _ in range(2))
    k_pool[:, 3] += 40.0  # slot 3 of every block: garbage unless a length reaches it
    tables = [[5, 2, 0, 4], [7, 0, 0, 0], [1, 6, 3, 0]]  # padded past what the lengths need
    return (rng.normal(size=(B, H, d)).round(6) * 2.0, k_pool, v_pool, tables, [3, 0, 5]), {}


# --- mla-decode: one step of multi-head latent attention ------------------------------------------


def _rope(x: Any, position: Any) -> Any:
    half = x.shape[-1] // 2
    theta = 10000.0 ** (-2.0 * np.arange(half, dtype=np.float64) / x.shape[-1])
    a = np.multiply.outer(np.asarray(position, dtype=np.float64), theta)
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * np.cos(a) - second * np.sin(a), second * np.cos(a) + first * np.sin(a)], axis=-1)


def _w(ctx: Context, name: str) -> Any:
    return _f64(ctx.params[name])


def _cached(ctx: Context, name: str, new: Any) -> Any:
    cache = ctx.extra["cache"]
    return new[:, None] if cache is None else np.concatenate([_f64(cache[name]), new[:, None]], axis=1)


def _q_heads(ctx: Context, q: Any) -> Any:
    return q.reshape(q.shape[0], ctx.heads, -1)


def _per_head(ctx: Context, name: str) -> Any:
    w = _w(ctx, name)
    return w.reshape(w.shape[0], ctx.heads, -1)


VARIANTS["c_new"] = (
    (
        "it is rotated by the position: only the d_R rotary part turns, the latent is cached as projected",
        lambda c, v: _rope(c.x @ _w(c, "W_dkv"), c.extra["position"]),
    ),
)

MLA: tuple[Stage, ...] = (
    Stage("c_new", "the new token's latent (x @ W_dkv, not rotated)", "bD", (), lambda c: c.x @ _w(c, "W_dkv")),
    Stage("kr_raw", "the new token's rotary key before the rotation (x @ W_kr)", "bD", (), lambda c: c.x @ _w(c, "W_kr")),
    Stage(
        "kr_new",
        "the new token's rotary key turned by its position",
        "bD",
        ("kr_raw",),
        lambda c, k: _rope(k, c.extra["position"]),
        previous="kr_raw",
    ),
    Stage("latents", "the latent cache after the append (B×t×d_c)", "bkD", ("c_new",), lambda c, n: _cached(c, "c_kv", n)),
    Stage("rope_keys", "the rotary keys after the append (B×t×d_R)", "bkD", ("kr_new",), lambda c, n: _cached(c, "k_rope", n)),
    Stage("q_all", "the projected query (x @ W_q)", "bD", (), lambda c: c.x @ _w(c, "W_q")),
    Stage("q_split", "the query split into heads", "bhd", ("q_all",), _q_heads),
    Stage(
        "q_nope",
        "each head's unrotated query part (its first d_nope columns)",
        "bhd",
        ("q_split",),
        lambda c, q: q[..., : c.extra["d_nope"]],
    ),
    Stage("q_pe", "each head's rotary query part before the rotation", "bhd", ("q_split",), lambda c, q: q[..., c.extra["d_nope"] :]),
    Stage(
        "q_rope",
        "each head's rotary query part turned by the position",
        "bhd",
        ("q_pe",),
        lambda c, q: _rope(q, c.extra["position"]),
        previous="q_pe",
    ),
    Stage(
        "q_latent",
        "the absorbed query (q_nope of head h @ W_uk_hᵀ, one per head)",
        "bhD",
        ("q_nope",),
        lambda c, q: np.einsum("bhn,chn->bhc", q, _per_head(c, "W_uk")),
    ),
    Stage(
        "s_nope",
        "the latent part of the scores (absorbed query · latents)",
        "bhk",
        ("q_latent", "latents"),
        lambda c, q, lat: np.einsum("bhc,btc->bht", q, lat),
    ),
    Stage(
        "s_rope",
        "the rotary part of the scores (rotated query · rotary keys)",
        "bhk",
        ("q_rope", "rope_keys"),
        lambda c, q, k: np.einsum("bhr,btr->bht", q, k),
    ),
    Stage("raw", "the raw scores (the latent part + the rotary part)", "bhk", ("s_nope", "s_rope"), lambda c, a, b: a + b),
    Stage("scaled", "the scaled scores (/ √(d_nope + d_R))", "bhk", ("raw",), lambda c, s: s / np.sqrt(c.hd), previous="raw"),
    Stage(
        "weights",
        "the attention weights (softmax over the cached tokens)",
        "bhk",
        ("scaled",),
        lambda c, s: _softmax(c, s),
        previous="scaled",
    ),
    Stage("mixed", "the weighted latents (weights @ latents, per head)", "bhD", ("weights", "latents"), lambda c, w, lat: w @ lat),
    Stage(
        "heads_v",
        "each head's output (weighted latents @ W_uv_h)",
        "bhd",
        ("mixed",),
        lambda c, m: np.einsum("bhc,chv->bhv", m, _per_head(c, "W_uv")),
    ),
    Stage("out", "the output (the heads side by side @ W_o)", "bD", ("heads_v",), lambda c, h: h.reshape(h.shape[0], -1) @ _w(c, "W_o")),
)


def _bind_mla(args: tuple, kwargs: dict) -> Context:
    x, params = _f64(args[0]), dict(args[1])
    heads, position = int(_arg(args, kwargs, 2, "num_heads")), _arg(args, kwargs, 3, "position")
    cache = _arg(args, kwargs, 4, "cache")
    d_r = np.shape(params["W_kr"])[1]
    d_nope = np.shape(params["W_uk"])[1] // heads
    extra = {"position": float(position), "cache": None if cache is None else dict(cache), "d_nope": d_nope}
    return Context(x, x, params, heads, heads, None, table=MLA, extra=extra, width=d_nope + d_r)


def _probe_mla(rng: Any) -> tuple[tuple, dict]:
    B, D, H, d_c, d_r, d_nope, d_v, t = 2, 8, 2, 6, 4, 4, 3, 3
    widths = {
        "W_dkv": (D, d_c),
        "W_kr": (D, d_r),
        "W_q": (D, H * (d_nope + d_r)),
        "W_uk": (d_c, H * d_nope),
        "W_uv": (d_c, H * d_v),
        "W_o": (H * d_v, D),
    }
    params = {name: rng.normal(0.0, 1 / np.sqrt(shape[0]), size=shape).round(6) for name, shape in widths.items()}
    cache = {"c_kv": rng.normal(size=(B, t, d_c)).round(6), "k_rope": rng.normal(size=(B, t, d_r)).round(6)}
    return (rng.normal(size=(B, D)).round(6) * 2.0, params, H, 7, cache), {}


# --- varlen-prefill: causal attention over packed documents, per document --------------------------


def _documents(ctx: Context) -> list[tuple[int, int, int, int]]:
    """(qs, qe, ks, ke) of each document with queries."""
    cu_q, cu_k = ctx.extra["cu_q"], ctx.extra["cu_k"]
    return [(cu_q[i], cu_q[i + 1], cu_k[i], cu_k[i + 1]) for i in range(len(cu_q) - 1) if cu_q[i + 1] > cu_q[i]]


def _varlen_rope(x: Any, positions: Any) -> Any:
    return _rope(x, positions[:, None])  # n×heads×d: one position per row, every head


def _doc_queries(ctx: Context) -> list:
    q = ctx.given[0]
    return [_varlen_rope(q[qs:qe], np.arange((ke - ks) - (qe - qs), ke - ks)) for qs, qe, ks, ke in _documents(ctx)]


def _doc_keys(ctx: Context) -> list:
    return [_varlen_rope(ctx.given[1][ks:ke], np.arange(ke - ks)) for _, _, ks, ke in _documents(ctx)]


def _doc_repeat(ctx: Context, parts: list) -> list:
    return [np.repeat(p, ctx.heads // ctx.kv_heads, axis=1) for p in parts]


def _doc_allowed(ctx: Context) -> list:
    """Each document's bottom-right causal mask, n_q×n_k."""
    return [np.arange(ke - ks)[None, :] <= (ke - ks) - (qe - qs) + np.arange(qe - qs)[:, None] for qs, qe, ks, ke in _documents(ctx)]


def _row_softmax(s: Any) -> Any:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _doc_out(ctx: Context, context: list) -> Any:
    q, v = ctx.given[0], ctx.given[2]
    out = np.zeros((q.shape[0], q.shape[1], v.shape[2]))
    for (qs, qe, _, _), c in zip(_documents(ctx), context):
        out[qs:qe] = c
    return out


VARLEN: tuple[Stage, ...] = (
    Stage("q_doc", "this document's queries rotated at their positions (n_k − n_q … n_k − 1)", "qhd", (), _doc_queries),
    Stage("k_doc", "this document's keys rotated at their positions (0 … n_k − 1)", "khd", (), _doc_keys),
    Stage("k_group", "this document's keys, one head per query head", "khd", ("k_doc",), _doc_repeat),
    Stage(
        "raw",
        "this document's raw scores (q · kᵀ, per head)",
        "hqk",
        ("q_doc", "k_group"),
        lambda c, q, k: [np.einsum("qhd,khd->hqk", a, b) for a, b in zip(q, k)],
    ),
    Stage("scaled", "this document's scaled scores (/ √d)", "hqk", ("raw",), lambda c, r: [s / np.sqrt(c.hd) for s in r], previous="raw"),
    Stage(
        "masked",
        "this document's masked scores (causal, aligned bottom-right; blocked at -inf)",
        "hqk",
        ("scaled",),
        lambda c, s: [np.where(a, x, -np.inf) for x, a in zip(s, _doc_allowed(c))],
        previous="scaled",
    ),
    Stage(
        "weights",
        "this document's attention weights (softmax over its keys)",
        "hqk",
        ("masked",),
        lambda c, s: [_row_softmax(x) for x in s],
    ),
    Stage(
        "v_group",
        "this document's values, one head per query head",
        "khd",
        (),
        lambda c: _doc_repeat(c, [c.given[2][ks:ke] for _, _, ks, ke in _documents(c)]),
    ),
    Stage(
        "context",
        "this document's output rows (weights @ v, per head)",
        "qhd",
        ("weights", "v_group"),
        lambda c, w, v: [np.einsum("hqk,khv->qhv", a, b) for a, b in zip(w, v)],
    ),
    Stage("out", "the packed output (each document's rows in place)", "thd", ("context",), _doc_out),
)


def _bind_varlen(args: tuple, kwargs: dict) -> Context:
    q, k, v = (_f64(a) for a in args[:3])
    cu_q = [int(c) for c in _arg(args, kwargs, 3, "cu_seqlens_q")]
    cu_k = [int(c) for c in _arg(args, kwargs, 4, "cu_seqlens_k")]
    if q.ndim != 3 or k.ndim != 3 or len(cu_q) != len(cu_k) or q.shape[1] % k.shape[1]:
        raise ValueError("not the statement's shapes")
    ctx = Context(
        q, k, {}, q.shape[1], k.shape[1], None, given=(q, k, v), table=VARLEN, extra={"cu_q": cu_q, "cu_k": cu_k, "parts": "documents"}
    )
    masks = _doc_allowed(ctx)
    if not masks:
        raise ValueError("no document has queries")
    ctx.allowed = np.concatenate([m.ravel() for m in masks])  # read only to tell whether anything is blocked
    return ctx


def _probe_varlen(rng: Any) -> tuple[tuple, dict]:
    # a document with a cache, one with a cache only (no rows), one without; grouped heads
    cu_q, cu_k = [0, 2, 2, 5], [0, 4, 6, 9]
    q, k, v = (rng.normal(size=s).round(6) for s in ((5, 4, 4), (9, 2, 4), (9, 2, 3)))
    return (q * 2.0, k, v, cu_q, cu_k), {}


# --- flash-backward: the backward pass block pair by block pair -----------------------------------


def _pairs(ctx: Context) -> list[tuple[int, int, int, int]]:
    """(i0, i1, j0, j1) of each block pair the backward reads, keys the outer loop; the last pair
    is the same in either loop order (the stage's value is its last part)."""
    T, S = ctx.given[0].shape[0], ctx.given[1].shape[0]
    bq, bk, causal = ctx.extra["block_q"], ctx.extra["block_k"], ctx.extra["causal"]
    out = []
    for j0 in range(0, S, bk):
        for i0 in range(0, T, bq):
            if not causal or j0 <= min(i0 + bq, T) - 1 + S - T:
                out.append((i0, min(i0 + bq, T), j0, min(j0 + bk, S)))
    return out


def _pair_masked(ctx: Context, scaled: list) -> list:
    T, S = ctx.given[0].shape[0], ctx.given[1].shape[0]
    allowed = np.ones((T, S), dtype=bool) if ctx.allowed is None else ctx.allowed
    if ctx.extra["causal"]:
        allowed = allowed & (np.arange(S)[None, :] <= np.arange(T)[:, None] + S - T)
    return [np.where(allowed[i0:i1, j0:j1], s, -np.inf) for s, (i0, i1, j0, j1) in zip(scaled, _pairs(ctx))]


def _pair_p(ctx: Context, masked: list) -> list:
    lse = ctx.extra["lse"]
    shift = np.where(np.isfinite(lse), lse, 0.0)
    return [np.exp(s - shift[i0:i1, None]) for s, (i0, i1, _, _) in zip(masked, _pairs(ctx))]


def _pair_dp(ctx: Context) -> list:
    dout, v = ctx.extra["dout"], ctx.given[2]
    return [dout[i0:i1] @ v[j0:j1].T for i0, i1, j0, j1 in _pairs(ctx)]


def _pair_ds(ctx: Context, p: list, dp: list, delta: Any) -> list:
    return [a * (b - delta[i0:i1, None]) for a, b, (i0, i1, _, _) in zip(p, dp, _pairs(ctx))]


def _summed(ctx: Context, blocks: list, rows: str, make: Callable[[Any, int, int, int, int], Any], width: int) -> Any:
    """A gradient summed over the block pairs: `make(block, i0, i1, j0, j1)` lands on the query
    rows (rows = "q") or the key rows (rows = "k")."""
    n = ctx.given[0].shape[0] if rows == "q" else ctx.given[1].shape[0]
    total = np.zeros((n, width))
    for block, (i0, i1, j0, j1) in zip(blocks, _pairs(ctx)):
        a, b = (i0, i1) if rows == "q" else (j0, j1)
        total[a:b] += make(block, i0, i1, j0, j1)
    return total


def _flash_dv(ctx: Context, p: list) -> Any:
    dout = ctx.extra["dout"]
    return _summed(ctx, p, "k", lambda x, i0, i1, j0, j1: x.T @ dout[i0:i1], dout.shape[1])


def _flash_dq(ctx: Context, ds: list) -> Any:
    k = ctx.given[1]
    return _summed(ctx, ds, "q", lambda x, i0, i1, j0, j1: x @ k[j0:j1] / np.sqrt(ctx.hd), k.shape[1])


def _flash_dk(ctx: Context, ds: list) -> Any:
    q = ctx.given[0]
    return _summed(ctx, ds, "k", lambda x, i0, i1, j0, j1: x.T @ q[i0:i1] / np.sqrt(ctx.hd), q.shape[1])


FLASH_BACKWARD: tuple[Stage, ...] = (
    Stage("delta", "D = rowsum(dout ⊙ out), one per query", "q", (), lambda c: np.sum(c.extra["dout"] * c.extra["out"], axis=1)),
    Stage(
        "raw",
        "this block pair's raw scores (q_i · k_jᵀ)",
        "qk",
        (),
        lambda c: [c.given[0][i0:i1] @ c.given[1][j0:j1].T for i0, i1, j0, j1 in _pairs(c)],
    ),
    Stage("scaled", "this block pair's scaled scores (/ √d)", "qk", ("raw",), lambda c, r: [s / np.sqrt(c.hd) for s in r], previous="raw"),
    Stage("masked", "this block pair's masked scores (blocked at -inf)", "qk", ("scaled",), _pair_masked, previous="scaled"),
    Stage("p", "this block pair's P = exp(s − lse), from the saved logsumexp", "qk", ("masked",), _pair_p),
    Stage("dv", "dv = Σ Pᵀ · dout over the block pairs", "kd", ("p",), _flash_dv),
    Stage("dp", "this block pair's dP = dout_i · v_jᵀ", "qk", (), _pair_dp),
    Stage("ds", "this block pair's dS = P ⊙ (dP − D)", "qk", ("p", "dp", "delta"), _pair_ds),
    Stage("dq", "dq = Σ dS · k / √d over the block pairs", "qd", ("ds",), _flash_dq),
    Stage("dk", "dk = Σ dSᵀ · q / √d over the block pairs", "kd", ("ds",), _flash_dk),
)


def _bind_flash_backward(args: tuple, kwargs: dict) -> Context:
    q, k, v, out, lse, dout = (_f64(a) for a in args[:6])
    mask = _arg(args, kwargs, 6, "mask")
    causal = bool(_arg(args, kwargs, 7, "causal", False))
    bq, bk = int(_arg(args, kwargs, 8, "block_q", 64)), int(_arg(args, kwargs, 9, "block_k", 64))
    if q.ndim != 2 or k.ndim != 2 or bq < 1 or bk < 1:
        raise ValueError("not the statement's shapes")
    T, S = q.shape[0], k.shape[0]
    allowed = None if mask is None else np.ascontiguousarray(np.broadcast_to(np.asarray(mask, dtype=bool), (T, S)))
    extra = {"out": out, "lse": lse, "dout": dout, "causal": causal, "block_q": bq, "block_k": bk, "parts": "block pairs"}
    ctx = Context(q, k, {}, 1, 1, allowed, given=(q, k, v), table=FLASH_BACKWARD, extra=extra)
    if not _pairs(ctx):
        raise ValueError("no block pair is read")
    return ctx


def _probe_flash_backward(rng: Any) -> tuple[tuple, dict]:
    # 6 queries, 7 keys, blocks of 2 and 3 (the last key block partial; no 1×1 pair: a one-entry
    # value is recorded as a number, the stages' one-entry views as vectors), a mask
    T, S, d, dv = 6, 7, 4, 3
    q, k, v, dout = (rng.normal(size=s).round(6) for s in ((T, d), (S, d), (S, dv), (T, dv)))
    q = q * 2.0
    allowed = rng.random((T, S)) < 0.7
    allowed[:, 0] = True
    s = np.where(allowed, q @ k.T / np.sqrt(d), -np.inf)
    top = s.max(axis=1, keepdims=True)
    e = np.exp(s - top)
    lse = (top[:, 0] + np.log(e.sum(axis=1))).round(12)
    out = (e / e.sum(axis=1, keepdims=True)) @ v
    return (q, k, v, out, lse, dout, allowed), {"block_q": 2, "block_k": 3}


# exercise id -> (the traced function, how its arguments bind, its probe call)
OWN: dict[str, tuple[str, Callable[[tuple, dict], Context], Callable[[Any], tuple[tuple, dict]]]] = {
    "tiled-softmax": ("tiled_attention", _bind_tiled, _probe_tiled),
    "attention-backward": ("attention_backward", _bind_backward, _probe_backward),
    "paged-attention": ("paged_attention", _bind_paged, _probe_paged),
    "mla-decode": ("mla_decode_step", _bind_mla, _probe_mla),
    "varlen-prefill": ("varlen_prefill", _bind_varlen, _probe_varlen),
    "flash-backward": ("flash_backward", _bind_flash_backward, _probe_flash_backward),
}
