# attn-kit: mha-screen
"""Two or three classic mistakes at once: heads-interleaved, no-scaling."""
import numpy as np


def stable_softmax(scores, allowed=None):
    s = np.asarray(scores, dtype=np.float64).copy()
    if allowed is not None:
        s[~np.asarray(allowed, dtype=bool)] = -np.inf
    if np.all(np.isneginf(s)):
        return np.zeros(len(s))
    e = np.exp(s - np.max(s))
    return e / np.sum(e)


def causal_mask(B, T):
    m = np.zeros((B, T, T), dtype=bool)
    for i in range(T):
        m[:, i, : i + 1] = True
    return m


def padding_mask(lengths, T):
    m = np.zeros((len(lengths), T, T), dtype=bool)
    for b, n in enumerate(lengths):
        m[b, :, : int(n)] = True
    return m


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.array(x, dtype=np.float64)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError(f"D={D} not divisible by num_heads={num_heads}")
    hd = D // num_heads
    P = {k: (None if v is None else np.asarray(v, dtype=np.float64)) for k, v in params.items()}

    def lin(a, w, b):
        return a @ P[w] + (P[b] if P.get(b) is not None else 0.0)

    Q, K, V = lin(x, "Wq", "bq"), lin(x, "Wk", "bk"), lin(x, "Wv", "bv")
    weights = np.zeros((B, num_heads, T, T))
    heads = []
    for h in range(num_heads):
        sl = slice(h, None, num_heads)
        for b in range(B):
            scores = Q[b, :, sl] @ K[b, :, sl].T
            for i in range(T):
                allowed = None if mask is None else np.asarray(mask, dtype=bool)[b, i]
                weights[b, h, i] = stable_softmax(scores[i], allowed)
        heads.append(weights[:, h] @ V[:, :, sl])
    concat = np.stack(heads, axis=-1).reshape(B, T, D)
    out = lin(concat, "Wo", "bo")
    return (out, weights) if return_weights else out
