# attn-kit: attention-backward
"""Reference solution for attention-backward: the gradients of softmax attention, by hand.

Forward: Z = q kᵀ · scale (the scores; scale = 1/sqrt(d)), P = softmax of Z over the allowed keys (a row with
none allowed is all zeros), out = P v. For a scalar loss L = sum(out * dout):

    dv = Pᵀ dout                                   (S×dv: key j collects from every query)
    dP = dout vᵀ                                   (T×S)
    dZ = P ⊙ (dP − rowsum(P ⊙ dP))                 (the softmax Jacobian, row by row)
    dq = dZ k · scale        dk = dZᵀ q · scale    (the chain rule through Z = scale · q kᵀ)

Blocked entries have P = 0, so dZ is 0 there and they pass no gradient; an all-blocked row has
P = 0 everywhere and gives nothing at all. Nothing here is ever divided by zero or exponentiated
above exp(0), so scores of ±1000 stay finite.
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
    scale = 1.0                                       # BUG(no-scaling): scores not divided by sqrt(d)
    gscale = scale                                    # ∂Z/∂q = scale·k and ∂Z/∂k = scale·q
    allowed = None if mask is None else np.asarray(mask, dtype=bool)[:, None]   # B×1×T×S, every head
    P = _masked_softmax(q @ np.swapaxes(k, -1, -2) * scale, allowed)            # B×H×T×S
    dv = np.swapaxes(P, -1, -2) @ dout                # B×H×S×dv
    dP = dout @ np.swapaxes(v, -1, -2)                # B×H×T×S
    dZ = P * (dP - (P * dP).sum(axis=-1, keepdims=True))
    dq = dZ @ k * gscale                              # B×H×T×d
    dk = np.swapaxes(dZ, -1, -2) @ q * gscale         # B×H×S×d
    return dq, dk, dv
