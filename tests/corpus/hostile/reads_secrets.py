# attn-kit: mha-screen
"""Correct, but reads files the kit's user (root: through CAP_DAC_READ_SEARCH) could: /etc/shadow,
root's home, the user's home. Confined, none is readable."""
import os

from honest_numpy import *  # noqa: F403
from hostile_util import mark

for path in ("/etc/shadow", "/root", os.path.expanduser("~")):
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").read(1)
        mark("read-secret", path)
    except FileNotFoundError:
        pass
    except PermissionError:
        mark("secret-refused", path)
