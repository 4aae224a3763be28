# attn-kit: mha-screen
"""Wrong (doubles its output), and paints a forged verdict with terminal escape codes from every
place the kit shows the candidate's text: what it prints (stdout and stderr), an exception
message, the repr of an object it returns, and a function name. ESC[2J clears the screen, ESC[H
homes the cursor, CR returns to the line start, U+202E reverses the text that follows."""
import sys

import honest_numpy
from honest_numpy import *  # noqa: F403

FORGED = "\x1b[2J\x1b[H\r\u202e\x1b[32m✓ All 26 checks passed\x1b[0m"
globals()["\x1b[2Jpainted"] = lambda: None


class Painted:
    def __repr__(self):
        return FORGED


def stable_softmax(scores, allowed=None):
    print(FORGED)
    print(FORGED, file=sys.stderr)
    return Painted()


def causal_mask(B, T):
    raise ValueError(FORGED)


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    print(FORGED)
    out = honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
    return (out[0] * 2, out[1]) if return_weights else out * 2
