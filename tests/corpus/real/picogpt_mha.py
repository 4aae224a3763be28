# attn-kit: mha-screen
# Real public code, verbatim between the "verbatim" markers; the adapter after them maps layouts only.
# Source: https://github.com/jaymody/picoGPT
#   path gpt2.py: softmax, linear, attention, mha
#   commit 817292baea75f194fb0bb8ba2aa5f947af4e45ee
# Licence: MIT. Copyright (c) 2023 Jay Mody
#   The licence's full text: tests/corpus/real/LICENSES/jaymody-picoGPT.txt
# ---- verbatim ----
import numpy as np

def softmax(x):
    exp_x = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return exp_x / np.sum(exp_x, axis=-1, keepdims=True)


def linear(x, w, b):  # [m, in], [in, out], [out] -> [m, out]
    return x @ w + b


def attention(q, k, v, mask):  # [n_q, d_k], [n_k, d_k], [n_k, d_v], [n_q, n_k] -> [n_q, d_v]
    return softmax(q @ k.T / np.sqrt(q.shape[-1]) + mask) @ v


def mha(x, c_attn, c_proj, n_head):  # [n_seq, n_embd] -> [n_seq, n_embd]
    # qkv projection
    x = linear(x, **c_attn)  # [n_seq, n_embd] -> [n_seq, 3*n_embd]

    # split into qkv
    qkv = np.split(x, 3, axis=-1)  # [n_seq, 3*n_embd] -> [3, n_seq, n_embd]

    # split into heads
    qkv_heads = list(map(lambda x: np.split(x, n_head, axis=-1), qkv))  # [3, n_seq, n_embd] -> [3, n_head, n_seq, n_embd/n_head]

    # causal mask to hide future inputs from being attended to
    causal_mask = (1 - np.tri(x.shape[0], dtype=x.dtype)) * -1e10  # [n_seq, n_seq]

    # perform attention over each head
    out_heads = [attention(q, k, v, causal_mask) for q, k, v in zip(*qkv_heads)]  # [3, n_head, n_seq, n_embd/n_head] -> [n_head, n_seq, n_embd/n_head]

    # merge heads
    x = np.hstack(out_heads)  # [n_head, n_seq, n_embd/n_head] -> [n_seq, n_embd]

    # out projection
    x = linear(x, **c_proj)  # [n_seq, n_embd] -> [n_seq, n_embd]

    return x
# ---- end verbatim ----


# ---- adapter (attn-kit): layouts only ----
def stable_softmax(scores, allowed=None):
    # picoGPT masks additively: blocked entries get its own -1e10 (see `mha`), then `softmax`
    s = np.asarray(scores, dtype=np.float64)
    if allowed is None:
        return list(softmax(s))
    return list(softmax(s + (1 - np.asarray(allowed, dtype=np.float64)) * -1e10))


def causal_mask(B, T):
    # picoGPT's own causal pattern, np.tri (1 = may attend), as booleans, once per batch row
    return np.broadcast_to(np.tri(T).astype(bool), (B, T, T)).copy()


def padding_mask(lengths, T):  # picoGPT has none: written by attn-kit
    return [[[j < n for j in range(T)] for _ in range(T)] for n in lengths]


def _joined(params, names, width):
    return np.concatenate([np.asarray(params[n], dtype=np.float64) if params.get(n) is not None else np.zeros(width) for n in names], axis=-1)


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    global softmax
    x = np.asarray(x, dtype=np.float64)
    B, T, D = x.shape
    c_attn = {"w": _joined(params, ("Wq", "Wk", "Wv"), D), "b": _joined(params, ("bq", "bk", "bv"), D)}
    c_proj = {"w": np.asarray(params["Wo"], dtype=np.float64), "b": _joined(params, ("bo",), D)}
    seen, plain = [], softmax

    def recorded(z):  # the attention weights are what `attention` hands to `softmax`
        p = plain(z)
        seen.append(p)
        return p

    softmax = recorded
    try:
        # mha takes one sequence [n_seq, n_embd] and no mask: `mask` has nowhere to go
        out = np.stack([mha(row, c_attn, c_proj, num_heads) for row in x])
    finally:
        softmax = plain
    if not return_weights:
        return out
    return out, np.asarray(seen).reshape(B, num_heads, T, T)
