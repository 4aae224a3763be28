# attn-kit: mha-masked-bias
"""A correct NumPy solution that computes in float32 and hands back float64 arrays."""
import numpy as np

F = np.float32


def multihead_attention(activations, parameters, masks, heads=1, causal=False, causal_offset=0):
    a = lambda v: np.asarray(v, dtype=F)
    q_in, c_in = a(activations["query"]), a(activations["context"])
    P = {k: (None if v is None else a(v)) for k, v in parameters.items()}
    masks = masks or {}
    B, Q, _ = q_in.shape
    K = c_in.shape[1]
    H = heads
    if H < 1 or P["w_q"].shape[1] % H or P["w_v"].shape[1] % H:
        raise ValueError("heads must divide the projected widths")
    D, Dv = P["w_q"].shape[1] // H, P["w_v"].shape[1] // H

    def lin(x, w, b):
        y = np.einsum("btc,cd->btd", x, P[w])
        return y + P[b] if P.get(b) is not None else y

    q = lin(q_in, "w_q", "b_q").reshape(B, Q, H, D)
    k = lin(c_in, "w_k", "b_k").reshape(B, K, H, D)
    v = lin(c_in, "w_v", "b_v").reshape(B, K, H, Dv)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / F(np.sqrt(D))
    if activations.get("bias") is not None:
        s = s + a(activations["bias"])
    ok = np.ones((B, H, Q, K), bool)
    if masks.get("key_mask") is not None:
        ok &= np.asarray(masks["key_mask"], bool)[:, None, None, :]
    if masks.get("query_mask") is not None:
        ok &= np.asarray(masks["query_mask"], bool)[:, None, :, None]
    if masks.get("attention_mask") is not None:
        ok &= np.asarray(masks["attention_mask"], bool)
    if causal:
        ok &= np.arange(K)[None, :] <= np.arange(Q)[:, None] + causal_offset
    top = np.where(ok, s, -np.inf).max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, F(0))
    e = np.where(ok, np.exp(np.where(ok, s - top, F(0))), F(0))
    tot = e.sum(axis=-1, keepdims=True)
    att = e / np.where(tot > 0, tot, F(1))
    o = lin(np.einsum("bhqk,bkhd->bqhd", att, v).reshape(B, Q, H * Dv), "w_o", "b_o")
    o = np.where(ok.any(-1).any(1)[:, :, None], o, F(0))
    return o.astype(np.float64), att.astype(np.float64)
