# attn-kit: rope
"""Reference solution for rope, vectorised with NumPy: rotary position embeddings applied to each
head's queries and keys, inside mha-screen's multi-head attention.

"Rotate half" convention: within one head of width hd, column i is paired with column i + hd/2
(i < hd/2), and the pair is rotated by the angle p·θ_i, θ_i = base^(-2i/hd), where p is the
token's position. Values are not rotated. Conventions as in mha-screen: True = allowed, head h
owns the projected columns h*hd:(h+1)*hd, a projection is x @ W + b.
"""
import numpy as np


def _angles(positions, hd, base):
    """T×(hd/2) angles p·θ_i for the given positions."""
    # lists: theta = [base ** (-2 * i / hd) for i in range(hd // 2)]
    theta = base ** (-2.0 * np.arange(hd // 2, dtype=np.float64) / hd)   # float32 in the kit's float32 twin
    # lists: angle[t][i] = positions[t] * theta[i]
    return np.asarray(positions, dtype=np.float64).reshape(-1, 1) * theta


def apply_rope(x, positions, base=10000.0):
    x = np.asarray(x, dtype=np.float64)
    hd = x.shape[-1]
    if hd % 2:
        raise ValueError(f"rotary embeddings rotate pairs of features: the head width must be even, got {hd}")
    half = hd // 2
    a = _angles(positions, hd, base)                  # T×half, broadcast over B and H
    cos, sin = np.cos(a), np.sin(a)
    first, second = x[..., :half], x[..., half:]      # column i pairs with column i + half
    out = np.empty_like(x)                            # a new array: x is never written
    out[..., :half] = first * cos - second * sin
    out[..., half:] = second * cos + first * sin
    return out


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


def _project(x, params, w, b):
    y = x @ np.asarray(params[w], dtype=np.float64).T   # BUG(weights-transposed): x @ Wᵀ instead of x @ W
    if params.get(b) is not None:
        y = y + np.asarray(params[b], dtype=np.float64)
    return y


def rope_attention(x, params, num_heads, positions=None, mask=None, return_weights=False):
    x = np.asarray(x, dtype=np.float64)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads != 0:
        raise ValueError(f"model width {D} is not divisible by num_heads={num_heads}")
    hd = D // num_heads
    if hd % 2:
        raise ValueError(f"rotary embeddings need an even head width; D // num_heads = {hd} is odd")
    if positions is None:
        positions = np.arange(T)                      # shared by every batch row

    def split_heads(y):
        # B×T×D -> B×T×H×hd -> B×H×T×hd (head h = columns h*hd:(h+1)*hd)
        return y.reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)

    q = apply_rope(split_heads(_project(x, params, "Wq", "bq")), positions)
    k = apply_rope(split_heads(_project(x, params, "Wk", "bk")), positions)
    v = split_heads(_project(x, params, "Wv", "bv"))  # values carry content, not position
    scores = q @ k.transpose(0, 1, 3, 2) / float(np.sqrt(hd))    # a Python float keeps float32 data float32
    allowed = None if mask is None else np.asarray(mask, dtype=bool)[:, None, :, :]
    weights = _masked_softmax(scores, allowed)        # B×H×T×T
    concat = (weights @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    out = _project(concat, params, "Wo", "bo")
    return (out, weights) if return_weights else out
