# attn-kit: mha-screen
"""Starts a daemon that clears its parent-death signal and an exec'd sleeper, marks 'ready' and hangs; the test sends the kit SIGKILL."""
import ctypes
import os
import subprocess
import time
from honest_numpy import *
from hostile_util import mark, sleeper_argv


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    subprocess.Popen(sleeper_argv(), start_new_session=True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(1, 0)
            time.sleep(600)
        os._exit(0)
    time.sleep(0.2)
    mark("ready")
    time.sleep(600)
