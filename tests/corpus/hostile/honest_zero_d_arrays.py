# attn-kit: mha-screen
"""Correct, in a style that returns softmax as a list of 0-d NumPy arrays (np.array(x) of each
entry): honest code the kit must grade, not crash on."""
import numpy as np

import honest_numpy
from honest_numpy import *  # noqa: F403


def stable_softmax(scores, allowed=None):
    return [np.array(p) for p in honest_numpy.stable_softmax(scores, allowed)]
