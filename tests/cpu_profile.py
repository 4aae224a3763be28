"""CPU per test, for finding what makes the suite slow: a pytest plugin that conftest.py loads
when ATTN_KIT_TEST_CPU names a folder (off otherwise; it costs a walk of /proc per test).

Each test process writes one line per test to FOLDER/<worker>.jsonl: the module, the test id, the
wall seconds of its setup, call and teardown, and the CPU seconds (user + system) of the test
process itself and of the processes it started (sandbox zygotes and workers, the CLI server and
its commands, fresh `attn-kit` processes). A process started during a test and reaped after it is
counted where it is reaped; a zygote's workers are counted as they end, through the zygote.
Module- and session-scoped fixtures are counted in the setup of the first test that uses them.

    ATTN_KIT_TEST_CPU=/tmp/cpu pytest ...
    python tests/cpu_profile.py /tmp/cpu        # CPU per module, top fixtures' setups, per worker
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _descendants_cpu(root: int) -> float:
    """CPU seconds of the live processes under `root` (not root itself), their reaped children
    included, read from /proc."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        pid = int(name)
        parent[pid] = int(fields[1])
        cpu[pid] = sum(int(f) for f in fields[11:15]) / _TICK  # utime stime cutime cstime
    children: dict[int, list[int]] = defaultdict(list)
    for pid, ppid in parent.items():
        children[ppid].append(pid)
    total, todo = 0.0, list(children[root])
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo.extend(children[pid])
    return total


# A sandboxed worker's CPU never reaches its kit process's getrusage(RUSAGE_CHILDREN) (nor
# /usr/bin/time's figure): it ends inside a PID namespace whose init is torn down around it. Where
# this process may make a cgroup-v1 `cpuacct` group (root), each test process moves itself into one
# of its own, which every process it starts joins: its usage is the true CPU of the test process
# and everything under it. Elsewhere the figures are getrusage's, and say so.
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
_GROUP: list[Path] = []


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _join_group(name: str) -> Path | None:
    group = CPUACCT / "attn-kit-tests" / f"{name}-{os.getpid()}"
    for old in group.parent.glob("*-*") if group.parent.is_dir() else ():
        if old != group and _alive(old.name.rsplit("-", 1)[1]):
            continue  # a live test process's (another worker's, made a moment ago and still empty): not ours to remove
        try:
            old.rmdir()  # an earlier run's group, once empty (a busy one is refused)
        except OSError:
            pass
    try:
        group.mkdir(parents=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return None
    _GROUP.append(group)
    return group


def _leave_group() -> None:
    for group in _GROUP:
        try:
            (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
            group.rmdir()
        except OSError:
            pass  # a process of the group still alive; the folder is left, empty groups cost nothing


def _group_cpu() -> float | None:
    if not _GROUP:
        return None
    return int((_GROUP[0] / "cpuacct.usage").read_text()) / 1e9


def _sample() -> tuple[float, float, float]:
    """(wall, this process's CPU, its children's CPU: reaped and live). With a cgroup, the
    children's figure is the group's usage less this process's own."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    mine = own.ru_utime + own.ru_stime
    group = _group_cpu()
    if group is not None:
        return time.perf_counter(), mine, group - mine
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter(), mine, reaped.ru_utime + reaped.ru_stime + _descendants_cpu(os.getpid())


class CpuProfile:
    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.out = open(folder / f"{worker}.jsonl", "a", encoding="utf-8")  # noqa: SIM115 - closed at unconfigure
        self.worker = worker
        self.phases: dict[str, float] = {}
        self.started = time.perf_counter()
        self.group = _join_group(worker)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.phases = {}
        before = _sample()
        yield
        after = _sample()
        row = {
            "worker": self.worker,
            "pid": os.getpid(),
            "module": item.path.name,
            "test": item.nodeid,
            "slow": item.get_closest_marker("slow") is not None,
            "wall": after[0] - before[0],
            "self": after[1] - before[1],
            "children": after[2] - before[2],
            **{f"{phase}_wall": seconds for phase, seconds in self.phases.items()},
        }
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()

    def _phase(self, name):
        started = time.perf_counter()
        yield
        self.phases[name] = time.perf_counter() - started

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        yield from self._phase("setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        yield from self._phase("call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        yield from self._phase("teardown")

    def pytest_unconfigure(self, config):
        """A last line: the whole process's wall and CPU (collection and start-up included)."""
        own = resource.getrusage(resource.RUSAGE_SELF)
        group = _group_cpu()
        total = group if group is not None else own.ru_utime + own.ru_stime
        row = {
            "worker": self.worker,
            "process": True,
            "wall": time.perf_counter() - self.started,
            "cpu": total,
            "cgroup": group is not None,
        }
        self.out.write(json.dumps(row) + "\n")
        self.out.close()
        _leave_group()


@contextlib.contextmanager
def grading(path: str, seed: int, exercise: str | None, public_only: bool):
    """Around one in-process grading (helpers.graded, a cache miss): with profiling on, a line in
    FOLDER/gradings-<worker>.jsonl, to find the same file graded in several test processes."""
    folder = os.environ.get("ATTN_KIT_TEST_CPU")
    if not (folder and _ON[0]):
        yield
        return
    before = _sample()
    yield
    after = _sample()
    row = {
        "file": os.path.relpath(path),
        "seed": seed,
        "exercise": exercise,
        "public_only": public_only,
        "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0],
        "cpu": after[1] - before[1] + after[2] - before[2],
    }
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(Path(folder) / f"gradings-{worker}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")


_ON = [False]  # this process is profiled (grading() writes only then)


def register(config) -> None:
    """Called from conftest.py's pytest_configure. The session started with ATTN_KIT_TEST_CPU and
    its xdist workers are profiled; a pytest run that one of its tests starts (a scratch kit's
    suite, test-tests) is not: its CPU is already its test's."""
    folder = os.environ.get("ATTN_KIT_TEST_CPU")
    if not folder:
        return
    root = os.environ.get("ATTN_KIT_TEST_CPU_ROOT")
    if root is None:
        os.environ["ATTN_KIT_TEST_CPU_ROOT"] = str(os.getpid())
    elif not (os.environ.get("PYTEST_XDIST_WORKER") and str(os.getppid()) == root):
        return
    _ON[0] = True
    config.pluginmanager.register(CpuProfile(Path(folder)), "attn-kit-cpu-profile")


def say(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def report(folder: Path, top: int = 15) -> None:  # pragma: no cover - a command for people
    lines = [
        json.loads(line)
        for path in sorted(folder.glob("*.jsonl"))
        if not path.name.startswith("gradings-")
        for line in path.read_text().splitlines()
    ]
    rows = [r for r in lines if not r.get("process")]
    processes = [r for r in lines if r.get("process")]
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    workers: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        m = modules[r["module"]]
        m[0] += r["self"]
        m[1] += r["children"]
        m[2] += r["wall"]
        m[3] += 1
        w = workers[r["worker"]]
        w[0] += r["wall"]
        w[1] += r["self"] + r["children"]
        w[2] += 1
    total = sum(m[0] + m[1] for m in modules.values())
    say(f"{len(rows)} tests, CPU {total:.0f} s (tests' own processes and their children; start-up and collection not counted)")
    say(f"{'module':44} {'cpu':>7} {'self':>7} {'child':>7} {'wall':>7} {'tests':>6}")
    for name, (own, kids, wall, n) in sorted(modules.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[:top]:
        say(f"{name:44} {own + kids:7.1f} {own:7.1f} {kids:7.1f} {wall:7.1f} {n:6d}")
    quick = [r for r in rows if not r.get("slow")]
    quick_cpu = sum(r["self"] + r["children"] for r in quick)
    say(f"not slow: {len(quick)} tests, CPU {quick_cpu:.0f} s, wall summed {sum(r['wall'] for r in quick):.0f} s")
    say("\nlongest single tests (CPU; a shared fixture's setup lands on its first test):")
    for r in sorted(rows, key=lambda r: -(r["self"] + r["children"]))[:top]:
        say(f"  {r['self'] + r['children']:6.1f} cpu {r['wall']:6.1f} wall (setup {r.get('setup_wall', 0):5.1f})  {r['test'][:110]}")
    gradings = [json.loads(line) for path in sorted(folder.glob("gradings-*.jsonl")) for line in path.read_text().splitlines()]
    same: dict[tuple, list[dict]] = defaultdict(list)
    for g in gradings:
        same[(g["file"], g["seed"], g["exercise"], g["public_only"])].append(g)
    again = {k: v for k, v in same.items() if len(v) > 1}
    spent = sum(g["cpu"] for v in again.values() for g in v[1:])
    graded_cpu = sum(g["cpu"] for g in gradings)
    say(f"\n{len(gradings)} in-process gradings, {graded_cpu:.0f} s CPU; {len(again)} graded again in another process, {spent:.0f} s CPU:")
    for key, v in sorted(again.items(), key=lambda kv: -sum(g["cpu"] for g in kv[1][1:]))[:top]:
        modules = sorted({g["test"].split("::")[0].rsplit("/", 1)[-1] for g in v})
        say(f"  {sum(g['cpu'] for g in v[1:]):5.1f} s  {key[0]} seed {key[1]}  x{len(v)} in {modules}")
    say("\nper test process, whole (collection included; cgroup: the true CPU of it and all it started):")
    for r in sorted(processes, key=lambda r: r["worker"]):
        how = "cgroup" if r["cgroup"] else "getrusage (sandboxed workers not counted)"
        say(f"  {r['worker']:8} {r['wall']:7.1f} wall {r['cpu']:7.1f} cpu  {how}")
    say("\nper test process (wall is the sum of its tests' wall times):")
    for name, (wall, cpu, n) in sorted(workers.items()):
        say(f"  {name:8} {wall:7.1f} wall {cpu:7.1f} cpu {n:6d} tests")


if __name__ == "__main__":  # pragma: no cover
    report(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 15)
