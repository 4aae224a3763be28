# attn-kit: tiled-softmax
"""A correct tiled-softmax solution in float32: the running max, sum and accumulator are float32
and each key block is scored on its own. It must pass: the statement does not ask for float64."""
import numpy as np


def tiled_attention(q, k, v, mask=None, block_size=64):
    if block_size < 1:
        raise ValueError("block_size must be a positive integer")
    q = np.asarray(q, dtype=np.float32)
    k = np.asarray(k, dtype=np.float32)
    v = np.asarray(v, dtype=np.float32)
    T, d = q.shape
    S = k.shape[0]
    scale = np.float32(1.0 / np.sqrt(d))
    run_max = np.full((T, 1), -np.inf, dtype=np.float32)
    run_sum = np.zeros((T, 1), dtype=np.float32)
    acc = np.zeros((T, v.shape[1]), dtype=np.float32)
    for j0 in range(0, S, block_size):
        j1 = min(S, j0 + block_size)
        s = (q @ k[j0:j1].T) * scale
        if mask is not None:
            s = np.where(np.asarray(mask[:, j0:j1] if hasattr(mask, "shape") else
                                    [row[j0:j1] for row in mask], dtype=bool), s, -np.inf)
        new_max = np.maximum(run_max, s.max(axis=1, keepdims=True))
        safe = np.where(np.isneginf(new_max), np.float32(0), new_max)
        p = np.exp(s - safe)
        corr = np.exp(run_max - safe)
        run_sum = run_sum * corr + p.sum(axis=1, keepdims=True)
        acc = acc * corr + p @ v[j0:j1]
        run_max = new_max
    return np.where(run_sum > 0, acc / np.where(run_sum > 0, run_sum, 1), 0).astype(np.float32)
