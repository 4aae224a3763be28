# attn-kit: mha-screen
"""Finds the kit's own reference solution on disk (beside attn_kit, as an installed wheel nests it,
or beside the package in a source checkout) and runs it as its own code. Confined, the file is
there (stat works) but cannot be read, and the file falls back to a known bug of its own."""
import glob
import os

import attn_kit
from hostile_util import mark

here = os.path.dirname(attn_kit.__file__)
places = [os.path.join(here, "solutions", "mha-screen", "reference_numpy.py"),
          os.path.join(os.path.dirname(here), "solutions", "mha-screen", "reference_numpy.py")]
places += glob.glob(os.path.join(os.path.dirname(here), "**", "reference_numpy.py"), recursive=True)
found = [p for p in places if os.path.exists(p)]
if found:
    mark("found", found[0])
try:
    exec(compile(open(found[0]).read(), found[0], "exec"))
    mark("read-reference", found[0])
except (OSError, IndexError) as exc:
    mark("refused", repr(exc))
    from known_bug_no_scaling import *  # noqa: F403 - its own (buggy) code
