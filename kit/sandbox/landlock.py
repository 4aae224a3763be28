"""Linux's Landlock LSM through ctypes: the files, TCP ports, signals and abstract sockets a worker
may reach, applied by the worker itself, unprivileged, before the candidate's code runs.

A small binding of the three system calls (landlock_create_ruleset, landlock_add_rule,
landlock_restrict_self; numbers 444-446 on every architecture the kernel gives them one), with the
structures of the kernel's uapi header <linux/landlock.h>. Access rights the running kernel does
not know (an older ABI) are dropped from the ruleset, and `confine` says what was left out. A
domain, once entered, cannot be left or widened, also by root, and every process the worker starts
inherits it.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

LINUX = sys.platform.startswith("linux")

# syscall numbers: the same on x86_64, aarch64, riscv64, ... (the unified table); none on 32-bit ARM's old ABI
_SYSCALLS = {"create": 444, "add": 445, "restrict": 446}
_ARCHES = ("x86_64", "amd64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x", "loongarch64")

CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2

# filesystem rights, with the ABI version that introduced them
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
READ = FS_READ_FILE | FS_READ_DIR
READ_EXEC = READ | FS_EXECUTE
EVERYTHING = (1 << 16) - 1  # every filesystem right (masked down to the kernel's)
DEVICE = FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # packed in the uapi header: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _supported_arch() -> bool:
    return LINUX and platform.machine().lower() in _ARCHES


def abi() -> int:
    """The Landlock ABI version the running kernel offers (0: none, disabled, or not Linux)."""
    if not _supported_arch():
        return 0
    try:
        libc = _libc()
        libc.syscall.restype = ctypes.c_long
        version = libc.syscall(ctypes.c_long(_SYSCALLS["create"]), None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def fs_rights(version: int) -> int:
    """The filesystem rights a kernel of ABI `version` knows."""
    return _FS_BY_ABI.get(version, EVERYTHING) if version >= 1 else 0


def missing(version: int) -> list[str]:
    """What Landlock at ABI `version` leaves unconfined (the parts this kit asks for)."""
    gaps = []
    if version < 1:
        return ["files", "network", "signals"]
    if version < 4:
        gaps.append("TCP connections")
    if version < 6:
        gaps.append("signals and abstract sockets")
    return gaps


def _call(libc, name: str, *args) -> int:
    result = libc.syscall(ctypes.c_long(_SYSCALLS[name]), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock {name}: {os.strerror(err)}")
    return int(result)


def confine(rules: list[tuple[str, int]], version: int | None = None) -> list[str]:
    """Enter a Landlock domain where only `rules` (path, rights) reach the filesystem, no TCP port
    can be bound or connected to, and (ABI 6+) no signal or abstract unix socket reaches a process
    outside the domain. Paths that do not exist are skipped. PR_SET_NO_NEW_PRIVS must be set (or
    the process hold CAP_SYS_ADMIN). Returns the paths skipped; raises OSError when the
    domain could not be entered (then nothing was restricted)."""
    version = abi() if version is None else version
    if version < 1:
        raise OSError(0, "Landlock is not available in this kernel")
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    handled = fs_rights(version)
    attr = _RulesetAttr(handled, 0, 0)
    size = 8
    if version >= 4:
        attr.handled_access_net, size = NET_BIND_TCP | NET_CONNECT_TCP, 16
    if version >= 6:
        attr.scoped, size = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL, 24
    ruleset = _call(libc, "create", ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    skipped = []
    try:
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                skipped.append(path)
                continue
            try:
                allowed = rights & handled
                if not os.path.isdir(f"/proc/self/fd/{fd}"):  # a file takes only the rights of files
                    allowed &= FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
                beneath = _PathBeneathAttr(allowed, fd)
                _call(libc, "add", ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(beneath), ctypes.c_uint32(0))
            finally:
                os.close(fd)
        _call(libc, "restrict", ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return skipped
