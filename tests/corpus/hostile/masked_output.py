# attn-kit: mha-screen
"""Returns the right numbers as a numpy.ma masked array with one entry of every output masked.
The data under the mask is right, but a masked entry is not a value: every output check fails,
saying the output contains masked entries, instead of grading the masked-out data."""
import numpy as np

import honest_numpy
from honest_numpy import *  # noqa: F403


def _masked(values):
    values = np.asarray(values)
    mask = np.zeros(values.shape, dtype=bool)
    mask.flat[0] = True
    return np.ma.masked_array(values, mask=mask)


def stable_softmax(scores, allowed=None):
    return _masked(honest_numpy.stable_softmax(scores, allowed))


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    got = honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
    if return_weights:
        return _masked(got[0]), _masked(got[1])
    return _masked(got)
