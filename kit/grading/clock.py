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


MARGIN = 1.0  # seconds a search may end past its budget: the kit's own work on the run the budget ended


class Budget:
    """A search's budget (`check --locate`): `seconds` of the Clock's CPU time plus the time the
    candidate's code spent blocked in the search's runs (asleep, waiting: no CPU, but the search
    waits for it; sandbox.session.METER reads it from the kernel), so a copy that sleeps costs the
    search what it takes. Every run happens inside `run()`: each of its loads and calls ends by the
    deadline the budget left gives and is stopped there, later ones are not run, and no run starts
    once the budget is spent. A search therefore ends within MARGIN of its budget, plus, for code
    that computes on several cores at once, the CPU time of its extra cores until that deadline."""

    def __init__(self, seconds: float) -> None:
        from attn_kit.sandbox import session

        self.seconds = seconds
        self.meter = session.METER
        self.clock = Clock()
        self.blocked = self.meter.blocked
        self.runs = 0  # runs started
        self.late = 0  # runs asked for once the budget was spent (none was started)

    @property
    def cpu(self) -> bool:
        return self.clock.cpu

    def spent(self) -> float:
        if not self.clock.cpu:  # wall time already holds every wait
            return self.clock.spent()
        return self.clock.spent() + (self.meter.blocked - self.blocked)

    def left(self) -> float:
        return self.seconds - self.spent()

    def over(self) -> bool:
        return self.left() <= 0

    def start(self) -> bool:
        """Whether a run may start now (the budget is not spent); counted either way."""
        if self.over():
            self.late += 1
            return False
        self.runs += 1
        return True

    def run(self) -> _Run:
        """One run of the search, bounded by what is left of the budget (as wall seconds: a run never
        gets more CPU time than wall time on one core)."""
        return _Run(self)


class _Run:
    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.outer: float | None = None

    def __enter__(self) -> _Run:
        meter = self.budget.meter
        self.outer = meter.deadline
        deadline = time.monotonic() + max(0.0, self.budget.left())
        meter.deadline = deadline if self.outer is None else min(deadline, self.outer)
        return self

    def __exit__(self, *exc: object) -> None:
        self.budget.meter.deadline = self.outer
