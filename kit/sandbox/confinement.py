"""What the candidate's code may reach, applied with Landlock (landlock.py) in the worker just
before the candidate's file is loaded: the interpreter, the standard library and site-packages
(without the kit's checks, solutions and prompts, and without the user's attn-kit data), its own
submission, its own temporary folder (the one folder it may write), a few devices, and /proc. No TCP
port can be bound or connected to, and no signal or abstract socket reaches outside its run.

The list of readable system folders is computed once per zygote (`prepare`), so each worker only
opens and adds its rules. Where Landlock is missing (an old kernel, not Linux) or ATTN_KIT_NO_LANDLOCK
is set (the tests' way to take that path), `apply` says why in one line.
"""

from __future__ import annotations

import os
import sys

from attn_kit.sandbox import landlock

ENV_OFF = "ATTN_KIT_NO_LANDLOCK"  # set: behave as on a kernel without Landlock (tests)
# folders (os.pathsep-separated) the candidate's code may also write: the kit's own tests use it for
# the markers their hostile files leave; read from the kit's environment before the code runs
ENV_WRITABLE = "ATTN_KIT_ALSO_WRITABLE"
# policies: "require" refuses to run the file unconfined, "try" runs it with a one-line note
REQUIRE, TRY = "require", "try"
UNCONFINED = "Unconfined"  # the error type of a load refused because confinement failed

_SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin")
_ETC = ("ld.so.cache", "localtime", "passwd", "group", "nsswitch.conf", "hosts", "mime.types")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
_PROC_FILES = ("cpuinfo", "meminfo", "stat", "filesystems")
_PLAN: list[tuple[str, int]] = []  # the system rules, computed once (prepare)


def available() -> int:
    """The Landlock ABI the kit can use here (0: none, or switched off with ATTN_KIT_NO_LANDLOCK)."""
    if os.environ.get(ENV_OFF):
        return 0
    return landlock.abi()


def private_paths() -> list[str]:
    """The kit's checks, solutions and prompts (wherever an install put them) and the user's
    attn-kit data folder: never readable by the candidate's code."""
    import importlib.util

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # attn_kit/
    found = set()
    for name in ("checks", "solutions", "prompts"):
        found.add(os.path.join(here, name))
        try:
            spec = importlib.util.find_spec(f"attn_kit.{name}")
        except (ImportError, AttributeError, ValueError):
            spec = None
        if spec is not None:
            found.update(spec.submodule_search_locations or ())
    home = os.environ.get("ATTN_KIT_HOME") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "attn-kit"
    )
    found.add(os.path.expanduser(home))
    return sorted({os.path.realpath(p) for p in found if os.path.exists(p)})


def _roots() -> set[str]:
    """The folders Python and its libraries are loaded from."""
    roots = set(_SYSTEM)
    roots.update({sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix})
    prefixes = [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)]
    for entry in sys.path:  # library folders only: a PYTHONPATH of /tmp or of a home opens neither
        real = os.path.realpath(entry) if os.path.isabs(entry) else ""
        if real and (real.endswith(("site-packages", "dist-packages", ".zip")) or any(_beneath(real, p) for p in prefixes)):
            roots.add(real)
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # attn_kit itself
    for module in list(sys.modules.values()):  # wherever a loaded package lives (editable installs)
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and os.path.isabs(path) and "." not in getattr(module, "__name__", "."):
            roots.add(os.path.dirname(path) if path.endswith("__init__.py") else path)
    return {os.path.realpath(r) for r in roots if os.path.exists(r)}


def _beneath(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _expand(root: str, private: list[str], rights: int, out: dict[str, int], depth: int = 0) -> None:
    """`root` with `rights`, less every private folder under it: the folders on the way to a
    private one are taken entry by entry."""
    if any(_beneath(root, p) for p in private):
        return
    inside = [p for p in private if _beneath(p, root)]
    if not inside or not os.path.isdir(root) or depth > 12:
        out[root] = out.get(root, 0) | rights
        return
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        _expand(_real(entry), private, rights, out, depth + 1)


def _real(entry: os.DirEntry) -> str:
    """The real path of an entry of a folder whose own path is real: itself unless it is a link
    (which scandir tells without a system call; realpath would lstat every part of the path)."""
    try:
        plain = not entry.is_symlink()
    except OSError:
        plain = False
    return entry.path if plain else os.path.realpath(entry.path)


def prepare() -> None:
    """In the zygote, once: the system rules every worker gets (reads of the interpreter, the
    standard library, site-packages and the kit, less its private folders)."""
    private = private_paths()
    rules: dict[str, int] = {}
    for root in sorted(_roots()):
        _expand(root, private, landlock.READ_EXEC, rules)
    for name in _ETC:
        rules[f"/etc/{name}"] = landlock.FS_READ_FILE
    for device in _DEVICES:
        rules[device] = landlock.DEVICE
    for folder in ("/sys/devices/system/cpu", "/sys/fs/cgroup"):
        rules[folder] = landlock.READ
    kept: list[tuple[str, int]] = []
    for path, rights in sorted(rules.items()):  # a rule beneath a folder already allowed adds nothing
        if not any(_beneath(path, folder) and rights & ~wide == 0 for folder, wide in kept):
            kept.append((path, rights))
    _PLAN[:] = kept


def rules_for(
    path: str, reads: tuple[str, ...], tmp: str, private_proc: bool, self_peak: bool, writes: tuple[str, ...] = ()
) -> list[tuple[str, int]]:
    """Every rule of one worker: the system's, the submission's (`path` and `reads`, readable), its
    temporary folder (everything), /proc (all of it where it is the worker's own namespace's, else
    the worker's own entry), /dev/shm where it is private, and, for `self_peak` (bench), the right
    to reset its own peak memory in /proc/self/clear_refs."""
    if not _PLAN:
        prepare()
    rules = list(_PLAN)
    home = os.path.realpath(os.path.expanduser("~"))
    shared = {os.path.realpath(p) for p in ("/tmp", "/var/tmp", "/dev/shm")}
    for item in (path, *reads):  # the kit's choice: `attn-kit dev check` grades its own references
        real = os.path.realpath(item)
        if os.path.isdir(real) and (_beneath(home, real) or real in shared):  # a file kept in the home or /tmp
            continue  # itself: the file alone, not everything beside it
        rules.append((real, landlock.READ if os.path.isdir(real) else landlock.FS_READ_FILE))
    for folder in (tmp, *writes):
        if folder:
            rules.append((folder, landlock.EVERYTHING))
    if private_proc:
        rules.append(("/proc", landlock.READ))
        rules.append(("/dev/shm", landlock.EVERYTHING))
    else:
        rules.append((f"/proc/{os.getpid()}", landlock.READ))
        rules.extend((f"/proc/{name}", landlock.FS_READ_FILE) for name in _PROC_FILES)
    if self_peak:
        rules.append((f"/proc/{os.getpid()}/clear_refs", landlock.FS_WRITE_FILE | landlock.FS_TRUNCATE))  # open(..., "w") truncates
    return rules


def apply(
    path: str, reads: tuple[str, ...], tmp: str, private_proc: bool, self_peak: bool = False, writes: tuple[str, ...] = ()
) -> tuple[bool, str]:
    """In the worker, just before the candidate's file runs: (confined, note). The note is '' when
    everything is confined, else one line saying what is not."""
    version = available()
    if version < 1:
        why = "switched off" if os.environ.get(ENV_OFF) else "Landlock is not available on this system"
        return False, f"confinement not applied ({why}): the code can read every file you can and use the network"
    writes = (*writes, *(p for p in os.environ.get(ENV_WRITABLE, "").split(os.pathsep) if p))
    try:
        landlock.confine(rules_for(path, reads, tmp, private_proc, self_peak, writes), version)
    except OSError as exc:
        return False, f"confinement not applied (Landlock failed: {exc.strerror or exc}): the code can read every file you can"
    gaps = landlock.missing(version)
    if gaps:
        return True, f"confinement partial (Landlock ABI {version}): {' and '.join(gaps)} are not confined"
    return True, ""
