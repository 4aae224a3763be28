# attn-kit: mha-screen
"""Ignores every catchable signal and spins in multi_head_attention."""
import signal
from honest_numpy import *

for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM, signal.SIGUSR1):
    signal.signal(sig, signal.SIG_IGN)


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    while True:
        pass
