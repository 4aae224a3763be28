# attn-kit: flash-backward
"""Known bug `causal-alignment-wrong`: the causal diagonal starts at the top-left corner: j <= i, whatever S - T is.

The reference solution with exactly one change, marked BUG(causal-alignment-wrong).
"""
import numpy as np


def _block_sizes(block_q, block_k):
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block_q and block_k must be at least 1, got {block_q} and {block_k}")


def _scale(d):
    return 1.0 / np.sqrt(d)


def _visible(i0, i1, j0, offset):
    """False when key block starting at j0 lies entirely above the causal diagonal of queries i0..i1-1."""
    return j0 <= i1 - 1 + offset


def _scores(qi, kj, scale, mask, causal, i0, j0, offset):
    offset = 0  # BUG(causal-alignment-wrong): j <= i, not j <= i + S - T
    """The block's scaled scores, blocked entries (mask False, or above the diagonal) at -inf."""
    s = qi @ kj.T
    s *= scale
    if mask is not None:
        s[~mask[i0 : i0 + len(qi), j0 : j0 + len(kj)]] = -np.inf
    if causal:
        rows = np.arange(i0, i0 + len(qi))[:, None]
        cols = np.arange(j0, j0 + len(kj))[None, :]
        s[cols > rows + offset] = -np.inf
    return s


def flash_forward(q, k, v, mask=None, causal=False, block_q=64, block_k=64):
    _block_sizes(block_q, block_k)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)           # T×S, True = allowed
    T, d = q.shape
    S, dv = v.shape
    scale = _scale(d)
    offset = S - T                                    # bottom-right causal alignment
    out = np.zeros((T, dv))
    lse = np.full(T, -np.inf)                         # -inf: no allowed key
    for i0 in range(0, T, block_q):
        i1 = min(i0 + block_q, T)
        qi = np.asarray(q[i0:i1], dtype=np.float64)
        m = np.full(i1 - i0, -np.inf)                 # running max of the allowed scores
        l = np.zeros(i1 - i0)                         # running sum of exp(score - m)
        acc = np.zeros((i1 - i0, dv))                 # running sum of exp(score - m) · v
        for j0 in range(0, S, block_k):
            if causal and not _visible(i0, i1, j0, offset):
                break                                 # every later key block is above it too
            j1 = min(j0 + block_k, S)
            kj = np.asarray(k[j0:j1], dtype=np.float64)
            vj = np.asarray(v[j0:j1], dtype=np.float64)
            s = _scores(qi, kj, scale, mask, causal, i0, j0, offset)
            m_new = np.maximum(m, s.max(axis=1))
            shift = np.where(np.isfinite(m_new), m_new, 0.0)
            alpha = np.exp(m - shift)                 # rescales what was summed with the old max
            p = np.exp(s - shift[:, None])
            l = l * alpha + p.sum(axis=1)
            acc = acc * alpha[:, None] + p @ vj
            m = m_new
        seen = l > 0
        out[i0:i1][seen] = acc[seen] / l[seen][:, None]
        lse[i0:i1][seen] = m[seen] + np.log(l[seen])
    return out, lse


def flash_backward(q, k, v, out, lse, d_out, mask=None, causal=False, block_q=64, block_k=64):
    _block_sizes(block_q, block_k)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
    T, d = q.shape
    S, dv = v.shape
    scale = _scale(d)
    offset = S - T
    lse = np.asarray(lse, dtype=np.float64)
    d_out = np.asarray(d_out, dtype=np.float64)
    D = np.sum(d_out * np.asarray(out, dtype=np.float64), axis=1)   # T: rowsum(dout ∘ out)
    shift = np.where(np.isfinite(lse), lse, 0.0)      # an empty row: its scores are all -inf
    dq = np.zeros((T, d))
    dk = np.zeros((S, d))
    dvv = np.zeros((S, dv))
    for j0 in range(0, S, block_k):
        j1 = min(j0 + block_k, S)
        kj = np.asarray(k[j0:j1], dtype=np.float64)
        vj = np.asarray(v[j0:j1], dtype=np.float64)
        for i0 in range(0, T, block_q):
            i1 = min(i0 + block_q, T)
            if causal and not _visible(i0, i1, j0, offset):
                continue                              # above the diagonal: not even read
            qi = np.asarray(q[i0:i1], dtype=np.float64)
            s = _scores(qi, kj, scale, mask, causal, i0, j0, offset)
            p = np.exp(s - shift[i0:i1, None])        # P_ij from the saved logsumexp
            dvv[j0:j1] += p.T @ d_out[i0:i1]
            dp = d_out[i0:i1] @ vj.T
            ds = p * (dp - D[i0:i1, None])
            dq[i0:i1] += ds @ kj * scale
            dk[j0:j1] += ds.T @ qi * scale
    return dq, dk, dvv
