"""A check's sandbox started before the check's own modules load.

`attn-kit check` spends its first tenth of a second importing the catalogue, the checks, the oracle
and the diagnosis; its zygote (sandbox/zygote.py) spends about as long setting up its namespaces,
its Landlock rules and the first worker. `start` forks that zygote first, so both happen at once on
two cores, and `pipeline.grade` finds the zygote ready (the shared launcher it asks for). It imports
only the sandbox: nothing of an exercise, a check or a solution is loaded yet, so the fork holds no
expected value.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from attn_kit.sandbox import zygote

MOST_BYTES = 1 << 20  # preflight.MAX_SOURCE_BYTES: a larger file is refused before anything runs


def start(path: str | Path) -> bool:
    """Start the zygote `pipeline.grade` will ask for when `path` is a NumPy solution (a shared
    launcher with NumPy alone); whether one was started. A file that names torch anywhere is left
    to grade, which preloads torch in its zygote when the file imports it; a file that is not
    a readable regular file of at most 1 MiB is left to its error message."""
    if not zygote.FORKS:
        return False
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MOST_BYTES:
            return False  # never opened: a FIFO would block, a device could be endless
        with open(path, "rb") as fh:
            text = fh.read(MOST_BYTES + 1)
    except OSError:
        return False
    if b"torch" in text or len(text) > MOST_BYTES:
        return False
    try:
        zygote.shared_launcher()
    except OSError:  # no fork now (a process limit): grade tries again and says why
        return False
    return True
