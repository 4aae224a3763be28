"""Probes for cross-attention: mha-screen's layer probes, with the tokens as their own context
(self-attention is cross-attention with context = x; every probe's question is about the layer)."""

from __future__ import annotations

from .cases import lists
from .probes_mha_screen import layer_probes


def cross_call(asker, x, p, H, mask, weights=True):
    """cross_attention(x, context=x, params, H, mask=..., return_weights=True), inputs as lists."""
    return asker.call("cross_attention", lists(x), lists(x), lists(p), H, mask=lists(mask), return_weights=weights)


PROBES = layer_probes(cross_call)
