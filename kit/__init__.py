"""attn-kit: practice kit for the attention coding screen.

Under `python -m attn_kit.MODULE` (as under `python -m attn_kit`) the current folder is first on
sys.path, and this package is imported before the module: a `numpy.py` or `click.py` the graded
code planted there would run inside the kit. While `-m` is still locating its module
(sys.argv[0] is "-m" then), that entry is taken off, before anything else is imported.
"""

import sys as _sys

if _sys.argv[:1] == ["-m"] and _sys.path and not _sys.flags.safe_path:
    import os as _os

    try:
        _here = _os.getcwd()
    except OSError:  # a deleted current folder
        _here = ""
    if _sys.path[0] in ("", ".", _here):
        del _sys.path[0]
    del _os, _here
del _sys

__version__ = "0.1.0"
