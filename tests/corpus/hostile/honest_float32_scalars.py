# attn-kit: mha-screen
"""Correct; stable_softmax returns a list of NumPy float64 scalars and masks as lists of numpy bools."""
from honest_numpy import *
import honest_numpy


def stable_softmax(scores, allowed=None):
    return [np.float64(v) for v in honest_numpy.stable_softmax(scores, allowed)]


def causal_mask(B, T):
    return [[[np.bool_(v) for v in row] for row in m] for m in honest_numpy.causal_mask(B, T)]
