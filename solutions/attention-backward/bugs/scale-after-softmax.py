# attn-kit: attention-backward
"""Known bug `scale-after-softmax`: the scores go into the softmax unscaled, and 1/sqrt(d) multiplies P afterwards, so P is too sharp, its rows do not sum to 1, and every gradient is off.

The reference solution with exactly one change, marked BUG(scale-after-softmax).
"""
import numpy as np


def _masked_softmax(scores, allowed=None):
    """Softmax over the last axis, restricted to allowed entries; a row with none allowed gives zeros.

    Works in place on `scores`, a fresh floating array the caller owns.
    """
    s = scores
    if allowed is not None:
        np.copyto(s, -np.inf, where=~np.broadcast_to(allowed, s.shape))
    m = s.max(axis=-1, keepdims=True)
    m[np.isneginf(m)] = 0.0                           # an empty row: any finite shift will do
    s -= m
    np.exp(s, out=s)
    total = s.sum(axis=-1, keepdims=True)
    total[total == 0.0] = 1.0                         # an empty row keeps its zeros
    s /= total
    return s


def attention_backward(q, k, v, dout, mask=None):
    q = np.asarray(q, dtype=np.float64)               # B×H×T×d
    k = np.asarray(k, dtype=np.float64)               # B×H×S×d
    v = np.asarray(v, dtype=np.float64)               # B×H×S×dv
    dout = np.asarray(dout, dtype=np.float64)         # B×H×T×dv
    scale = 1.0 / np.sqrt(q.shape[-1])
    gscale = scale                                    # ∂Z/∂q = scale·k and ∂Z/∂k = scale·q
    allowed = None if mask is None else np.asarray(mask, dtype=bool)[:, None]   # B×1×T×S, every head
    P = _masked_softmax(q @ np.swapaxes(k, -1, -2), allowed) * scale  # BUG(scale-after-softmax): scaled after the softmax
    dv = np.swapaxes(P, -1, -2) @ dout                # B×H×S×dv
    dP = dout @ np.swapaxes(v, -1, -2)                # B×H×T×S
    dZ = P * (dP - (P * dP).sum(axis=-1, keepdims=True))
    dq = dZ @ k * gscale                              # B×H×T×d
    dk = np.swapaxes(dZ, -1, -2) @ q * gscale         # B×H×S×d
    return dq, dk, dv
