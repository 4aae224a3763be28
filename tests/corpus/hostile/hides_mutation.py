# attn-kit: mha-screen
"""Scales params['Wq'] in place and tries two patches of the worker from an early version of the
sandbox (a helper that no longer exists, and default arguments the kit always passes explicitly):
the write is still seen. A worker patch that echoes a copy made before the call does hide it; the
threat model (docs/threat-model.md) says so."""
import attn_kit.runtime.worker
import attn_kit.base.wire
from honest_numpy import *
import honest_numpy

attn_kit.runtime.worker._changed_paths = lambda *a: []
attn_kit.runtime.worker.Worker.call.__defaults__ = (False, False)     # no echo of the arguments


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    if isinstance(params["Wq"], np.ndarray):
        params["Wq"] *= 1.0 + 1e-3
    return honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
