# attn-kit: varlen-prefill
"""Reference solution for varlen-prefill, vectorised: the documents are gathered into a padded
batch (documents × longest chunk × heads), attended in one batched product with a per-document
bottom-right causal mask, and scattered back to the packed rows.

Memory grows with documents × (longest chunk) × (longest document), never with total × total:
the block-diagonal mask of the whole pack is never built. Conventions as in reference_numpy.py.
"""
import numpy as np


def varlen_prefill(q, k, v, cu_seqlens_q, cu_seqlens_k):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    cu_q = np.asarray(cu_seqlens_q, dtype=np.int64)
    cu_k = np.asarray(cu_seqlens_k, dtype=np.int64)
    H, d = q.shape[1], q.shape[2]
    H_kv, dv = v.shape[1], v.shape[2]
    if H_kv < 1 or H % H_kv:
        raise ValueError(f"num_heads={H} is not divisible by num_kv_heads={H_kv}")
    n_q, n_k = np.diff(cu_q), np.diff(cu_k)
    N, Lq, Lk = len(n_q), int(n_q.max(initial=0)), int(n_k.max(initial=0))
    out = np.zeros((q.shape[0], H, dv))
    if N == 0 or Lq == 0:
        return out
    cached = n_k - n_q
    # padded index grids: document b, slot t -> packed row, and whether the slot is real
    tq, tk = np.arange(Lq), np.arange(Lk)
    q_real = tq[None, :] < n_q[:, None]                          # N×Lq
    k_real = tk[None, :] < n_k[:, None]                          # N×Lk
    q_rows = np.where(q_real, cu_q[:-1, None] + tq[None, :], 0)
    k_rows = np.where(k_real, cu_k[:-1, None] + tk[None, :], 0)
    q_pos = cached[:, None] + tq[None, :]                        # positions restart per document
    k_pos = np.broadcast_to(tk, (N, Lk))

    half = d // 2
    theta = 10000.0 ** (-2.0 * np.arange(half, dtype=np.float64) / d)

    def rotate(x, pos):                                          # x N×L×heads×d, pos N×L
        a = pos[..., None, None].astype(np.float64) * theta      # N×L×1×half
        c, s = np.cos(a), np.sin(a)
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)

    qp = rotate(q[q_rows], q_pos)                                # N×Lq×H×d
    kp = rotate(k[k_rows], k_pos)                                # N×Lk×H_kv×d
    vp = v[k_rows]                                               # N×Lk×H_kv×dv
    group = H // H_kv
    qg = qp.reshape(N, Lq, H_kv, group, d)                       # query head h = g·group + r
    scores = np.einsum("nqgrd,nkgd->ngrqk", qg, kp) / np.sqrt(d)
    allowed = (tk[None, None, :] <= q_pos[:, :, None]) & k_real[:, None, :]   # N×Lq×Lk
    scores = np.where(allowed[:, None, None], scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)                   # padded query slots: no key at all
    w = np.exp(scores - top)
    total = w.sum(axis=-1, keepdims=True)
    w = w / np.where(total > 0, total, 1.0)
    o = np.einsum("ngrqk,nkgv->nqgrv", w, vp).reshape(N, Lq, H, dv)
    out[q_rows[q_real]] = o[q_real]
    return out
