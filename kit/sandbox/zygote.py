"""The zygote: a process forked (or exec'd fresh) before the kit holds any expected value, that forks
one worker per candidate run; the launchers that start it and share it within a kit process.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from attn_kit.base.blas import BLAS_THREAD_VARIABLES as BLAS_THREAD_VARIABLES  # re-exported: callers name them here
from attn_kit.base.blas import one_blas_thread as one_blas_thread
from attn_kit.sandbox import channel as _channel
from attn_kit.sandbox import confinement as _confinement
from attn_kit.sandbox import limits as _limits
from attn_kit.sandbox import proctree as _proctree

CONTROL_DEADLINE = 5.0  # seconds the zygote has to answer a request
STARTUP_DEADLINE = 120.0  # ... and its first one (a fresh interpreter importing torch on a busy machine)
_CLEAN = [True]  # no expected value, check or kit solution exists in this process yet


def expected_values_loaded() -> None:
    """Called before the kit computes expected values or loads its own solutions: from now on a
    new zygote is a fresh interpreter (exec), never a fork of this process."""
    _CLEAN[0] = False


def _is_clean() -> bool:
    return _CLEAN[0] and not any(m.startswith(("attn_kit.checks", "attn_kit.solutions", "attn_kit_solution_")) for m in sys.modules)


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
        fds = [int(n) for n in os.listdir("/proc/self/fd")] if _limits.LINUX else list(range(3, 256))
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115


def _decode_status(code: int) -> int:
    """nsinit's exit code -> the worker's status as waitstatus_to_exitcode gives it."""
    return -(code - 128) if 128 < code < 128 + 65 else code


def _reap_until(pid: int) -> int:  # pragma: no cover - in the child
    """Reap every child (a subreaper's orphans too) until `pid` ends: its exit code, 128 + the
    signal that killed it, or 0 when it is not a child at all."""
    while True:
        try:
            done, raw = os.wait()
        except ChildProcessError:
            return 0
        if done == pid:
            code = os.waitstatus_to_exitcode(raw)
            return code if code >= 0 else 128 - code


def _nsinit(sock: socket.socket, namespaced: bool, processes: int = 0) -> None:  # pragma: no cover - in the child
    """Process 1 of the worker's PID namespace (or a plain parent where there is none): starts the
    worker, reaps whatever is orphaned to it, and exits with the worker's status once it ends."""
    os.setsid()
    _limits._prctl(_limits.PR_SET_PDEATHSIG, signal.SIGKILL)
    _limits._prctl(_limits.PR_SET_DUMPABLE, 0)
    tmp = _limits.WORKER_TMP[0] if _limits.WORKER_TMP else ""
    root = os.geteuid() == 0
    uid, gid = (_limits.WORKER_UID, _limits.WORKER_UID) if root else (os.getuid(), os.getgid())
    private = own_tmp = False  # /proc and /dev/shm of the namespace's own; a tmpfs of the worker's
    if not namespaced:
        _limits._prctl(_limits.PR_SET_CHILD_SUBREAPER, 1)
    else:
        private = _limits.private_proc()
        own_tmp = private and bool(tmp) and _limits.private_tmp(tmp, uid, gid)
    if tmp and root and not own_tmp:  # no tmpfs of its own: the folder itself becomes the worker's
        try:
            os.chown(tmp, uid, gid)
        except OSError:
            pass
    pid = os.fork()
    if pid == 0:
        try:
            _limits._prctl(_limits.PR_SET_PDEATHSIG, signal.SIGKILL)
            refused = _limits.drop_privileges(leave_root=True, processes=processes)
            _limits._prctl(_limits.PR_SET_DUMPABLE, 1)  # the kit reads and resets its peak memory in /proc
            from attn_kit.runtime import worker  # imported by the zygote already (_zygote_child)

            def confine(path: str, reads: tuple[str, ...], self_peak: bool, writes: tuple[str, ...]) -> tuple[bool, str]:
                return _confinement.apply(path, reads, tmp, own_tmp, self_peak, writes)

            worker.serve(_channel.Channel(sock), refused and _limits.ROOT_REFUSED.format(why=refused), confine)
        finally:
            os._exit(0)
    sock.close()
    _limits.drop_privileges()
    status = _reap_until(pid)
    if not namespaced:
        _proctree.kill_tree(os.getpid(), include_root=False)
    os._exit(status)  # as process 1, this kills everything left in the namespace


def _keeper(sock: socket.socket, namespaced: bool, tell: int) -> None:  # pragma: no cover - in the child
    """The zygote's child for one worker, outside the worker's PID namespace (so the candidate's
    processes cannot signal it): starts nsinit in a new namespace and exits with its status."""
    _limits._prctl(_limits.PR_SET_PDEATHSIG, signal.SIGKILL)
    _limits._prctl(_limits.PR_SET_DUMPABLE, 0)
    namespaced = namespaced and _limits.new_pid_namespace()
    os.write(tell, b"1" if namespaced else b"0")
    os.close(tell)
    processes = 0
    if _limits.LINUX:  # the worker's uid: as many tasks as it has now, and an allowance (RLIMIT_NPROC)
        uid = _limits.WORKER_UID if os.geteuid() == 0 else os.getuid()
        processes = _proctree.task_count(uid, os.getppid() if _limits.OWN_USERNS[0] else None) + _limits.PROCESS_ALLOWANCE
    pid = os.fork()
    if pid == 0:
        try:
            _nsinit(sock, namespaced, processes)
        finally:
            os._exit(0)
    sock.close()
    if not namespaced:
        _limits._prctl(_limits.PR_SET_CHILD_SUBREAPER, 1)
    code = _reap_until(pid)
    if not namespaced:
        _proctree.kill_tree(os.getpid(), include_root=False)
    os._exit(code)


class _ZygoteServer:  # pragma: no cover - runs in the zygote
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.workers: dict[int, int | None] = {}  # keeper pid -> status once reaped
        self.namespaces = self.read_only = False
        self.spare: tuple[int, socket.socket, int] | None = None
        self.want_spare = False
        self.tmp = ""  # the folder holding each worker's own temporary folder
        self.folders: dict[int, str] = {}  # keeper pid -> its worker's temporary folder
        self.dropped: set[int] = set()  # keepers the kit will not ask about: forgotten once reaped
        self.made = 0

    def run(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _isolate(self.sock.fileno())
        _limits._prctl(_limits.PR_SET_PDEATHSIG, signal.SIGKILL)
        _limits._prctl(_limits.PR_SET_DUMPABLE, 0)
        _limits._prctl(_limits.PR_SET_CHILD_SUBREAPER, 1)
        self.tmp = _worker_tmp()
        if _limits.LINUX and not os.environ.get("ATTN_KIT_NO_NAMESPACES"):  # set: test the fallback
            _limits.enter_user_namespace()
            self.read_only = _limits._read_only(_limits.protected_paths())
            _limits.no_network()
            self.namespaces = True  # tried per worker; each keeper reports whether it worked
        if _limits.LINUX:
            _confinement.prepare()  # once: every worker adds only its own rules
        self.spare = self._fork_worker()  # the first worker is ready before the kit asks
        try:
            self._serve()
        finally:
            self._kill_all()

    def _serve(self) -> None:  # noqa: C901 (the zygote's request loop; to split with the sandbox package)
        waiter = select.poll()
        waiter.register(self.sock, select.POLLIN | select.POLLHUP | select.POLLERR)
        while True:
            if os.getppid() == 1:  # the kit is gone (PDEATHSIG missed it)
                return
            if not waiter.poll(20 if self.want_spare else 200):
                self._reap()  # a dropped worker's folder goes once it has ended
                if self.want_spare and self.spare is None:
                    self.spare = self._fork_worker()
                self.want_spare = False
                if not self.namespaces:  # with namespaces nothing can be orphaned to the zygote
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
            elif request.startswith((b"kill ", b"drop ")):
                self._end(int(request[5:]), answer=request.startswith(b"kill "))

    def _end(self, pid: int, answer: bool) -> None:
        """Kill worker `pid`: "kill" answers its status once it is reaped, "drop" answers nothing
        and forgets the worker once it is reaped (its folder goes then)."""
        if pid in self.workers:
            self._kill(pid)
        if answer:
            self._answer(self._wait(pid))
        elif self.workers.get(pid, 0) is None:
            self.dropped.add(pid)
            self._reap()
        else:  # ended and reaped already, or not a worker at all
            self.workers.pop(pid, None)
        # a killed worker is usually followed by a restart: prepare one once the kit is quiet for
        # 20 ms (not at the end of a run, when "stop" follows at once)
        self.want_spare = self.spare is None

    def _kill(self, pid: int) -> None:
        """A worker's keeper: with a PID namespace, killing it kills the namespace (nsinit dies with
        its keeper, and the kernel kills everything in the namespace with nsinit)."""
        if self.namespaces:
            _proctree._signal(pid, signal.SIGKILL)
        else:
            _proctree.kill_tree(pid)

    def _answer(self, status: int) -> None:
        self.sock.sendall(status.to_bytes(8, "little", signed=True))

    def _fork_worker(self) -> tuple[int, socket.socket, int]:
        """Start keeper -> nsinit -> worker; the worker waits on its end of a new channel. The
        keeper writes one byte on a pipe: whether the worker has its own PID namespace."""
        a, b = socket.socketpair()
        told, tell = os.pipe()
        folder = self._new_folder()
        pid = os.fork()
        if pid == 0:
            try:
                _limits.WORKER_TMP[:] = [folder] if folder else []
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
        if folder:
            self.folders[pid] = folder
        return pid, a, told

    def _new_folder(self) -> str:
        """A fresh, empty temporary folder for the next worker (its nsinit mounts a tmpfs of the
        worker's on it, or, without a namespace, gives it to the worker)."""
        if not self.tmp:
            return ""
        self.made += 1
        folder = os.path.join(self.tmp, f"w{self.made}")
        try:  # Landlock does not cover chmod: a worker of the same uid may have taken the modes away
            os.chmod(self.tmp, 0o711 if os.geteuid() == 0 else 0o700)
            os.mkdir(folder, 0o700)
        except OSError:
            return ""
        return folder

    def _forget(self, pid: int) -> None:
        """The worker of keeper `pid` is gone: its temporary folder goes too, whatever is in it."""
        folder = self.folders.pop(pid, "")
        if folder:
            remove_tree(folder)

    def _spawn(self) -> None:
        """Hand the kit a worker: the one prepared ahead (its start costs the kit no wait) or a new one."""
        spare, self.spare = self.spare, None
        if spare is not None and self.workers.get(spare[0], 0) is not None:  # it died meanwhile
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
            self.namespaces = False  # from now on: /proc walks, orphan sweeps
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
                self._forget(pid)
                if pid in self.dropped:  # no one will ask: its pid may be reused by another process
                    self.dropped.discard(pid)
                    del self.workers[pid]

    def _wait(self, pid: int) -> int:
        if pid not in self.workers:
            return 0
        deadline = time.monotonic() + 2.0
        while True:
            self._reap()
            status = self.workers.get(pid)
            if status is not None:
                self.workers.pop(pid)
                return status
            if time.monotonic() > deadline:
                self._kill(pid)
                deadline = time.monotonic() + 2.0
            time.sleep(0.001)

    def _sweep(self) -> None:
        """Reap, and kill every process orphaned to the zygote (a double fork, a daemon); the
        spare worker is in self.workers, so it is not taken for an orphan."""
        self._reap()
        if not _limits.LINUX:
            return
        parents = _proctree._parents()
        me = os.getpid()
        for pid, ppid in parents.items():
            if ppid == me and pid not in self.workers:
                _proctree.kill_tree(pid)

    def _kill_all(self) -> None:
        """Kill every worker and reap each (1 s at most: the kit waits 2 s for the zygote to end),
        then remove the workers' folders."""
        for pid in list(self.workers):
            _proctree._signal(pid, signal.SIGKILL)
        if not self.namespaces:
            _proctree.kill_tree(os.getpid(), include_root=False)
        deadline = time.monotonic() + 1.0
        self._reap()
        while any(status is None for status in self.workers.values()) and time.monotonic() < deadline:
            time.sleep(0.001)
            self._reap()
        if self.tmp:
            remove_tree(self.tmp)


def share_with_worker(folder: str) -> None:
    """A folder of the kit's that the worker writes in (test-tests' records): run as root, the
    worker is WORKER_UID, so the folder becomes its. The kit only reads what is in it."""
    if _limits.LINUX and os.geteuid() == 0:
        try:
            os.chown(folder, _limits.WORKER_UID, _limits.WORKER_UID)
        except OSError:
            pass


def _worker_tmp() -> str:  # pragma: no cover - runs in the zygote
    """In the zygote: a fresh folder of the kit's user (searchable by WORKER_UID when that is root)
    that holds one temporary folder per worker (_ZygoteServer._new_folder)."""
    import tempfile

    try:
        folder = tempfile.mkdtemp(prefix="attn-kit-worker-")
        if os.geteuid() == 0:
            os.chmod(folder, 0o711)
    except OSError:
        return ""
    return folder


def remove_tree(path: str) -> None:
    """Remove a worker's folder whatever its code did to it: modes taken away (chmod 000) are given
    back first, on folders only and never through a link, and a second pass removes the rest."""
    import shutil

    for _ in range(3):
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            _unlock(path)


def _unlock(path: str, depth: int = 0) -> None:
    """u+rwx on the folder `path` and every folder below it, never following a link."""
    import stat

    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.chmod(f"/proc/self/fd/{fd}", 0o700)  # chmod through an O_PATH descriptor: this very folder
    except OSError:
        pass
    finally:
        os.close(fd)
    if depth > 64:
        return
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        try:
            if stat.S_ISDIR(entry.stat(follow_symlinks=False).st_mode):
                _unlock(entry.path, depth + 1)
        except OSError:
            continue


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


def _zygote_child(sock: socket.socket, warm: bool = True) -> None:  # pragma: no cover - runs in the child
    try:
        # the worker's module, imported here rather than by the kit: every worker inherits it,
        # and the kit's start-up does not wait for it (it runs beside the kit's own set-up)
        from attn_kit.runtime import worker  # noqa: F401

        _settle_torch()
        if warm and "torch" in sys.modules:
            _warm_torch()
        _ZygoteServer(sock).run()
    finally:
        os._exit(0)


COLD = "--cold"  # zygote_main's flag: no meta-device warm-up (a zygote for bench or test-tests)


def zygote_main(argv: list[str]) -> None:  # pragma: no cover - the exec'd zygote
    """`python -m attn_kit.sandbox.zygote FD [--cold] [module ...]`: a zygote started fresh (no
    memory of the kit's)."""
    fd = int(argv[0])
    warm = argv[1:2] != [COLD]
    for name in argv[1:] if warm else argv[2:]:
        try:
            __import__(name)
        except ImportError:
            pass
    _zygote_child(socket.socket(fileno=fd), warm)


class _Zygote:
    """The kit's handle on one zygote process."""

    def __init__(self, preload: tuple[str, ...] = (), warm: bool = True):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        one_blas_thread()  # before the zygote (or this process, when it forks one) imports NumPy
        if _is_clean():
            for name in preload:  # imported once here, so every worker starts with them
                try:
                    __import__(name)
                except ImportError:
                    pass
            _settle_torch()
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the child
                ours.close()
                _zygote_child(theirs, warm)
            self.process = None
        else:  # a fresh interpreter: nothing of the kit's memory
            _settle_torch()
            self.process = subprocess.Popen(
                [sys.executable, "-P", "-m", "attn_kit.sandbox.zygote", str(theirs.fileno()), *([] if warm else [COLD]), *preload],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
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
        except BaseException:  # Ctrl-C between a request and its answer: never reused
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
        return int.from_bytes(data[:8], "little"), _channel.Channel(socket.socket(fileno=fds[0]))

    def reap(self, pid: int, kill: bool = False) -> int:
        return int.from_bytes(self._request(b"%s %d" % (b"kill" if kill else b"wait", pid)), "little", signed=True)

    def drop(self, pid: int) -> None:
        """Have the zygote kill worker `pid` and reap it once it has ended, answering nothing."""
        if self.broken:
            raise OSError("the zygote process is out of step with the kit")
        self.sock.settimeout(CONTROL_DEADLINE)
        try:
            self.sock.sendall(b"drop %d" % pid)
        except OSError:
            self.broken = True
            raise
        finally:
            try:
                self.sock.settimeout(None)
            except OSError:
                pass

    def close(self):
        try:
            self.sock.sendall(b"stop")
        except OSError:
            pass
        if not _reaped_within(self.pid, 2.0):
            _proctree.kill_tree(self.pid)
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        self.sock.close()


def _reaped_within(pid: int, seconds: float) -> bool:
    """Wait at most `seconds` for the child `pid` to end, and reap it; whether it ended. Woken by
    its end (a pidfd, Linux 5.3+) where the kernel has them, else looking every 2 ms."""
    deadline = time.monotonic() + seconds
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd here, or no such process (reaped already)
        fd = -1
    try:
        while True:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return True
            if done:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if fd >= 0:
                waiter = select.poll()
                waiter.register(fd, select.POLLIN)
                waiter.poll(max(1, int(left * 1000)))
            else:
                time.sleep(min(0.002, left))
    finally:
        if fd >= 0:
            os.close(fd)


class _ForkLauncher:
    """Workers from a zygote; a zygote that stops answering is killed and replaced. `warm`: the
    zygote loads PyTorch's meta-device kernels when it has torch (make_launcher)."""

    def __init__(self, preload: tuple[str, ...] = (), warm: bool = True):
        _limits.harden_kit()
        self.preload = preload
        self.warm = warm
        self.zygote: _Zygote | None = _Zygote(preload, warm)
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
                raise OSError(f"the zygote process stopped answering and no new one could be started ({self.failure})") from None
            return self.zygote.spawn()

    def _replace(self):
        old, self.zygote = self.zygote, None
        if old is not None:
            _proctree.kill_tree(old.pid)
            old.close()
        self.replacements += 1
        try:
            self.zygote = _Zygote(self.preload, self.warm)
        except OSError as exc:
            self.failure = str(exc)

    def kill(self, pid):
        if self.zygote is not None and self.zygote.namespaced:
            _proctree._signal(pid, signal.SIGKILL)  # the keeper: its namespace dies with it
        else:
            _proctree.kill_tree(pid)

    def drop(self, pid) -> None:
        """A worker the kit has killed (kill) and whose status it does not need: reaped by the
        zygote once it has ended, without a wait for the answer (a Sandbox closing)."""
        if self.zygote is None:
            _proctree.kill_tree(pid)
            return
        try:
            self.zygote.drop(pid)
        except OSError:  # a zygote out of step is replaced when the next worker is asked for
            _proctree.kill_tree(pid)

    def status(self, pid, kill: bool = False) -> int | None:
        if self.zygote is None:
            _proctree.kill_tree(pid)
            return None
        try:
            return self.zygote.reap(pid, kill)
        except OSError:
            _proctree.kill_tree(pid)
            self._replace()
            return None

    def close(self):
        if self.zygote is not None:
            self.zygote.close()


class _SpawnLauncher:  # pragma: no cover - used where fork is missing
    def __init__(self, preload: tuple[str, ...] = ()):
        import multiprocessing  # only here: the fork path does not need it

        _settle_torch()  # the kit's side of torch's settings, as before a zygote starts
        self.context = multiprocessing.get_context("spawn")
        self.processes: dict[int, Any] = {}

    def start(self):
        ours, theirs = socket.socketpair()
        process = self.context.Process(target=_spawned, args=(theirs,), daemon=True)
        process.start()
        theirs.close()
        pid = process.pid
        assert pid is not None  # set by start()
        self.processes[pid] = process
        return pid, _channel.Channel(ours)

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


def _spawned(sock):  # pragma: no cover
    from attn_kit.runtime import worker

    worker.serve(_channel.Channel(sock))


# What every run imports, for the zygote to import once (each worker then starts with it): pytest's
# built-in plugins and what they load on configure (pdb, faulthandler), and the NumPy modules
# candidates' tests use (numpy.testing, numpy.random). Measured: a run on one implementation took
# 0.19 s without these in the zygote and 0.11 s with them.
PYTEST_PRELOAD = ("pytest", "attn_kit.runtime.pytest_harness", "pdb", "faulthandler", "numpy.random", "numpy.testing")


def pytest_modules() -> tuple[str, ...]:
    """The modules a test-grading zygote imports: PYTEST_PRELOAD and pytest's built-in plugins."""
    from _pytest.config import default_plugins

    return PYTEST_PRELOAD + tuple(f"_pytest.{plugin}" for plugin in default_plugins)


FORKS = hasattr(os, "fork") and hasattr(socket, "send_fds") and sys.platform != "win32"  # else: spawn


def make_launcher(preload: tuple[str, ...] = (), warm: bool = True):
    """A launcher whose zygote has `preload` imported (NumPy always, torch for torch exercises).

    With torch, a `warm` zygote also runs a few operations on the `meta` device, whose kernels
    PyTorch loads on first use (about a second, most of it importing torch._dynamo): the grading
    suites check device placement there in every run, and each worker would otherwise pay it. A
    bench or a test-tests run on code that never touches `meta` asks for a zygote without it."""
    if FORKS:
        return _ForkLauncher(("numpy", *preload), warm)
    return _SpawnLauncher(preload)


_SHARED: dict[tuple[tuple[str, ...], bool], _ForkLauncher] = {}


def shared_launcher(preload: tuple[str, ...] = (), warm: bool = True):
    """One launcher per preload set for the whole kit process, reused by every run in it (watch
    re-runs, mock re-grades, in-process tests): its zygote was forked while the process held no
    expected value (or started fresh), so reusing it is as safe as the first time, and later runs
    need no new interpreter. Closed when the process exits."""
    if not FORKS:
        return None
    key = (tuple(preload), warm)
    launcher = _SHARED.get(key)
    if launcher is None:
        if not _SHARED:
            import atexit

            atexit.register(close_shared)
        launcher = _SHARED[key] = _ForkLauncher(("numpy", *preload), warm)
    elif launcher.zygote is None or launcher.zygote.broken or not _zygote_alive(launcher.zygote.pid):
        launcher._replace()
    return launcher


def _zygote_alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == 0


def close_shared() -> None:
    """Close every shared launcher (their zygotes remove their workers' folders); at exit, or
    before a process ends with os._exit."""
    for launcher in _SHARED.values():
        try:
            launcher.close()
        except OSError:
            pass
    _SHARED.clear()


if __name__ == "__main__":  # pragma: no cover - the exec'd zygote
    zygote_main(sys.argv[1:])
