"""The candidate's process tree read from /proc: descendants, their memory, kernel counters, and
killing the whole tree.
"""

from __future__ import annotations

import os
import signal

from attn_kit.sandbox import limits as _limits


def task_count(uid: int, tree: int | None = None) -> int:
    """The tasks (threads included) of real uid `uid` the kernel counts against RLIMIT_NPROC: all
    the machine's (as /proc shows them), or, with `tree`, those of that process and its
    descendants (a user namespace of the zygote's own: the kernel counts per namespace)."""
    pids = [tree, *descendants(tree)] if tree is not None else [int(n) for n in _proc_names() if n.isdigit()]
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", "rb") as fh:
                real, threads = -1, 0
                for line in fh:
                    if line.startswith(b"Uid:"):
                        real = int(line.split()[1])
                    elif line.startswith(b"Threads:"):
                        threads = int(line.split()[1])
                        break
        except (OSError, ValueError, IndexError):
            continue
        total += threads if real == uid else 0
    return total


def _proc_names() -> list[str]:
    try:
        return os.listdir("/proc")
    except OSError:
        return []


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process /proc shows (Linux)."""
    found: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
            found[int(name)] = int(data[data.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return found


def descendants(root: int, parents: dict[int, int] | None = None) -> list[int]:
    """Every process below `root` (children first found first)."""
    parents = _parents() if parents is None else parents
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


_CHILD_LISTS: list[bool] = []  # whether the kernel keeps per-task lists of children, once asked


def _child_lists() -> bool:
    if not _CHILD_LISTS:
        _CHILD_LISTS.append(os.path.exists(f"/proc/self/task/{os.getpid()}/children"))
    return _CHILD_LISTS[0]


def _task_children(pid: int, task: int | str) -> list[int] | None:
    """The children one task of a process started (/proc/PID/task/TID/children), or None. Read
    with os.read, not a file object: this runs several times before and after every call."""
    try:
        fd = os.open(f"/proc/{pid}/task/{task}/children", os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return [int(n) for n in b"".join(chunks).split()]
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def children_tree(root: int) -> list[int]:
    """Every process below `root`, from the kernel's per-task lists of children (a few small
    reads, where a /proc walk reads every process of the machine: this runs before and after
    every call); the /proc walk where those lists are missing (no CONFIG_PROC_CHILDREN)."""
    if not _child_lists():
        return descendants(root)
    found: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:  # it ended meanwhile
            continue
        for task in tasks:
            for child in _task_children(pid, task) or ():
                if child not in found:
                    found.append(child)
                    todo.append(child)
    return found


def chain_tree(root: int, chain: tuple[int, int] | None) -> list[int]:
    """children_tree(root) for a worker's keeper `root`, read in four small reads while the tree
    is still `chain` alone (nsinit, worker: the keeper's one child and its one child; the keeper
    and nsinit are the kit's single-threaded processes, so their main task's list holds all their
    children, and every thread of the worker is read): the whole walk when anything differs."""
    if chain is not None and _child_lists():
        nsinit, worker = chain
        if _task_children(root, root) == [nsinit] and _task_children(nsinit, nsinit) == [worker]:
            try:
                tasks = os.listdir(f"/proc/{worker}/task")
            except OSError:
                tasks = []
            if tasks and all(_task_children(worker, task) == [] for task in tasks):
                return [nsinit, worker]
    return children_tree(root)


def kill_tree(root: int, include_root: bool = True) -> None:
    """SIGKILL a process and everything below it, stopping them first so none forks away."""
    if not _limits.LINUX:
        if include_root:
            _signal(root, signal.SIGKILL)
        return
    done: set[int] = set()
    for _ in range(3):  # a child forked between the walk and the kill
        tree = [p for p in descendants(root) if p not in done]
        targets = ([root] if include_root and not done else []) + tree
        if not targets:
            break
        for pid in targets:
            _signal(pid, signal.SIGSTOP)
        for pid in targets:
            _signal(pid, signal.SIGKILL)
        done.update(targets)


def _signal(pid: int, sig) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def resident_bytes(pids) -> int:
    """The memory the processes hold together: the sum of their proportional set sizes (Pss: a
    page shared by n of them counts 1/n in each, so pages a fork shares with its parent, such as
    NumPy's, count once), or of their resident sizes where the kernel has no smaps_rollup."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
            continue
        except (OSError, ValueError, IndexError):
            pass
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    return total


def status_field(pid: int, field: str) -> int | None:
    """A `kB` field of /proc/<pid>/status in bytes (VmHWM, VmRSS), or None."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _oom_kills() -> int:
    """The kernel's count of out-of-memory kills since boot (/proc/vmstat), or 0."""
    try:
        with open("/proc/vmstat", "rb") as fh:
            data = fh.read()  # one read: this runs before every call
        at = data.find(b"\noom_kill ")
        return int(data[at + 10 : data.index(b"\n", at + 1)]) if at >= 0 else 0
    except (OSError, ValueError):
        return 0


def data_limit(pid: int) -> int | None:
    """The hard RLIMIT_DATA of a process from /proc/<pid>/limits (world-readable), or None."""
    try:
        with open(f"/proc/{pid}/limits") as fh:
            for line in fh:
                if line.startswith("Max data size"):
                    hard = line[26:].split()[1]
                    return 1 << 62 if hard == "unlimited" else int(hard)
    except (OSError, ValueError, IndexError):
        pass
    return None


def alive_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        return data[data.rindex(b")") + 2 :][:1] not in (b"Z", b"X")
    except (OSError, ValueError):
        return False
