# attn-kit: mha-screen
"""Fails one check (so --repro writes a script), and first plants, in the --repro folder, a symlink
at the name of that script pointing at a file standing in for the kit's installed reference: a
kit that writes through it would put a script of the candidate's making into its own oracle."""
import os

from honest_numpy import *  # noqa: F403
import honest_numpy
from hostile_util import mark

folder = os.path.join(os.getcwd(), "repro")
target = os.path.join(os.getcwd(), "oracle.py")
try:
    os.makedirs(folder, exist_ok=True)
    os.chmod(folder, 0o777)
    for check in ("output_shapes", "public_attention_example", "randomised_agreement"):
        os.symlink(target, os.path.join(folder, f"repro_{check}.py"))
    mark("planted")
except OSError as exc:
    mark("not-planted", str(exc))


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    out = honest_numpy.multi_head_attention(x, params, num_heads, mask, return_weights)
    return (out[0] * 2, out[1]) if return_weights else out * 2
