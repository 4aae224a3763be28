"""CPU time spent by the kit and every process below it: the budget of `check --locate`.

A loaded machine lengthens the wall time of a search but not the CPU time it takes, so a budget
counted in CPU seconds gives the same answer on a quiet machine and a busy one. The kit's own
CPU time (all its threads) is added to that of every live process below it, each counted with the
CPU time of the children it has already reaped (the sandbox's zygote reaps its workers), and to
that of the kit's reaped children. Where /proc is missing (not Linux) it is the wall time.
"""

from __future__ import annotations

import os
import time

from attn_kit.sandbox import proctree

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _below() -> float:
    """CPU seconds of the live processes below the kit, their reaped children included."""
    total = 0
    for pid in proctree.descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile: its time is in its parent's reaped children
        total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / _TICKS


class Clock:
    """Seconds spent since it was made: CPU (Linux), else wall."""

    def __init__(self) -> None:
        self.cpu = os.path.isdir("/proc/self")
        self.start = self._now()

    def _now(self) -> float:
        if not self.cpu:
            return time.perf_counter()
        own = os.times()
        return time.process_time() + own.children_user + own.children_system + _below()

    def spent(self) -> float:
        return self._now() - self.start
