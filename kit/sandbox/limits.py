"""Linux process controls for the candidate's processes: prctl, leaving root (a separate uid and its
process limit), user, mount and PID namespaces, and the kit's files made read-only.
"""

from __future__ import annotations

import os
import sys

LINUX = sys.platform.startswith("linux")


# --- Linux process controls -----------------------------------------------------------------------

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS = 24, 28, 38
CLONE_NEWUSER, CLONE_NEWPID = 0x10000000, 0x20000000


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> bool:
    if not LINUX:
        return False
    try:
        return _libc().prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def harden_kit() -> None:
    """In the kit's process, before the first worker: its memory and environment cannot be read
    through /proc or ptrace by same-user processes without CAP_SYS_PTRACE (PR_SET_DUMPABLE=0)."""
    _prctl(PR_SET_DUMPABLE, 0)


WORKER_UID = 65534  # "nobody": the candidate's code runs as this uid when the kit runs as root
# processes and threads the worker's code may add (RLIMIT_NPROC, on top of those its uid already
# runs where the kernel counts them): no fork bomb; room for a thread per core in each of
# OpenBLAS and torch, and for a pool of processes
PROCESS_ALLOWANCE = 128 + 4 * (os.cpu_count() or 1)
CAP_DAC_READ_SEARCH = 2
PR_SET_KEEPCAPS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 8, 47, 2
SECBIT_NO_SETUID_FIXUP = 4
WORKER_TMP: list[str] = []  # the worker's own temporary folder (one per worker, made by the zygote)
ROOT_REFUSED = (
    "the kit runs as root and could not run your code as an unprivileged user ({why}); "
    "run attn-kit as an ordinary user, or in a container as its recipe in "
    "docs/threat-model.md shows"
)


def drop_privileges(leave_root: bool = False, processes: int = 0) -> str:  # noqa: C901 (one step per platform limit, each optional)
    """In a worker: no capability (effective, permitted, bounding), none regained by exec. With
    `leave_root`, when running as root: first become uid/gid WORKER_UID with no supplementary
    group, keeping only CAP_DAC_READ_SEARCH (read and search any file, as the user could: the
    solution, its folder, the interpreter; also across exec, as an ambient capability), so the
    candidate's code cannot write to the kit, the venv or the interpreter, which root owns.
    `processes` (the keeper's task_count plus PROCESS_ALLOWANCE): the RLIMIT_NPROC set, soft
    and hard, once the uid is the one the candidate's code runs as. Returns '' or why root could
    not be left."""
    if not LINUX:
        return ""
    why = ""
    keep = 0
    try:
        import ctypes

        libc = _libc()
        if leave_root and os.geteuid() == 0:
            try:
                libc.prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0)  # keep caps through setresuid
                os.setgroups([])
                os.setresgid(WORKER_UID, WORKER_UID, WORKER_UID)
                os.setresuid(WORKER_UID, WORKER_UID, WORKER_UID)
                keep = 1 << CAP_DAC_READ_SEARCH
            except OSError as exc:
                why = f"changing to uid {WORKER_UID} failed: {exc.strerror or exc}"
        if WORKER_TMP:  # the worker's own temporary folder, the one folder its code may write
            os.environ["TMPDIR"] = WORKER_TMP[0]
            import tempfile

            tempfile.tempdir = WORKER_TMP[0]
        if processes:
            _limit_processes(processes)
        for cap in range(64):
            if not keep >> cap & 1:
                libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        libc.prctl(PR_SET_SECUREBITS, 0x2F, 0, 0, 0)  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS off, locked
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)
        data = (ctypes.c_uint32 * 6)(keep, keep, keep)  # effective, permitted, inheritable (low 32 caps)
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


OWN_USERNS = [False]  # the zygote created a user namespace of its own (per-namespace counts)


def enter_user_namespace() -> bool:
    """In the zygote: a user namespace mapping only our uid/gid, so the zygote may create PID
    namespaces without privileges. Returns whether PID namespaces can now be created."""
    if not LINUX:
        return False
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:  # root creates namespaces without one, and its workers leave root (WORKER_UID)
        return True
    if libc.unshare(CLONE_NEWUSER) == 0:
        OWN_USERNS[0] = True
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
_LOCKED = (
    (2, MS_NOSUID),
    (4, MS_NODEV),
    (8, MS_NOEXEC),
    (1024, MS_NOATIME),
    (2048, MS_NODIRATIME),
    (4096, MS_RELATIME),
)  # statvfs f_flag bit -> mount flag a remount must keep


def protected_paths() -> list[str]:
    """The kit's installed files, the Python installation it runs on and the user's attn-kit data:
    read-only for the candidate's code where the kernel allows (a private mount namespace)."""
    import importlib.util

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # attn_kit/
    paths = {here, os.path.dirname(os.__file__)}  # the kit, the standard library
    paths.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    for name in ("checks", "solutions", "prompts"):
        if os.path.isdir(os.path.join(here, name)):  # an installed wheel nests them
            paths.add(os.path.join(here, name))
        else:
            try:
                spec = importlib.util.find_spec(f"attn_kit.{name}")
                if spec is not None:
                    paths.update(spec.submodule_search_locations or ())
            except (ImportError, AttributeError, ValueError):
                pass
    home = os.environ.get("ATTN_KIT_HOME")
    if not home and LINUX:  # platformdirs' answer on Linux
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
    if not LINUX:
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


def private_proc() -> bool:
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


TMP_OPTIONS = "size=256m,nr_inodes=65536"  # a worker's private temporary folder and /dev/shm


def private_tmp(folder: str, uid: int, gid: int) -> bool:
    """In nsinit, after private_proc (its own mount namespace): a fresh tmpfs on `folder`, owned by
    the worker's uid, mode 0700, and another on /dev/shm. Nothing another worker writes is there,
    and both vanish with the namespace, whatever the code left in them or did to their modes."""
    try:
        libc = _libc()
        flags = MS_NOSUID | MS_NODEV
        done = libc.mount(b"tmpfs", folder.encode(), b"tmpfs", flags, f"{TMP_OPTIONS},mode=0700,uid={uid},gid={gid}".encode()) == 0
        if os.path.isdir("/dev/shm"):
            libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", flags, f"{TMP_OPTIONS},mode=1777".encode())
        return done
    except (OSError, AttributeError):
        return False


CLONE_NEWNET = 0x40000000


def no_network() -> bool:
    """In the zygote: a network namespace of its own, with no interface but a loopback that is down,
    shared by its workers (so UDP and raw sockets reach nothing either; Landlock covers TCP)."""
    try:
        return _libc().unshare(CLONE_NEWNET) == 0
    except (OSError, AttributeError):
        return False


def new_pid_namespace() -> bool:
    if not LINUX:
        return False
    try:
        return _libc().unshare(CLONE_NEWPID) == 0
    except (OSError, AttributeError):
        return False
