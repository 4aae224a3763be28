# attn-kit: mha-screen
"""Correct, and tries to add a file to the venv's root and bin/, the interpreter's bin/ and lib/
and the site-packages the kit is installed in: the rewrite of the kit's own launcher (or a .pth
file) that would make the next run pass anything. Only an empty marker file is written, and the
test removes any it finds."""
import os
import sys
import sysconfig

from honest_numpy import *  # noqa: F403
from hostile_util import mark, token

places = {sys.prefix, os.path.join(sys.prefix, "bin"), os.path.dirname(os.path.realpath(sys.executable)),
          sys.base_prefix, os.path.join(sys.base_prefix, "lib"), sysconfig.get_paths()["purelib"]}
for folder in sorted(places):
    try:
        with open(os.path.join(folder, f"attn-kit-hostile-{token()}"), "w"):
            pass
        mark("wrote-interpreter", folder)
    except OSError:
        pass
