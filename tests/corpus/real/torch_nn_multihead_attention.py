# attn-kit: mha-masked-bias
# Real public code, called rather than copied: torch.nn.MultiheadAttention (and the
# F.multi_head_attention_forward it runs), as installed (torch 2.13.0+cpu). The adapter after the import
# maps layouts only.
# Source: https://github.com/pytorch/pytorch
#   path torch/nn/modules/activation.py (class MultiheadAttention), torch/nn/functional.py
# Licence: BSD-3-Clause (PyTorch's licence). Its copyright lines are in PyTorch's LICENSE, which
#   ships with every torch installation.
# ---- the original: a library layer ----
import torch
from torch.nn import MultiheadAttention
# ---- end of the original ----


# ---- adapter (attn-kit): layouts only ----
def _blocked(masks, B, H, Q, K):
    """torch's masks mean the opposite of the exercise's (True = not allowed): key_padding_mask [B, K],
    attn_mask [B*H, Q, K]. The exercise's query_mask and attention_mask go into attn_mask."""
    masks = masks or {}
    key_padding_mask = None if masks.get("key_mask") is None else ~torch.as_tensor(masks["key_mask"], dtype=torch.bool)
    allowed = torch.ones((B, H, Q, K), dtype=torch.bool)
    if masks.get("query_mask") is not None:
        allowed = allowed & torch.as_tensor(masks["query_mask"], dtype=torch.bool)[:, None, :, None]
    if masks.get("attention_mask") is not None:
        allowed = allowed & torch.as_tensor(masks["attention_mask"], dtype=torch.bool)
    return key_padding_mask, ~allowed.reshape(B * H, Q, K)


def multihead_attention(activations, parameters, masks, heads=1, causal=False, causal_offset=0):
    query = torch.as_tensor(activations["query"])
    context = torch.as_tensor(activations["context"])
    B, Q, Cq = query.shape
    K, Cctx = context.shape[1], context.shape[2]
    layer = MultiheadAttention(Cq, heads, bias=True, kdim=Cctx, vdim=Cctx, batch_first=True).to(query.dtype).eval()
    # nn.Linear's weight[out][in] is the kit's W[d_in][d_out] transposed; an absent bias is 0.
    # functional_call keeps the kit's tensors in the graph, so their gradients are the layer's.
    T = lambda name: torch.as_tensor(parameters[name]).T  # noqa: E731
    bias = lambda name, n: torch.as_tensor(parameters[name]) if parameters.get(name) is not None else torch.zeros(n, dtype=query.dtype)  # noqa: E731
    widths = [parameters[w].shape[1] for w in ("w_q", "w_k", "w_v")]
    weights = {"in_proj_bias": torch.cat([bias(b, n) for b, n in zip(("b_q", "b_k", "b_v"), widths)])}
    if layer._qkv_same_embed_dim:  # one packed [Wq; Wk; Wv] when the context has the query's width
        weights["in_proj_weight"] = torch.cat([T("w_q"), T("w_k"), T("w_v")])
    else:
        weights.update(q_proj_weight=T("w_q"), k_proj_weight=T("w_k"), v_proj_weight=T("w_v"))
    weights["out_proj.weight"] = T("w_o")
    weights["out_proj.bias"] = bias("b_o", parameters["w_o"].shape[1])
    key_padding_mask, attn_mask = _blocked(masks, B, heads, Q, K)
    additive = activations.get("bias")
    if additive is not None:  # attn_mask may also be a float mask added to the scaled scores
        attn_mask = torch.as_tensor(additive).expand(B, heads, Q, K).reshape(B * heads, Q, K).masked_fill(attn_mask, float("-inf"))
    # the layer has no causal flag of its own (is_causal is only a hint about attn_mask)
    out, attention = torch.func.functional_call(
        layer,
        weights,
        (query, context, context),
        {"key_padding_mask": key_padding_mask, "attn_mask": attn_mask, "need_weights": True, "average_attn_weights": False},
    )
    return out, attention
