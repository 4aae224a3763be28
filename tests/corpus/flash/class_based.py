# attn-kit: flash-backward
"""Written from the statement alone: a class holding the configuration, the module functions
delegating to it; the forward keeps (m, l, acc) per query block in a small state object."""

import numpy as np


class _RowState:
    def __init__(self, n, dv):
        self.m = np.full(n, -np.inf)
        self.l = np.zeros(n)
        self.acc = np.zeros((n, dv))

    def absorb(self, s, vj):
        m_new = np.maximum(self.m, s.max(axis=1))
        ref = np.where(np.isneginf(m_new), 0.0, m_new)
        corr = np.exp(self.m - ref)
        e = np.exp(s - ref[:, None])
        self.l = corr * self.l + e.sum(axis=1)
        self.acc = corr[:, None] * self.acc + e @ vj
        self.m = m_new


class FlashAttention:
    def __init__(self, mask=None, causal=False, block_q=64, block_k=64):
        if int(block_q) < 1 or int(block_k) < 1:
            raise ValueError("block_q and block_k must be positive")
        self.mask, self.causal = mask, causal
        self.bq, self.bk = int(block_q), int(block_k)

    def _needed(self, i_end, j_start, T, S):
        return not self.causal or j_start <= i_end - 1 + (S - T)

    def _logits(self, qb, kb, i0, j0, T, S):
        z = (qb @ kb.T) / np.sqrt(qb.shape[1])
        keep = np.ones(z.shape, dtype=bool)
        if self.mask is not None:
            keep &= self.mask[i0 : i0 + z.shape[0], j0 : j0 + z.shape[1]]
        if self.causal:
            ii = np.arange(i0, i0 + z.shape[0])[:, None]
            jj = np.arange(j0, j0 + z.shape[1])[None, :]
            keep &= jj - ii <= S - T
        return np.where(keep, z, -np.inf)

    def forward(self, q, k, v):
        T, S, dv = q.shape[0], k.shape[0], v.shape[1]
        out = np.zeros((T, dv))
        lse = np.full(T, -np.inf)
        for i0 in range(0, T, self.bq):
            i1 = min(T, i0 + self.bq)
            qb = q[i0:i1]
            st = _RowState(i1 - i0, dv)
            for j0 in range(0, S, self.bk):
                if not self._needed(i1, j0, T, S):
                    break
                j1 = min(S, j0 + self.bk)
                st.absorb(self._logits(qb, k[j0:j1], i0, j0, T, S), v[j0:j1])
            nz = st.l > 0
            out[i0:i1][nz] = st.acc[nz] / st.l[nz, None]
            lse[i0:i1][nz] = st.m[nz] + np.log(st.l[nz])
        return out, lse

    def backward(self, q, k, v, out, lse, d_out):
        T, S = q.shape[0], k.shape[0]
        lse = np.asarray(lse, dtype=float)
        delta = (np.asarray(d_out) * np.asarray(out)).sum(axis=1)
        ref = np.where(np.isneginf(lse), 0.0, lse)
        grads_q = np.zeros_like(q, dtype=float)
        grads_k = np.zeros_like(k, dtype=float)
        grads_v = np.zeros_like(v, dtype=float)
        for j0 in range(0, S, self.bk):
            j1 = min(S, j0 + self.bk)
            kb, vb = k[j0:j1], v[j0:j1]
            for i0 in range(0, T, self.bq):
                i1 = min(T, i0 + self.bq)
                if not self._needed(i1, j0, T, S):
                    continue
                qb, gb = q[i0:i1], np.asarray(d_out)[i0:i1]
                prob = np.exp(self._logits(qb, kb, i0, j0, T, S) - ref[i0:i1, None])
                grads_v[j0:j1] += prob.T @ gb
                g_logits = prob * (gb @ vb.T - delta[i0:i1, None]) / np.sqrt(q.shape[1])
                grads_q[i0:i1] += g_logits @ kb
                grads_k[j0:j1] += g_logits.T @ qb
        return grads_q, grads_k, grads_v


def flash_forward(q, k, v, mask=None, causal=False, block_q=64, block_k=64):
    return FlashAttention(mask, causal, block_q, block_k).forward(q, k, v)


def flash_backward(q, k, v, out, lse, d_out, mask=None, causal=False, block_q=64, block_k=64):
    return FlashAttention(mask, causal, block_q, block_k).backward(q, k, v, out, lse, d_out)
