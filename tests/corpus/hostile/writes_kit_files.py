# attn-kit: mha-screen
"""Correct, but tries to add a file to the kit's installed package and to its user data folder."""
import os
import attn_kit
from honest_numpy import *
import honest_numpy
from hostile_util import mark, token

_dir = os.path.dirname(attn_kit.__file__)
for folder in (_dir, os.environ.get("ATTN_KIT_HOME", "")):
    if folder:
        try:
            with open(os.path.join(folder, f"hostile-{token()}.txt"), "w") as fh:
                fh.write("x")
            mark("wrote-kit-file", folder)
        except OSError:
            pass
