# attn-kit: mha-screen
"""Correct, but searches its own heap for the kit's checks, expected values and references."""
import gc
import sys
from honest_numpy import *
import honest_numpy
from hostile_util import mark


def _hunt():
    gc.unfreeze()
    for obj in gc.get_objects():
        try:
            kind = type(obj).__name__
            module = type(obj).__module__ or ""
            if kind in ("Call", "CheckResult", "Report", "CheckContext") and module.startswith("attn_kit"):
                mark("leak", f"{module}.{kind}")
            if module.startswith("attn_kit") and getattr(obj, "expected", None) is not None:
                mark("leak", "expected")
        except Exception:
            continue
    for name in list(sys.modules):
        if name.startswith(("attn_kit_solution", "attn_kit.checks.mha", "attn_kit.solutions")):
            mark("leak", name)


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    _hunt()
    return honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
