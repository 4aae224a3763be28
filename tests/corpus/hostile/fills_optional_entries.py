# attn-kit: mha-screen
"""Correct values, but fills missing optional biases into the caller's params (setdefault)."""
from honest_numpy import *
import honest_numpy


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    D = np.shape(params["Wq"])[0]
    for b in ("bq", "bk", "bv", "bo"):
        params.setdefault(b, [0.0] * D)
    return honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
