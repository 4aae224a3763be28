# attn-kit: mha-screen
"""Correct, in a style that returns numpy.ma masked arrays with nothing masked (np.ma.masked_array
of the result, or a masked_where whose condition never holds): graded on their data."""
import numpy as np

import honest_numpy
from honest_numpy import *  # noqa: F403


def stable_softmax(scores, allowed=None):
    probs = np.asarray(honest_numpy.stable_softmax(scores, allowed))
    return np.ma.masked_where(probs < 0, probs)


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    got = honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
    if return_weights:
        return np.ma.masked_array(got[0]), np.ma.masked_array(got[1])
    return np.ma.masked_array(got)
