# attn-kit: mha-masked-bias
"""Two or three classic mistakes at once: causal-off-by-one, b-o-not-suppressed."""
import math

import torch


def multihead_attention(activations, parameters, masks, heads=1, causal=False, causal_offset=0):
    q_in = torch.as_tensor(activations["query"])
    c_in = torch.as_tensor(activations["context"])
    P = {k: (None if v is None else torch.as_tensor(v)) for k, v in parameters.items()}
    masks = masks or {}
    B, Q, _ = q_in.shape
    K = c_in.shape[1]
    H = heads
    if H < 1 or P["w_q"].shape[1] % H or P["w_v"].shape[1] % H:
        raise ValueError("heads must divide the projected widths")
    D, Dv = P["w_q"].shape[1] // H, P["w_v"].shape[1] // H
    dev = q_in.device

    def lin(x, w, b):
        y = x @ P[w]
        if P.get(b) is not None:
            y = y + P[b]
        return y

    q = lin(q_in, "w_q", "b_q").view(B, Q, H, D).permute(0, 2, 1, 3)
    k = lin(c_in, "w_k", "b_k").view(B, K, H, D).permute(0, 2, 1, 3)
    v = lin(c_in, "w_v", "b_v").view(B, K, H, Dv).permute(0, 2, 1, 3)
    s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D)
    if activations.get("bias") is not None:
        s = s + torch.as_tensor(activations["bias"])
    ok = torch.ones(B, H, Q, K, dtype=torch.bool, device=dev)
    if masks.get("key_mask") is not None:
        ok = ok & torch.as_tensor(masks["key_mask"], dtype=torch.bool, device=dev)[:, None, None, :]
    if masks.get("query_mask") is not None:
        ok = ok & torch.as_tensor(masks["query_mask"], dtype=torch.bool, device=dev)[:, None, :, None]
    if masks.get("attention_mask") is not None:
        ok = ok & torch.as_tensor(masks["attention_mask"], dtype=torch.bool, device=dev)
    if causal:
        rows = torch.arange(Q, device=dev)[:, None]
        cols = torch.arange(K, device=dev)[None, :]
        ok = ok & (cols < rows + causal_offset)
    top = torch.where(ok, s, torch.full_like(s, -math.inf)).amax(dim=-1, keepdim=True)
    top = torch.where(ok.any(dim=-1, keepdim=True), top, torch.zeros_like(top)).detach()
    e = torch.where(ok, torch.exp(torch.where(ok, s - top, torch.zeros_like(s))), torch.zeros_like(s))
    total = e.sum(dim=-1, keepdim=True)
    att = e / torch.where(total > 0, total, torch.ones_like(total))
    o = (att @ v).permute(0, 2, 1, 3).reshape(B, Q, H * Dv)
    o = lin(o, "w_o", "b_o")
    active = torch.ones(B, Q, dtype=torch.bool, device=dev)
    o = torch.where(active[:, :, None], o, torch.zeros_like(o))
    return o, att
