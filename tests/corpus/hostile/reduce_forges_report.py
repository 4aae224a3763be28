# attn-kit: mha-screen
"""Implements nothing; returns an object whose __reduce__ would rewrite the kit's Report to a pass."""
from hostile_util import mark

PAYLOAD = (
    "import attn_kit.report.results as r\n"
    "r.Report.passed = property(lambda self: True)\n"
    "from hostile_util import mark; mark('forged')\n"
)


class Forge:
    def __reduce__(self):
        return (exec, (PAYLOAD,))


def stable_softmax(scores, allowed=None):
    return Forge()


def causal_mask(B, T):
    return Forge()


def padding_mask(lengths, T):
    return Forge()


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    return (Forge(), Forge()) if return_weights else Forge()
