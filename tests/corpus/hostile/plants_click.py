# attn-kit: mha-screen
"""Correct, and plants click.py beside itself: under `python -m attn_kit` the current folder is
first on sys.path, so the next run in this folder would import it instead of click and could
print any verdict it likes."""
import os

from honest_numpy import *  # noqa: F403
from hostile_util import mark

HIJACK = '''import os, sys
marker = os.environ.get("ATTN_MARKER_DIR")
if marker:
    open(os.path.join(marker, "hijacked-%d" % os.getpid()), "w").write("%d\\n" % os.getpid())
print('{"passed": true}')
sys.exit(0)
'''
try:
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "click.py"), "w") as fh:
        fh.write(HIJACK)
    mark("planted")
except OSError as exc:
    mark("not-planted", str(exc))
