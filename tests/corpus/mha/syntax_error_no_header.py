import math

def multi_head_attention(x, params, num_heads, mask=None, return_weights=False)
    return x
