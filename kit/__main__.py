"""`python -m attn_kit`: the same program as the `attn-kit` command.

Under `-m` the current folder is first on sys.path: a `click.py` (or `numpy.py`) planted there
by the code being graded would run inside the kit at the next start. It is taken off before the
kit imports anything else."""

import os
import sys

try:
    _HERE = os.getcwd()
except OSError:             # a deleted current folder
    _HERE = ""
if sys.path and not sys.flags.safe_path and sys.path[0] in ("", ".", _HERE):
    del sys.path[0]

from .cli import main  # noqa: E402 - after the current folder is off sys.path

main()
