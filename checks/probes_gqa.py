"""Probes for gqa: mha-screen's layer probes, with as many key/value heads as query heads (grouped
attention with one query head a group is multi-head attention; every probe's question is about
what each head does, not about the grouping)."""

from __future__ import annotations

from .cases import lists
from .probes_mha_screen import layer_probes


def gqa_call(asker, x, p, H, mask, weights=True):
    """grouped_query_attention(x, params, H, num_kv_heads=H, mask=..., return_weights=weights)."""
    return asker.call("grouped_query_attention", lists(x), lists(p), H, H, mask=lists(mask), return_weights=weights)


PROBES = layer_probes(gqa_call)
