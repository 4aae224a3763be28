"""Starts, feeds and stops the candidate's worker process.

Process model (Linux; see docs/threat-model.md):

    kit ── zygote ── nsinit ── worker ── (whatever the candidate's code starts)

- The zygote is forked from the kit before the kit holds any expected value or loads its own
  solutions (a replacement, or one made later in the same kit process, is a fresh interpreter
  started with exec instead, so it never holds the kit's memory). It has NumPy (and torch when the
  exercise needs it) imported, so workers start instantly. It holds no descriptor of the kit's
  but its control socket: stdin/stdout/stderr are /dev/null, it runs in its own session, is not
  dumpable, is a child subreaper and dies with the kit (PR_SET_PDEATHSIG).
- For each worker the zygote forks an `nsinit`: where the kernel allows (root, or an
  unprivileged user namespace), it is process 1 of a new PID namespace, so every process the
  candidate starts is inside it, cannot signal the kit or the zygote, and dies when nsinit dies
  (nsinit dies with the zygote, the zygote with the kit: however the kit ends). Elsewhere the
  kit and the zygote kill the worker's whole process tree (walking /proc) instead.
- The worker drops every capability, re-arms PR_SET_PDEATHSIG after each fork and runs the
  candidate's code. It answers in base/wire.py's data-only format; nothing it sends is unpickled here.

Every read and every wait has a deadline: a stopped, dead or silent worker is killed and the call
reported; a stopped, dead or silent zygote is killed and replaced, and when no replacement can
start the remaining calls are reported as crashed. Where fork is missing (Windows), workers are
started with multiprocessing's spawn (no isolation beyond a separate process).
"""

from __future__ import annotations

import io
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

from attn_kit.base import wire
from attn_kit.base.errors import ChannelTimeout, LoadError
from attn_kit.base.records import CallStatus, ErrorInfo, Outcome
from attn_kit.sandbox import mutation

DEFAULT_TIMEOUT = 10.0
DEFAULT_MEMORY = 2 << 30
CONTROL_DEADLINE = 5.0      # seconds the zygote has to answer a request
STARTUP_DEADLINE = 120.0    # ... and its first one (a fresh interpreter importing torch on a busy machine)
REPLY_GRACE = 2.0           # seconds a reply may take to arrive once its header has (at most the timeout)
MEMORY_POLL = 0.1           # seconds between checks of a call's processes' total memory
SWEEP_DEADLINE = 4.0        # seconds the end-of-run comparison of every call's arguments may take
MISSING_ARGUMENTS = "its reply was malformed (the arguments were not sent back); the process was stopped"
UNREAD_WRITE = "its arguments (their contents changed during a memory-limited call, too large to read back)"

_LINUX = sys.platform.startswith("linux")
_CLEAN = [True]             # no expected value, check or kit solution exists in this process yet


def taint() -> None:
    """Called before the kit computes expected values or loads its own solutions: from now on a
    new zygote is a fresh interpreter (exec), never a fork of this process."""
    _CLEAN[0] = False


def _is_clean() -> bool:
    return _CLEAN[0] and not any(m.startswith(("attn_kit.checks", "attn_kit.solutions", "attn_kit_solution_"))
                                 for m in sys.modules)


# --- Linux process controls -----------------------------------------------------------------------

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS = 24, 28, 38
CLONE_NEWUSER, CLONE_NEWPID = 0x10000000, 0x20000000


def _libc():
    import ctypes
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> bool:
    if not _LINUX:
        return False
    try:
        return _libc().prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def harden_kit() -> None:
    """In the kit's process, before the first worker: its memory and environment cannot be read
    through /proc or ptrace by same-user processes without CAP_SYS_PTRACE (PR_SET_DUMPABLE=0)."""
    _prctl(PR_SET_DUMPABLE, 0)


WORKER_UID = 65534          # "nobody": the candidate's code runs as this uid when the kit runs as root
# processes and threads the worker's code may add (RLIMIT_NPROC, on top of those its uid already
# runs where the kernel counts them): no fork bomb; room for a thread per core in each of
# OpenBLAS and torch, and for a pool of processes
PROCESS_ALLOWANCE = 128 + 4 * (os.cpu_count() or 1)
CAP_DAC_READ_SEARCH = 2
PR_SET_KEEPCAPS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 8, 47, 2
SECBIT_NO_SETUID_FIXUP = 4
_WORKER_TMP: list[str] = []  # the temporary folder a worker started by root may write in
ROOT_REFUSED = ("the kit runs as root and could not run your code as an unprivileged user ({why}); "
                "run attn-kit as an ordinary user, or in a container as its recipe in "
                "docs/threat-model.md shows")


def _drop_privileges(leave_root: bool = False, processes: int = 0) -> str:  # noqa: C901 (one step per platform limit, each optional)
    """In a worker: no capability (effective, permitted, bounding), none regained by exec. With
    `leave_root`, when running as root: first become uid/gid WORKER_UID with no supplementary
    group, keeping only CAP_DAC_READ_SEARCH (read and search any file, as the user could: the
    solution, its folder, the interpreter; also across exec, as an ambient capability), so the
    candidate's code cannot write to the kit, the venv or the interpreter, which root owns.
    `processes` (the keeper's _task_count plus PROCESS_ALLOWANCE): the RLIMIT_NPROC set, soft
    and hard, once the uid is the one the candidate's code runs as. Returns '' or why root could
    not be left."""
    if not _LINUX:
        return ""
    why = ""
    keep = 0
    try:
        import ctypes
        libc = _libc()
        if leave_root and os.geteuid() == 0:
            try:
                libc.prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0)   # keep caps through setresuid
                os.setgroups([])
                os.setresgid(WORKER_UID, WORKER_UID, WORKER_UID)
                os.setresuid(WORKER_UID, WORKER_UID, WORKER_UID)
                keep = 1 << CAP_DAC_READ_SEARCH
            except OSError as exc:
                why = f"changing to uid {WORKER_UID} failed: {exc.strerror or exc}"
            if _WORKER_TMP:
                os.environ["TMPDIR"] = _WORKER_TMP[0]
                import tempfile
                tempfile.tempdir = _WORKER_TMP[0]
        if processes:
            _limit_processes(processes)
        for cap in range(64):
            if not keep >> cap & 1:
                libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        libc.prctl(PR_SET_SECUREBITS, 0x2F, 0, 0, 0)     # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS off, locked
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)
        data = (ctypes.c_uint32 * 6)(keep, keep, keep)   # effective, permitted, inheritable (low 32 caps)
        if libc.capset(header, data) != 0 and keep:
            why = why or "the capabilities could not be set"
        if keep:
            libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_READ_SEARCH, 0, 0)
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if leave_root and not why and (os.geteuid() == 0 or os.getuid() == 0):
        why = "the process is still root"
    return why


def _limit_processes(limit: int) -> None:
    """RLIMIT_NPROC, soft and hard, at `limit` (never above the hard limit already set): the
    kernel refuses a fork or a new thread beyond it, and the code cannot raise it again."""
    try:
        import resource
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        limit = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass


def _task_count(uid: int, tree: int | None = None) -> int:
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


_OWN_USERNS = [False]       # the zygote created a user namespace of its own (per-namespace counts)


def _enter_user_namespace() -> bool:
    """In the zygote: a user namespace mapping only our uid/gid, so the zygote may create PID
    namespaces without privileges. Returns whether PID namespaces can now be created."""
    if not _LINUX:
        return False
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:          # root creates namespaces without one, and its workers leave root (WORKER_UID)
        return True
    if libc.unshare(CLONE_NEWUSER) == 0:
        _OWN_USERNS[0] = True
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w") as fh:
                    fh.write(text)
        except OSError:
            pass
    return True


MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
CLONE_NEWNS = 0x00020000
_LOCKED = ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME), (2048, MS_NODIRATIME),
           (4096, MS_RELATIME))        # statvfs f_flag bit -> mount flag a remount must keep


def protected_paths() -> list[str]:
    """The kit's installed files, the Python installation it runs on and the user's attn-kit data:
    read-only for the candidate's code where the kernel allows (a private mount namespace)."""
    import importlib.util
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # attn_kit/
    paths = {here, os.path.dirname(os.__file__)}           # the kit, the standard library
    paths.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    for name in ("checks", "solutions", "prompts"):
        if os.path.isdir(os.path.join(here, name)):        # an installed wheel nests them
            paths.add(os.path.join(here, name))
        else:
            try:
                spec = importlib.util.find_spec(f"attn_kit.{name}")
                paths.update(spec.submodule_search_locations or ())
            except (ImportError, AttributeError, ValueError):
                pass
    home = os.environ.get("ATTN_KIT_HOME")
    if not home and _LINUX:                                # platformdirs' answer on Linux
        home = os.path.join(os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "attn-kit")
    elif not home:
        try:
            import platformdirs
            home = platformdirs.user_data_dir("attn-kit", appauthor=False)
        except ImportError:
            home = ""
    if home:
        home = os.path.expanduser(home)
        try:
            os.makedirs(home, exist_ok=True)
        except OSError:
            pass
        paths.add(home)
    real = sorted({os.path.realpath(p) for p in paths if p and os.path.isdir(p)})
    return real


def _read_only(paths: list[str]) -> bool:
    """In the zygote: a private mount namespace where `paths` are read-only bind mounts."""
    if not _LINUX:
        return False
    try:
        libc = _libc()
        if libc.unshare(CLONE_NEWNS) != 0:
            return False
        if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            return False
        done = True
        for path in paths:
            raw = path.encode()
            if libc.mount(raw, raw, None, MS_BIND | MS_REC, None) != 0:
                done = False
                continue
            flags = os.statvfs(path).f_flag
            keep = sum(mount for bit, mount in _LOCKED if flags & bit)
            if libc.mount(None, raw, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep, None) != 0:
                done = False
        return done
    except (OSError, AttributeError):
        return False


def _private_proc() -> bool:
    """In nsinit (process 1 of a new PID namespace): a /proc that shows only that namespace, so
    the candidate's code cannot even see the kit's processes, and an empty read-only /dev/pts, so
    it cannot open the user's terminals by path (/dev/pts/N: print a forged line, read keys)."""
    try:
        libc = _libc()
        if libc.unshare(CLONE_NEWNS) != 0:
            return False
        libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
        done = libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) == 0
        if os.path.isdir("/dev/pts"):
            libc.mount(b"tmpfs", b"/dev/pts", b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=4k")
        return done
    except (OSError, AttributeError):
        return False


def _new_pid_namespace() -> bool:
    if not _LINUX:
        return False
    try:
        return _libc().unshare(CLONE_NEWPID) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process /proc shows (Linux)."""
    found = {}
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
            found[int(name)] = int(data[data.rindex(b")") + 2:].split()[1])
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


def _children_tree(root: int) -> list[int]:
    """Every process below `root`, from the kernel's per-task lists of children (a few small
    reads, where a /proc walk reads every process of the machine: this runs before and after
    every call); the /proc walk where those lists are missing (no CONFIG_PROC_CHILDREN)."""
    if not os.path.exists(f"/proc/self/task/{os.getpid()}/children"):
        return descendants(root)
    found: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:                          # it ended meanwhile
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children", "rb") as fh:
                    children = [int(n) for n in fh.read().split()]
            except (OSError, ValueError):
                continue
            for child in children:
                if child not in found:
                    found.append(child)
                    todo.append(child)
    return found


def kill_tree(root: int, include_root: bool = True) -> None:
    """SIGKILL a process and everything below it, stopping them first so none forks away."""
    if not _LINUX:
        if include_root:
            _signal(root, signal.SIGKILL)
        return
    done: set[int] = set()
    for _ in range(3):                     # a child forked between the walk and the kill
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


def _resident_bytes(pids) -> int:
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


# --- the channels ---------------------------------------------------------------------------------

class Channel:
    """Kit -> worker: length-prefixed pickles (the kit's own data, read by the worker).
    Worker -> kit: base/wire.py frames (data only), read here with deadlines and a size bound."""

    _HEADER = struct.Struct("!Q")

    def __init__(self, sock: socket.socket):
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()

    # kit side
    def send(self, obj, timeout: float | None = None) -> None:
        data = _dumps(obj)
        if len(data) < 32 << 10:           # fits in the socket's buffer: the send cannot block
            self.sock.sendall(self._HEADER.pack(len(data)) + data)
            return
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(self._HEADER.pack(len(data)) + data)
        except socket.timeout:
            raise ChannelTimeout("did not read what the kit sent") from None
        finally:
            self.sock.settimeout(None)

    def recv_reply(self, deadline: float, grace: float = REPLY_GRACE, text_limit: int = wire.TEXT_FLOOR) -> dict:
        """One reply, decoded; EOFError when the worker is gone, ChannelTimeout when it stalls,
        wire.WireError when the reply is too large (JSON text over `text_limit`) or malformed."""
        total, text = wire.read_header(bytes(self._exactly(wire.HEADER.size, deadline)), text_limit)
        body = self._exactly(total, max(deadline, time.monotonic() + min(REPLY_GRACE, grace)))
        return wire.decode(body, text)

    def _exactly(self, size: int, deadline: float) -> bytearray:
        buffer = bytearray(size)
        view, got = memoryview(buffer), 0
        while got < size:
            left = deadline - time.monotonic()
            if left <= 0 or not self.poll(left):
                raise ChannelTimeout(f"sent {got:,} of {size:,} bytes and then nothing")
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise EOFError("the other end closed the channel")
            got += n
        return buffer

    def poll(self, timeout: float | None = None) -> bool:
        waiter = select.poll()
        waiter.register(self.sock, select.POLLIN | select.POLLHUP | select.POLLERR)
        return bool(waiter.poll(None if timeout is None else max(int(timeout * 1000), 0)))

    # worker side
    def recv_bytes(self) -> bytes:
        (size,) = self._HEADER.unpack(self._blocking(self._HEADER.size))
        return bytes(self._blocking(size))

    def _blocking(self, size: int) -> bytearray:
        buffer = bytearray(size)
        view, got = memoryview(buffer), 0
        while got < size:
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise EOFError("the other end closed the channel")
            got += n
        return buffer

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()


class _TensorPickler(pickle.Pickler):
    """Pickles plain torch tensors by value through NumPy (harness_torch.by_value); everything
    else, views and tensors sharing storage included, as pickle and torch always do."""

    def __init__(self, file, tensors: dict, by_value):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.tensors = tensors
        self.by_value = by_value

    def reducer_override(self, obj):
        return self.by_value(obj) if id(obj) in self.tensors else NotImplemented


def _dumps(obj) -> bytes:
    """What the kit sends a worker, pickled (the kit's own data: never decoded in the kit)."""
    if "torch" in sys.modules:
        from attn_kit.base import torch_support
        tensors = torch_support.plain_tensors(obj)
        if tensors:
            buffer = io.BytesIO()
            _TensorPickler(buffer, tensors, torch_support.by_value).dump(obj)
            return buffer.getvalue()
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def describe_exit(status: int | None) -> str:
    """A worker's end in words: 'was killed by signal SIGSEGV (segmentation fault)'."""
    if status is None:
        return "stopped unexpectedly"
    if status < 0:
        sig = -status
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        meaning = {"SIGSEGV": "segmentation fault", "SIGKILL": "killed, often for memory",
                   "SIGABRT": "abort", "SIGBUS": "bus error", "SIGFPE": "arithmetic fault"}.get(name, "")
        return f"was killed by {name}" + (f" ({meaning})" if meaning else "")
    return f"exited with status {status} (os._exit or a crash in native code)"


# --- the zygote (runs in its own process) ---------------------------------------------------------

def _isolate(keep: int) -> None:
    """Own session, /dev/null for 0-2, no other descriptor of the kit's but `keep`."""
    try:
        os.setsid()
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")] if _LINUX else list(range(3, 256))
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass
    sys.stdin = open(os.devnull)            # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115


def _decode_status(code: int) -> int:
    """nsinit's exit code -> the worker's status as waitstatus_to_exitcode gives it."""
    return -(code - 128) if 128 < code < 128 + 65 else code


def _nsinit(sock: socket.socket, namespaced: bool, processes: int = 0) -> None:  # pragma: no cover - in the child
    """Process 1 of the worker's PID namespace (or a plain parent where there is none): starts the
    worker, reaps whatever is orphaned to it, and exits with the worker's status once it ends."""
    os.setsid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(PR_SET_DUMPABLE, 0)
    if not namespaced:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    else:
        _private_proc()
    pid = os.fork()
    if pid == 0:
        try:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            refused = _drop_privileges(leave_root=True, processes=processes)
            _prctl(PR_SET_DUMPABLE, 1)      # the kit reads and resets its peak memory in /proc
            from attn_kit.runtime import worker  # imported by the zygote already (_zygote_child)
            worker.serve(Channel(sock), refused and ROOT_REFUSED.format(why=refused))
        finally:
            os._exit(0)
    sock.close()
    _drop_privileges()
    status = 0
    while True:
        try:
            done, raw = os.wait()
        except ChildProcessError:
            break
        if done == pid:
            code = os.waitstatus_to_exitcode(raw)
            status = code if code >= 0 else 128 - code
            if not namespaced:
                kill_tree(os.getpid(), include_root=False)
            break
    os._exit(status)          # as process 1, this kills everything left in the namespace


def _keeper(sock: socket.socket, namespaced: bool, tell: int) -> None:  # pragma: no cover - in the child
    """The zygote's child for one worker, outside the worker's PID namespace (so the candidate's
    processes cannot signal it): starts nsinit in a new namespace and exits with its status."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(PR_SET_DUMPABLE, 0)
    namespaced = namespaced and _new_pid_namespace()
    os.write(tell, b"1" if namespaced else b"0")
    os.close(tell)
    processes = 0
    if _LINUX:      # the worker's uid: as many tasks as it has now, and an allowance (RLIMIT_NPROC)
        uid = WORKER_UID if os.geteuid() == 0 else os.getuid()
        processes = _task_count(uid, os.getppid() if _OWN_USERNS[0] else None) + PROCESS_ALLOWANCE
    pid = os.fork()
    if pid == 0:
        try:
            _nsinit(sock, namespaced, processes)
        finally:
            os._exit(0)
    sock.close()
    if not namespaced:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    code = 0
    while True:
        try:
            done, raw = os.wait()
        except ChildProcessError:
            break
        if done == pid:
            code = os.waitstatus_to_exitcode(raw)
            code = code if code >= 0 else 128 - code
            break
    if not namespaced:
        kill_tree(os.getpid(), include_root=False)
    os._exit(code)


class _ZygoteServer:  # pragma: no cover - runs in the zygote
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.workers: dict[int, int | None] = {}      # keeper pid -> status once reaped
        self.namespaces = self.read_only = False
        self.spare: tuple[int, socket.socket, int] | None = None
        self.want_spare = False
        self.tmp = ""

    def run(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _isolate(self.sock.fileno())
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _prctl(PR_SET_DUMPABLE, 0)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        if _LINUX and os.geteuid() == 0:
            self.tmp = _worker_tmp()
        if _LINUX and not os.environ.get("ATTN_KIT_NO_NAMESPACES"):   # set: test the fallback
            _enter_user_namespace()
            self.read_only = _read_only(protected_paths())
            self.namespaces = True       # tried per worker; each keeper reports whether it worked
        self.spare = self._fork_worker()         # the first worker is ready before the kit asks
        try:
            self._serve()
        finally:
            self._kill_all()

    def _serve(self) -> None:  # noqa: C901 (the zygote's request loop; to split with the sandbox package)
        waiter = select.poll()
        waiter.register(self.sock, select.POLLIN | select.POLLHUP | select.POLLERR)
        while True:
            if os.getppid() == 1:                # the kit is gone (PDEATHSIG missed it)
                return
            if not waiter.poll(20 if self.want_spare else 200):
                if self.want_spare and self.spare is None:
                    self.spare = self._fork_worker()
                self.want_spare = False
                if not self.namespaces:      # with namespaces nothing can be orphaned to the zygote
                    self._sweep()
                continue
            try:
                request = self.sock.recv(64)
            except OSError:
                return
            if not request or request == b"stop":
                return
            self._reap()
            if request == b"spawn":
                self._spawn()
            elif request.startswith(b"wait "):
                self._answer(self._wait(int(request[5:])))
            elif request.startswith(b"kill "):
                pid = int(request[5:])
                if pid in self.workers:
                    self._kill(pid)
                self._answer(self._wait(pid))
                # a killed worker is usually followed by a restart: prepare one once the kit is
                # quiet for 20 ms (not at the end of a run, when "stop" follows at once)
                self.want_spare = self.spare is None

    def _kill(self, pid: int) -> None:
        """A worker's keeper: with a PID namespace, killing it kills the namespace (nsinit dies with
        its keeper, and the kernel kills everything in the namespace with nsinit)."""
        if self.namespaces:
            _signal(pid, signal.SIGKILL)
        else:
            kill_tree(pid)

    def _answer(self, status: int) -> None:
        self.sock.sendall(status.to_bytes(8, "little", signed=True))

    def _fork_worker(self) -> tuple[int, socket.socket, int]:
        """Start keeper -> nsinit -> worker; the worker waits on its end of a new channel. The
        keeper writes one byte on a pipe: whether the worker has its own PID namespace."""
        a, b = socket.socketpair()
        told, tell = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                self.sock.close()
                a.close()
                os.close(told)
                if self.spare is not None:
                    self.spare[1].close()
                    os.close(self.spare[2])
                _keeper(b, self.namespaces, tell)
            finally:
                os._exit(0)
        b.close()
        os.close(tell)
        self.workers[pid] = None
        return pid, a, told

    def _spawn(self) -> None:
        """Hand the kit a worker: the one prepared ahead (its start costs the kit no wait) or a new one."""
        spare, self.spare = self.spare, None
        if spare is not None and self.workers.get(spare[0], 0) is not None:   # it died meanwhile
            spare[1].close()
            os.close(spare[2])
            spare = None
        pid, a, told = spare or self._fork_worker()
        try:
            namespaced = os.read(told, 1) == b"1"
        except OSError:
            namespaced = False
        os.close(told)
        if not namespaced:
            self.namespaces = False      # from now on: /proc walks, orphan sweeps
        flags = int(namespaced) | int(self.read_only) << 1
        socket.send_fds(self.sock, [pid.to_bytes(8, "little") + bytes([flags])], [a.fileno()])
        a.close()

    def _reap(self) -> None:
        while True:
            try:
                pid, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.workers:
                self.workers[pid] = _decode_status(os.waitstatus_to_exitcode(raw))

    def _wait(self, pid: int) -> int:
        if pid not in self.workers:
            return 0
        deadline = time.monotonic() + 2.0
        while True:
            self._reap()
            if self.workers.get(pid) is not None:
                return self.workers.pop(pid)
            if time.monotonic() > deadline:
                self._kill(pid)
                deadline = time.monotonic() + 2.0
            time.sleep(0.001)

    def _sweep(self) -> None:
        """Reap, and kill every process orphaned to the zygote (a double fork, a daemon); the
        spare worker is in self.workers, so it is not taken for an orphan."""
        self._reap()
        if not _LINUX:
            return
        parents = _parents()
        me = os.getpid()
        for pid, ppid in parents.items():
            if ppid == me and pid not in self.workers:
                kill_tree(pid)

    def _kill_all(self) -> None:
        for pid in list(self.workers):
            _signal(pid, signal.SIGKILL)
        if not self.namespaces:
            kill_tree(os.getpid(), include_root=False)
        self._reap()
        if self.tmp:
            import shutil
            shutil.rmtree(self.tmp, ignore_errors=True)


def share_with_worker(folder: str) -> None:
    """A folder of the kit's that the worker writes in (test-tests' records): run as root, the
    worker is WORKER_UID, so the folder becomes its. The kit only reads what is in it."""
    if _LINUX and os.geteuid() == 0:
        try:
            os.chown(folder, WORKER_UID, WORKER_UID)
        except OSError:
            pass


def _worker_tmp() -> str:  # pragma: no cover - runs in the zygote
    """In a zygote started by root: a fresh private folder owned by WORKER_UID, the temporary
    folder of its workers (they cannot write anywhere root owns, /tmp's sticky folder aside)."""
    import tempfile
    try:
        folder = tempfile.mkdtemp(prefix="attn-kit-worker-")
        os.chown(folder, WORKER_UID, WORKER_UID)
    except OSError:
        return ""
    _WORKER_TMP[:] = [folder]
    return folder


def _warm_torch() -> None:  # pragma: no cover - runs in the zygote
    """Load PyTorch's meta-device kernels once, in the zygote, so every worker inherits them: the
    first meta-device operation of a process costs about a second, and a torch exercise's suite checks
    device placement on `meta` in every run. Kit-owned shapes only; nothing of a check's."""
    torch = sys.modules["torch"]
    try:
        m = torch.empty((1, 2, 3, 4), dtype=torch.float64, device="meta")
        s = m @ m.transpose(-1, -2)
        allowed = torch.ones(3, 3, dtype=torch.bool, device="meta")
        s = torch.where(allowed, s.masked_fill(~allowed, float("-inf")), torch.zeros((), dtype=s.dtype, device="meta"))
        (torch.softmax(s - s.amax(-1, keepdim=True), -1) @ m).sum()
    except Exception:  # noqa: BLE001 - an optimisation only: a torch without meta support just runs slower
        pass


def _settle_torch() -> None:
    """PyTorch's process-wide settings (harness_torch.settle_process), when torch is loaded."""
    if "torch" in sys.modules:
        from attn_kit.base import torch_support
        torch_support.settle_process()


def _zygote_child(sock: socket.socket) -> None:  # pragma: no cover - runs in the child
    try:
        # the worker's module, imported here rather than by the kit: every worker inherits it,
        # and the kit's start-up does not wait for it (it runs beside the kit's own set-up)
        from attn_kit.runtime import worker  # noqa: F401
        _settle_torch()
        if "torch" in sys.modules:
            _warm_torch()
        _ZygoteServer(sock).run()
    finally:
        os._exit(0)


def zygote_main(argv: list[str]) -> None:  # pragma: no cover - the exec'd zygote
    """`python -m attn_kit.sandbox.session FD [module ...]`: a zygote started fresh (no memory of the kit's)."""
    fd = int(argv[0])
    for name in argv[1:]:
        try:
            __import__(name)
        except ImportError:
            pass
    _zygote_child(socket.socket(fileno=fd))


BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread() -> None:
    """One BLAS thread unless the user chose otherwise, set before NumPy is first imported (no
    effect after). A worker's measured call runs under a data limit where OpenBLAS cannot start
    its thread pool and waits for it until the call times out; the CLI sets this at start-up, and
    a zygote sets it for programs that grade through the library."""
    if "numpy" in sys.modules:
        return
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


class _Zygote:
    """The kit's handle on one zygote process."""

    def __init__(self, preload: tuple[str, ...] = ()):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        one_blas_thread()       # before the zygote (or this process, when it forks one) imports NumPy
        if _is_clean():
            for name in preload:          # imported once here, so every worker starts with them
                try:
                    __import__(name)
                except ImportError:
                    pass
            _settle_torch()
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:   # pragma: no cover - runs in the child
                ours.close()
                _zygote_child(theirs)
            self.process = None
        else:              # a fresh interpreter: nothing of the kit's memory
            _settle_torch()
            self.process = subprocess.Popen(
                [sys.executable, "-P", "-m", "attn_kit.sandbox.session", str(theirs.fileno()), *preload],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
            pid = self.process.pid
        theirs.close()
        self.pid, self.sock = pid, ours
        self.namespaced = self.read_only = self.broken = self.answered = False

    def _request(self, text: bytes, fds: bool = False):
        if self.broken:
            raise OSError("the zygote process is out of step with the kit")
        # a fresh zygote first imports NumPy (and torch) and sets up its namespaces: its first
        # answer may take longer than the others
        deadline = CONTROL_DEADLINE if self.answered else max(CONTROL_DEADLINE, STARTUP_DEADLINE)
        self.sock.settimeout(deadline)
        try:
            self.sock.sendall(text)
            if fds:
                data, received, _, _ = socket.recv_fds(self.sock, 16, 1)
                if not received or len(data) != 9:
                    raise OSError("the zygote process answered nothing")
                self.answered = True
                return data, received
            data = self.sock.recv(8)
            if len(data) != 8:
                raise OSError("the zygote process answered nothing")
            self.answered = True
            return data
        except socket.timeout:
            self.broken = True
            raise OSError(f"the zygote process did not answer within {deadline:g} s") from None
        except BaseException:          # Ctrl-C between a request and its answer: never reused
            self.broken = True
            raise
        finally:
            try:
                self.sock.settimeout(None)
            except OSError:
                pass

    def spawn(self):
        data, fds = self._request(b"spawn", fds=True)
        self.namespaced = bool(data[8] & 1)
        self.read_only = bool(data[8] & 2)
        return int.from_bytes(data[:8], "little"), Channel(socket.socket(fileno=fds[0]))

    def reap(self, pid: int, kill: bool = False) -> int:
        return int.from_bytes(self._request(b"%s %d" % (b"kill" if kill else b"wait", pid)), "little", signed=True)

    def close(self):
        try:
            self.sock.sendall(b"stop")
        except OSError:
            pass
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                done = self.pid
            if done:
                break
            time.sleep(0.002)
        else:
            kill_tree(self.pid)
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        self.sock.close()


class _ForkLauncher:
    """Workers from a zygote; a zygote that stops answering is killed and replaced."""

    def __init__(self, preload: tuple[str, ...] = ()):
        harden_kit()
        self.preload = preload
        self.zygote: _Zygote | None = _Zygote(preload)
        self.replacements = 0
        self.failure = ""

    def start(self):
        if self.zygote is None:
            raise OSError(f"no zygote process could be started ({self.failure})")
        try:
            return self.zygote.spawn()
        except OSError:
            self._replace()
            if self.zygote is None:
                raise OSError(f"the zygote process stopped answering and no new one could be started "
                              f"({self.failure})") from None
            return self.zygote.spawn()

    def _replace(self):
        old, self.zygote = self.zygote, None
        if old is not None:
            kill_tree(old.pid)
            old.close()
        self.replacements += 1
        try:
            self.zygote = _Zygote(self.preload)
        except OSError as exc:
            self.failure = str(exc)

    def kill(self, pid):
        if self.zygote is not None and self.zygote.namespaced:
            _signal(pid, signal.SIGKILL)       # the keeper: its namespace dies with it
        else:
            kill_tree(pid)

    def status(self, pid, kill: bool = False) -> int | None:
        if self.zygote is None:
            kill_tree(pid)
            return None
        try:
            return self.zygote.reap(pid, kill)
        except OSError:
            kill_tree(pid)
            self._replace()
            return None

    def close(self):
        if self.zygote is not None:
            self.zygote.close()


class _SpawnLauncher:   # pragma: no cover - used where fork is missing
    def __init__(self, preload: tuple[str, ...] = ()):
        import multiprocessing  # only here: the fork path does not need it
        _settle_torch()         # the kit's side of torch's settings, as before a zygote starts
        self.context = multiprocessing.get_context("spawn")
        self.processes = {}

    def start(self):
        ours, theirs = socket.socketpair()
        process = self.context.Process(target=_spawned, args=(theirs,), daemon=True)
        process.start()
        theirs.close()
        self.processes[process.pid] = process
        return process.pid, Channel(ours)

    def kill(self, pid):
        self.processes[pid].kill()

    def status(self, pid, kill: bool = False) -> int | None:
        process = self.processes.pop(pid)
        if kill:
            process.kill()
        process.join(5)
        return process.exitcode

    def close(self):
        for process in self.processes.values():
            process.kill()


def _spawned(sock):   # pragma: no cover
    from attn_kit.runtime import worker
    worker.serve(Channel(sock))


# What every run imports, for the zygote to import once (each worker then starts with it): pytest's
# built-in plugins and what they load on configure (pdb, faulthandler), and the NumPy modules
# candidates' tests use (numpy.testing, numpy.random). Measured: a run on one implementation took
# 0.19 s without these in the zygote and 0.11 s with them.
PYTEST_PRELOAD = ("pytest", "attn_kit.runtime.pytest_harness", "pdb", "faulthandler", "numpy.random", "numpy.testing")


def pytest_modules() -> tuple[str, ...]:
    """The modules a test-grading zygote imports: PYTEST_PRELOAD and pytest's built-in plugins."""
    from _pytest.config import default_plugins
    return PYTEST_PRELOAD + tuple(f"_pytest.{plugin}" for plugin in default_plugins)


def make_launcher(preload: tuple[str, ...] = ()):
    """A launcher whose zygote has `preload` imported (NumPy always, torch for torch exercises)."""
    if hasattr(os, "fork") and hasattr(socket, "send_fds") and sys.platform != "win32":
        return _ForkLauncher(("numpy", *preload))
    return _SpawnLauncher(preload)


_SHARED: dict[tuple[str, ...], _ForkLauncher] = {}


def shared_launcher(preload: tuple[str, ...] = ()):
    """One launcher per preload set for the whole kit process, reused by every run in it (watch
    re-runs, mock re-grades, in-process tests): its zygote was forked while the process held no
    expected value (or started fresh), so reusing it is as safe as the first time, and later runs
    need no new interpreter. Closed when the process exits."""
    if not (hasattr(os, "fork") and hasattr(socket, "send_fds") and sys.platform != "win32"):
        return None
    key = tuple(preload)
    launcher = _SHARED.get(key)
    if launcher is None:
        if not _SHARED:
            import atexit
            atexit.register(_close_shared)
        launcher = _SHARED[key] = _ForkLauncher(("numpy", *preload))
    elif launcher.zygote is None or launcher.zygote.broken or not _zygote_alive(launcher.zygote.pid):
        launcher._replace()
    return launcher


def _zygote_alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == 0


def _close_shared() -> None:
    for launcher in _SHARED.values():
        try:
            launcher.close()
        except OSError:
            pass
    _SHARED.clear()


@dataclass
class LoadInfo:
    functions: dict[str, str]     # name -> signature text, as the candidate's file defines them
    output: str
    note: str                     # e.g. "memory cap not applied: ..."
    pure: tuple[str, ...] = ()    # modules outside the standard library it imported at run time


class Sandbox:
    """One candidate file, loaded in a worker; `call` runs one of its functions."""

    def __init__(self, path: str, timeout: float = DEFAULT_TIMEOUT, memory: int | None = DEFAULT_MEMORY,
                 launcher=None, pure: bool = False, preload: tuple[str, ...] = ()):
        self.path = str(path)
        self.timeout = timeout
        self.memory = memory
        self.pure = pure
        shared = None if launcher is not None else shared_launcher(preload)
        self.owns_launcher = launcher is None and shared is None
        self.launcher = launcher or shared or make_launcher(preload)
        self.pid = None
        self.conn = None
        self.info: LoadInfo | None = None
        self.restarts = 0
        self.pure_seen: list[str] = []
        self._positional: dict[str, list[str]] = {}     # function -> its positional parameter names
        self.broken = ""          # why no worker can be started any more
        self.text_limit = wire.TEXT_FLOOR    # JSON text the next reply may hold (wire.text_limit)
        self.memory_note = ""                # why the kit stopped the worker for memory, if it did
        self.oom_kills = 0                   # the kernel's OOM kill count when the last request was sent
        self._next_sum = 0.0                 # when the memory of the worker's processes may be summed again
        # the echoed calls of the current worker, by their order in it (the worker's own index):
        # [fn, argument names, the arguments as the call left them, their fingerprint there]
        self._kept: dict[int, list] = {}
        self._sent = 0                       # echoed calls sent to the current worker
        self._rotation = 0                   # which older call to compare again next (one per call)
        self.late: list[tuple[str, str]] = []   # (fn, part) written after its call returned, found late

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _drop_worker(self, kill: bool = True) -> int | None:
        """Kill (or just reap) the worker and everything it started; its exit status."""
        self._kept, self._sent = {}, 0
        if self.pid is None:
            return None
        pid, self.pid = self.pid, None
        if kill:
            self.launcher.kill(pid)
        status = self.launcher.status(pid, kill=kill)
        self.conn.close()
        self.conn = None
        return status

    def _ended(self) -> str:
        """The worker closed its channel: make sure it is gone, and say how it ended."""
        pid = self.pid
        if pid is not None and _LINUX:         # give a worker that is exiting a moment to finish
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline and _alive_worker(pid):
                time.sleep(0.005)
            if _alive_worker(pid):
                self._drop_worker(kill=True)
                return "closed its connection to the kit without answering (it was stopped)"
        return describe_exit(self._drop_worker(kill=True))

    def _read(self, deadline: float, what: str) -> tuple[dict | None, str, str]:
        """(reply, status, detail): status is '' on success, else timeout/crashed/memory."""
        try:
            return self.conn.recv_reply(deadline, self.timeout, self.text_limit), "", ""
        except ChannelTimeout as exc:
            self._drop_worker()
            return None, CallStatus.CRASHED, f"its {what} was cut short: it {exc} (the process was stopped)"
        except wire.WireError as exc:
            self._drop_worker()
            return None, CallStatus.CRASHED, f"{exc}; the process was stopped"
        except (EOFError, OSError):
            how = self._ended()
            detail, status = f"the process {how}", CallStatus.CRASHED
            if "SIGKILL" in how and not self.memory_note:
                if _oom_kills() > self.oom_kills:
                    status = CallStatus.MEMORY
                    detail += "; the kernel ran out of memory and killed it"
                else:       # the kit kills only for its own reasons, and says which (memory_note)
                    detail = ("the process was killed by SIGKILL, not by the kit and not for memory (the "
                              "kernel reported no out-of-memory kill)")
            return None, status, detail

    def start(self) -> LoadInfo:
        """Start a worker and load the file; raise LoadError if it cannot be loaded."""
        self.text_limit = wire.TEXT_FLOOR
        if self.broken:
            raise LoadError(self.broken)
        try:
            self.pid, self.conn = self.launcher.start()
        except OSError as exc:
            self.broken = f"no worker process could be started ({exc})"
            raise LoadError(self.broken) from None
        load_timeout = self.timeout        # importing the file gets the same budget as one call
        self.memory_note = ""
        self.oom_kills = _oom_kills() if _LINUX else 0
        try:
            self.conn.send(("load", self.path, self.memory, self.pure), timeout=CONTROL_DEADLINE)
        except (OSError, ChannelTimeout):
            raise LoadError(f"loading {self.path}: the process {self._ended()}.") from None
        deadline = time.monotonic() + load_timeout
        if not self._wait(deadline):
            self._drop_worker()
            raise LoadError(f"{self.path} did not finish loading within {load_timeout:g} s: "
                            "is there a loop or a long computation at the top level of the file?")
        reply, status, detail = self._read(deadline, "answer to loading the file")
        if reply is None:
            raise LoadError(f"loading {self.path}: {self.memory_note or detail}.")
        try:
            info = _read_load(reply)
        except wire.WireError as exc:
            self._drop_worker()
            raise LoadError(f"loading {self.path}: {exc}.") from None
        self._note_pure(info.pure)
        if reply["status"] == CallStatus.RAISED:
            self._drop_worker()
            raise LoadError(_load_failure_text(self.path, reply["error"], info.output))
        self.info = info
        return info

    def _note_pure(self, names) -> None:
        for name in names:
            if name not in self.pure_seen:
                self.pure_seen.append(name)

    def _wait(self, deadline: float) -> bool:
        """Wait for the worker to answer, watching the total memory of its processes."""
        first = True
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self.conn.poll(min(left, MEMORY_POLL) if (self.memory and _LINUX) else left):
                return True
            if self.memory and _LINUX and not first and self._over_memory():
                return True          # the worker has been killed; the read reports it
            first = False

    def _held_too_much(self) -> bool:
        """Whether the worker's processes hold more than the memory cap together right now (then
        the worker was stopped): checked before and after every call, however short (paced as
        _over_memory says)."""
        if not (self.memory and _LINUX and self.conn is not None and self.pid is not None):
            return False
        self.memory_note = ""
        if len(_children_tree(self.pid)) <= 2:     # nsinit and the worker alone: its own limits hold it
            return False
        if not self._over_memory():
            return False
        self._drop_worker(kill=True)
        return True

    def _over_memory(self) -> bool:
        """Whether the worker's processes together hold more than the cap (then they are killed).
        The sum reads every process's smaps_rollup, so it is taken at most every MEMORY_POLL
        seconds or four times as long as the last one took, whichever is longer: a file holding a
        hundred processes between its calls cannot make the kit spend its time summing them."""
        tree = _children_tree(self.pid)
        if len(tree) <= 1:             # nsinit and the worker alone: RLIMIT_AS covers it
            return False
        started = time.monotonic()
        if started < self._next_sum:
            return False
        used = _resident_bytes(tree)
        self._next_sum = time.monotonic() + max(MEMORY_POLL, 4 * (time.monotonic() - started))
        if used > self.memory:
            self.memory_note = (f"the processes it started used {used / 2**20:,.0f} MiB together, "
                                f"over the memory cap of {self.memory / 2**20:,.0f} MiB")
            self.launcher.kill(self.pid)
            return True
        return False

    def call(self, fn: str, args=(), kwargs=None, harness: str | None = None,  # noqa: C901 (to split with the sandbox package)
             timeout: float | None = None, echo: bool = True, memory_limit: int | None = None) -> Outcome:
        """Run fn(*args, **kwargs) in the worker. Hangs, crashes and MemoryError become Outcomes.
        With `echo`, the kit names the parts of the arguments the call wrote (Outcome.mutated): the
        worker sends a fingerprint of the arguments as the call left them, and the arguments
        themselves when it differs from the fingerprint of the kit's own copy.

        `memory_limit` (a measured call, Linux): just before the call the kit itself lowers the
        data limit (RLIMIT_DATA, soft and hard) of the worker and of every process it started to
        what each holds plus `memory_limit` bytes; children inherit it and the candidate's code
        cannot raise it. A call that needs more gets MemoryError (status memory); where the limit
        cannot be applied the call is reported as crashed, saying why. The worker is replaced after
        the call, since its limit cannot be raised again."""
        kwargs = dict(kwargs or {})
        if self.conn is None:
            try:
                self.start()
            except LoadError as exc:
                return Outcome(CallStatus.CRASHED, detail=f"the worker could not be restarted: {exc}")
            self.restarts += 1
        limit = self.timeout if timeout is None else timeout
        self.text_limit = wire.text_limit((args, kwargs))
        before = wire.to_plain(list(args) + list(kwargs.values())) if echo else None
        measure = bool(harness and "measure" in harness and _LINUX)
        unlimited = ""            # why memory_limit could not be applied
        kernel, peak = None, None
        started = time.perf_counter()
        self.memory_note = ""
        if self._held_too_much():          # processes started by earlier calls, holding memory between them
            return Outcome(CallStatus.MEMORY, detail=self.memory_note, seconds=0.0)
        self.oom_kills = _oom_kills() if _LINUX else 0
        recheck = self._recheck() if echo else ()
        serial = self._sent
        try:
            self.conn.send(("call", fn, tuple(args), kwargs, harness, echo, measure, recheck),
                           timeout=limit + CONTROL_DEADLINE)
            self._sent += int(echo)
        except (OSError, ChannelTimeout):        # the worker died between calls, or reads nothing
            return Outcome(CallStatus.CRASHED, detail=f"the process {self._ended()}", seconds=time.perf_counter() - started)
        deadline = time.monotonic() + limit
        mine = wire.digest(before) if echo else None      # while the worker runs the call
        syncs = 0
        while True:
            if not self._wait(deadline):
                self._drop_worker()
                return Outcome(CallStatus.TIMEOUT, detail=f"did not return within {limit:g} s (the call was stopped)",
                               seconds=time.perf_counter() - started)
            reply, status, detail = self._read(deadline + min(REPLY_GRACE, limit), "reply")
            if reply is None or not (measure and syncs < 2 and reply.get("kind") == "sync"):
                break
            # a measured call: the worker stops just before and just after it, and the kit resets
            # and then reads the worker's peak resident memory (VmHWM) from the kernel
            if syncs == 0:
                kernel = self._reset_peak()
                if memory_limit is not None:
                    unlimited = self._limit_data(memory_limit, deadline + min(REPLY_GRACE, limit))
            elif kernel is not None:
                peak = status_field(kernel[0], "VmHWM")
            syncs += 1
            try:
                self.conn.send(("go",), timeout=CONTROL_DEADLINE)
            except (OSError, ChannelTimeout):
                reply, status, detail = None, CallStatus.CRASHED, f"the process {self._ended()}"
                break
        seconds = time.perf_counter() - started
        try:        # a worker under a data limit stays until its arguments have been compared
            if memory_limit is not None and (unlimited or not measure) and reply is not None:
                why = unlimited or ("the kit measures memory only on Linux" if not _LINUX else "the call was not measured")
                return Outcome(CallStatus.CRASHED, detail=f"the kit could not limit the memory of this call ({why}), "
                               "so the memory property is not measured", seconds=seconds)
            if measure and reply is not None and syncs < 2 and reply.get("status") == CallStatus.OK:
                # a measured call that returned without stopping before and after it: the kernel's
                # reading of its memory is missing, and only the candidate's process could have skipped it
                self._drop_worker()
                return Outcome(CallStatus.CRASHED, detail="its reply was malformed (the measured call skipped the kit's "
                               "memory reading); the process was stopped", seconds=seconds)
            if reply is None:
                if self.memory_note:
                    status, detail = CallStatus.MEMORY, self.memory_note
                return Outcome(status, detail=detail, seconds=seconds)
            if self._held_too_much():          # a call too short for the polling in _wait
                return Outcome(CallStatus.MEMORY, detail=self.memory_note, seconds=seconds)
            try:
                outcome, after = wire.read_outcome(reply)
            except wire.WireError as exc:
                self._drop_worker()
                return Outcome(CallStatus.CRASHED, detail=f"{exc}; the process was stopped", seconds=seconds)
            self._note_pure(_names(reply.get("pure")))
            if kernel is not None and peak is not None:
                outcome.extra["kernel_peak_bytes"] = max(peak - kernel[1], 0)
            if echo and outcome.status != CallStatus.CRASHED:        # crashed: the worker's result was too large
                if not isinstance(after, str):
                    self._drop_worker()
                    return Outcome(CallStatus.CRASHED, detail=MISSING_ARGUMENTS, seconds=seconds)
                names = self._argument_names(fn, len(args), list(kwargs))
                if mine is None or after != mine:       # maybe written: compare the arguments themselves
                    view, problem = self._echo(len(before))
                    if problem and memory_limit:
                        # under the call's data limit the worker may have no room to send its
                        # arguments back: their fingerprint changed, which is the evidence
                        return _replace(outcome, mutated=(UNREAD_WRITE,))
                    if problem:
                        return Outcome(CallStatus.CRASHED, detail=problem, seconds=seconds)
                    outcome = _replace(outcome, mutated=mutation.written(names, before, view))
                    before = view
                earlier, problem = self._earlier_written(recheck, reply.get("earlier"))
                if problem:
                    return Outcome(CallStatus.CRASHED, detail=problem, seconds=seconds)
                if earlier:
                    outcome = _replace(outcome, mutated=(*outcome.mutated, *earlier))
                if isinstance(after, str) and self.conn is not None:
                    self._kept[serial] = [fn, names, before, after]
            return outcome
        finally:
            if memory_limit is not None and self.conn is not None:
                self.late.extend(self._sweep())    # before the worker goes: its calls' arguments, written late
                self._drop_worker()        # its data limit cannot be raised again: the next call gets a new one

    def _recheck(self) -> tuple[int, ...]:
        """The earlier calls whose arguments the worker fingerprints again after the next call: the
        previous call and one older call, going down from the newest to the first and then again
        from the newest (so every call is compared again within as many calls as came before it,
        at the cost of one more fingerprint per call; all are compared at the end)."""
        serials = list(self._kept)
        if len(serials) <= 1:
            return tuple(serials)
        if not 0 <= self._rotation < len(serials) - 1:
            self._rotation = len(serials) - 2
        older = serials[self._rotation]
        self._rotation -= 1
        return (serials[-1], older)

    def _earlier_written(self, indices, fingerprints) -> tuple[tuple[str, ...], str]:
        """(the parts of earlier calls' arguments written since the kit last compared them, '') or
        ((), why the reply cannot be right): a fingerprint that differs from the kit's copy's is
        followed by the arguments themselves, compared value by value as for the call's own."""
        if not indices:
            return (), ""
        if not isinstance(fingerprints, list) or len(fingerprints) != len(indices):
            self._drop_worker()
            return (), MISSING_ARGUMENTS
        parts: list[str] = []
        for index, now in zip(indices, fingerprints):
            fn, names, then, known = self._kept[index]
            if now == known:
                continue
            self.text_limit = max(self.text_limit, wire.text_limit(then))    # that call's own bound
            view, problem = self._echo(len(then), index)
            if problem:
                return (), problem
            parts.extend(f"{part} of an earlier `{fn}` call (written after it returned)"
                         for part in mutation.written(names, then, view))
            self._kept[index][2:] = [view, now]        # each write is reported once
        return tuple(parts), ""

    def _sweep(self) -> list[tuple[str, str]]:
        """Before a worker that still answers goes (the end of a run, a measured call's retirement):
        every earlier call's arguments compared again; (fn, part) for each written since its call
        returned and not yet reported. A worker that does not answer is stopped, reporting none;
        reading arguments back stops after SWEEP_DEADLINE seconds (the worker is then stopped),
        whatever the number of calls."""
        if self.conn is None or not self._kept:
            return []
        end = time.monotonic() + SWEEP_DEADLINE
        try:
            self.conn.send(("sweep",), timeout=CONTROL_DEADLINE)
        except (OSError, ChannelTimeout):
            return []
        deadline = time.monotonic() + REPLY_GRACE
        if not self._wait(deadline):
            self._drop_worker()
            return []
        reply, _, _ = self._read(deadline, "fingerprints")
        fingerprints = reply.get("fingerprints") if reply is not None and reply.get("kind") == "sweep" else None
        if self.conn is None or not isinstance(fingerprints, list) or len(fingerprints) != self._sent:
            return []
        found: list[tuple[str, str]] = []
        for index, known_entry in list(self._kept.items()):
            fn, names, then, known = known_entry
            now = fingerprints[index]
            if now == known:
                continue
            if time.monotonic() > end:
                self._drop_worker()
                break
            self.text_limit = max(self.text_limit, wire.text_limit(then))
            view, problem = self._echo(len(then), index)
            if problem:
                break
            found.extend((fn, part) for part in mutation.written(names, then, view))
            self._kept[index][2:] = [view, now]
        return found

    def finish(self) -> list[tuple[str, str]]:
        """At the end of a run, before close: (fn, part) of every argument some call wrote into
        after that call had returned, found when a worker was retired or now."""
        self.late.extend(self._sweep())
        found, self.late = self.late, []
        return found

    def _echo(self, count: int, index: int | None = None) -> tuple[list, str]:
        """(the `count` arguments of the last call as the worker holds them, or of the earlier call
        `index` as they are now, '') or ([], why they are missing)."""
        try:
            self.conn.send(("echo",) if index is None else ("echo", index), timeout=CONTROL_DEADLINE)
        except (OSError, ChannelTimeout):
            return [], f"the process {self._ended()}"
        deadline = time.monotonic() + REPLY_GRACE
        if not self._wait(deadline):
            self._drop_worker()
            return [], MISSING_ARGUMENTS
        reply, _, detail = self._read(deadline, "arguments sent back")
        if reply is None:
            return [], detail
        after = reply.get("after")
        if reply.get("kind") != "echo" or not isinstance(after, list) or len(after) != count:
            self._drop_worker()
            return [], MISSING_ARGUMENTS
        return after, ""

    def _worker_pid(self) -> int | None:
        """The worker's pid as /proc shows it (self.pid is its keeper: keeper -> nsinit -> worker)."""
        if not _LINUX or self.pid is None:
            return None
        below = descendants(self.pid)
        parents = _parents()
        return next((p for p in below if parents.get(p) in below and parents.get(parents[p]) == self.pid), None)

    def _reset_peak(self) -> tuple[int, int] | None:
        """Reset the worker's peak resident memory (Linux clear_refs); (pid, resident bytes now)."""
        pid = self._worker_pid()
        if pid is None:
            return None
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            return None
        rss = status_field(pid, "VmRSS")
        return None if rss is None else (pid, rss)

    def _limit_data(self, extra: int, deadline: float) -> str:  # noqa: C901 (one branch per way to cap memory)
        """Limit the data (RLIMIT_DATA, soft and hard) of the worker and every process below it to
        what each holds plus `extra` bytes, while the worker waits to start a measured call; '' or
        why it could not be done. The kit sets it with prlimit where it may (same uid, or
        CAP_SYS_RESOURCE); elsewhere it asks the worker to set its own. Either way it then reads
        every process's limit back from /proc before the call may start: a limit that is missing
        or higher is reported, never ignored (a hard limit, once lowered, cannot be raised)."""
        import resource
        worker = self._worker_pid()
        if worker is None:
            return "the worker's process was not found"
        tree = [worker, *descendants(worker)]
        try:
            for pid in tree:
                used = status_field(pid, "VmData")
                if used is not None:
                    resource.prlimit(pid, resource.RLIMIT_DATA, (used + extra, used + extra))
        except ProcessLookupError:
            pass
        except PermissionError:          # another uid and no CAP_SYS_RESOURCE: the worker sets its own
            try:
                self.conn.send(("limit", extra), timeout=CONTROL_DEADLINE)
                reply, _, detail = self._read(deadline, "answer")
            except (OSError, ChannelTimeout):
                return "the worker did not answer"
            if reply is None or reply.get("kind") != "sync":
                return detail or "the worker did not answer"
        except (OSError, ValueError) as exc:
            return f"prlimit failed: {exc}"
        for pid in [worker, *descendants(worker)]:
            limit, used = _data_limit(pid), status_field(pid, "VmData")
            if used is None or limit is None:
                if _alive_worker(pid):
                    return f"the kernel did not show the data limit of process {pid}"
                continue
            if limit > used + extra + (4 << 20):
                return (f"a process of the call ({'the worker' if pid == worker else 'started earlier'}) is not "
                        f"under the limit")
        return ""

    def _argument_names(self, fn: str, positional: int, keywords: list[str]) -> list[str]:
        """The parameter names the arguments bind to, from the signature the file declared."""
        names = [f"argument {i + 1}" for i in range(positional)] + keywords
        if fn not in self._positional:
            text = (self.info.functions.get(fn) if self.info else None) or ""
            from attn_kit.load.preflight import parameters
            params = parameters(text) if text.startswith("(") else None
            self._positional[fn] = [p.name for p in params or () if p.kind == p.POSITIONAL_OR_KEYWORD]
        plain = self._positional[fn]
        names[:min(positional, len(plain))] = plain[:positional]
        return names

    def close(self):
        if self.conn is not None:
            try:
                self.conn.send(("stop",), timeout=1.0)
            except (OSError, ChannelTimeout):
                pass
            self._drop_worker()
        if self.owns_launcher:
            self.launcher.close()


def _oom_kills() -> int:
    """The kernel's count of out-of-memory kills since boot (/proc/vmstat), or 0."""
    try:
        with open("/proc/vmstat", "rb") as fh:
            for line in fh:
                if line.startswith(b"oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _data_limit(pid: int) -> int | None:
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


def _alive_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        return data[data.rindex(b")") + 2:][:1] not in (b"Z", b"X")
    except (OSError, ValueError):
        return False


def _replace(outcome: Outcome, **changes) -> Outcome:
    from dataclasses import replace
    return replace(outcome, **changes)


def _names(value) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(wire.visible(str(v)[:80]) for v in value if isinstance(v, str))[:50]


def _read_load(reply: dict) -> LoadInfo:
    def want(cond, what):
        if not cond:
            raise wire.WireError(f"its answer to loading the file was malformed ({what})")
    want(reply.get("kind") == "load" and reply.get("status") in (CallStatus.OK, CallStatus.RAISED), "status")
    functions = reply.get("functions")
    want(isinstance(functions, dict) and all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in functions.items()), "functions")
    want(reply["status"] == CallStatus.OK or isinstance(reply.get("error"), ErrorInfo), "error")
    output, note = reply.get("output"), reply.get("note")
    want(isinstance(output, str) and isinstance(note, str), "output")
    return LoadInfo({wire.visible(k[:200]): wire.visible(v[:2000]) for k, v in functions.items()},
                    wire.visible(output[:100_000]), wire.visible(note[:500]), _names(reply.get("pure")))


def _load_failure_text(path: str, error: ErrorInfo, output: str) -> str:
    if error.type == "RefusedAsRoot":
        return f"{path} was not run: {error.message}"
    if error.type == "SyntaxError" or error.type == "IndentationError":
        text = f"{path} has a {error.type}: {error.message}"
    else:
        text = f"{path} could not be loaded: importing it raised {error.one_line()}"
        if error.traceback:
            text += "\n" + error.traceback.rstrip()
    if output.strip():
        text += f"\nIt printed:\n{output.rstrip()}"
    return text


if __name__ == "__main__":   # pragma: no cover - the exec'd zygote
    zygote_main(sys.argv[1:])
