"""Writing the kit's own files without following a symlink someone else planted.

The candidate's code may run as the user (where the kernel allows no namespaces) and so may plant
a symlink where the kit is about to write (a repro script, a mock report, the history database),
pointing into the kit's own installation: the next run would then execute what the kit wrote
there. The kit therefore writes a fresh file (O_EXCL, O_NOFOLLOW) in a folder it opened without
following a symlink and whose owner it checked, and renames it over the name: a symlink at that
name is replaced, never followed.
"""

from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path

from attn_kit.base.errors import UnsafePath

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# descriptor-relative open and rename (os.rename with dir_fd replaces the target on POSIX, as os.replace)
_AT = bool(_NOFOLLOW and _DIRECTORY and os.open in os.supports_dir_fd and os.rename in os.supports_dir_fd)


_LINK_FOLDER = "it is a symbolic link, and the kit writes only into real folders"
_OTHER_USER = "it belongs to another user, and the kit writes only into folders of yours"


def _owned(st: os.stat_result) -> bool:
    return not hasattr(os, "geteuid") or st.st_uid in (os.geteuid(), 0)


def check_folder(folder: str | Path) -> None:
    """UnsafePath unless `folder` is a real folder (not a symlink) owned by this user or root."""
    folder = str(folder)
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return
    if os.path.islink(folder):
        raise UnsafePath(errno.ELOOP, _LINK_FOLDER, folder)
    if not _owned(st):
        raise UnsafePath(errno.EPERM, _OTHER_USER, folder)


def check_file(path: str | Path) -> None:
    """UnsafePath when `path` exists as a symbolic link (the kit would write through it)."""
    if os.path.islink(str(path)):
        raise UnsafePath(errno.ELOOP, "it is a symbolic link, and the kit does not write through one", str(path))


def write_bytes(path: str | Path, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data`: a fresh file in its folder, renamed over the name."""
    folder, name = os.path.split(os.path.abspath(str(path)))
    if not _AT:
        check_folder(folder)  # no descriptor-relative calls (Windows): check, then write
        tmp = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
        with open(tmp, "xb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        return
    try:
        dfd = os.open(folder, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(errno.ELOOP, _LINK_FOLDER, folder) from None
        raise
    try:
        if not _owned(os.fstat(dfd)):
            raise UnsafePath(errno.EPERM, _OTHER_USER, folder)
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
    finally:
        os.close(dfd)


def write_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    write_bytes(path, text.encode(encoding))
