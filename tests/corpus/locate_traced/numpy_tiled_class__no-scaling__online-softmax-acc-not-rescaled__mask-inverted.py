# attn-kit: tiled-softmax
# traced-locate corpus: bases/numpy_tiled_class.py with no-scaling, online-softmax-acc-not-rescaled, mask-inverted
"""Base of the traced-locate corpus: online softmax with its running statistics in a small class."""
import numpy as np


class _Running:
    """The running max, sum and accumulator of the online softmax, one per query."""

    def __init__(self, rows, width):
        self.top = np.full(rows, -np.inf)
        self.total = np.zeros(rows)
        self.acc = np.zeros((rows, width))

    def fold(self, s, values):
        new_top = np.maximum(self.top, s.max(axis=1))
        safe = np.where(np.isfinite(new_top), new_top, 0.0)
        alpha = np.exp(self.top - safe)
        p = np.exp(s - safe[:, None])
        total = alpha * self.total + p.sum(axis=1)
        acc = self.acc + p @ values
        self.top, self.total, self.acc = new_top, total, acc

    def result(self):
        out = np.zeros_like(self.acc)
        ok = self.total > 0
        out[ok] = self.acc[ok] / self.total[ok, None]
        return out


def tiled_attention(q, k, v, mask=None, block_size=64):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    if block_size < 1:
        raise ValueError("block_size must be at least 1")
    T, d = q.shape
    S = k.shape[0]
    allowed = np.ones((T, S), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    inv = d**-0.5
    state = _Running(T, v.shape[1])
    for lo in range(0, S, block_size):
        hi = min(S, lo + block_size)
        s = np.einsum("td,sd->ts", q, k[lo:hi])
        s = np.where(~allowed[:, lo:hi], s, -np.inf)
        state.fold(s, v[lo:hi])
    return state.result()
