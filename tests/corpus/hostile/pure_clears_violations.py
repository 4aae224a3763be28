# attn-kit: mha-screen
"""Graded with --pure: imports NumPy under a computed name, then empties the list where the kit's
import hook recorded it. --pure is advisory: the record is kept in the candidate's own process
(docs/threat-model.md)."""
import importlib
import sys

np = importlib.import_module("".join(["nu", "mpy"]))
_record = next(f for f in sys.meta_path if type(f).__name__ == "_ImportGuard").violations
_record.clear()


def _cleared(fn):
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            _record.clear()                     # whatever NumPy imported during the call
    return run


@_cleared
def stable_softmax(scores, allowed=None):
    s = np.array(scores, dtype=float)
    ok = np.ones(s.shape, bool) if allowed is None else np.array(allowed, dtype=bool)
    if not ok.any():
        return np.zeros_like(s)
    e = np.where(ok, np.exp(np.where(ok, s, -np.inf) - s[ok].max()), 0.0)
    return e / e.sum()


@_cleared
def causal_mask(B, T):
    return np.broadcast_to(np.tril(np.ones((T, T), bool)), (B, T, T)).copy()


@_cleared
def padding_mask(lengths, T):
    keys = np.arange(T)[None, None, :] < np.array(lengths).reshape(-1, 1, 1)
    return np.broadcast_to(keys, (len(lengths), T, T)).copy()


@_cleared
def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.array(x, dtype=float)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    hd = D // num_heads

    def proj(w, b):
        y = x @ np.array(params[w], dtype=float)
        return y + np.array(params[b], dtype=float) if params.get(b) is not None else y

    def heads(y):
        return y.reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)

    q, k, v = heads(proj("Wq", "bq")), heads(proj("Wk", "bk")), heads(proj("Wv", "bv"))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    ok = np.ones((B, 1, T, T), bool) if mask is None else np.array(mask, bool)[:, None]
    s = np.where(ok, s, -np.inf)
    top = s.max(-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    e = np.where(ok, np.exp(s - top), 0.0)
    z = e.sum(-1, keepdims=True)
    w = e / np.where(z == 0, 1.0, z)
    cat = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    out = cat @ np.array(params["Wo"], dtype=float)
    if params.get("bo") is not None:
        out = out + np.array(params["bo"], dtype=float)
    return (out, w) if return_weights else out
