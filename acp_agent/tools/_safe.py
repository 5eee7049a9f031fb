"""Opening a checked path without following a symlink that appeared since the check.

The permission policy judges each path once, symlinks resolved (``ToolContext.check``).
Between that check and the operation a directory or the file itself may be swapped for
a symlink (to ``~/.ssh``, say). :func:`open_checked` opens the checked path's parent
directory, verifies through the descriptor that it *is* the checked directory, and opens
the last component relative to it with ``O_NOFOLLOW``: the operation touches what was
checked, or nothing.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys

from ..errors import ToolError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _fd_path(fd: int) -> str | None:
    """The path the kernel has for an open descriptor (``None`` when it cannot say)."""
    if sys.platform.startswith("linux"):
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
    if sys.platform == "darwin":
        try:
            raw = fcntl.fcntl(fd, 50, b"\0" * 1024)  # F_GETPATH
        except OSError:
            return None
        return raw.split(b"\0", 1)[0].decode(errors="surrogateescape")
    return None


def open_checked(real: str, flags: int, mode: int = 0o644) -> int:
    """Open ``real`` (an absolute path with no symlinks, as checked); raises
    ``FileNotFoundError``/``IsADirectoryError``/``OSError`` like ``os.open``, and
    :class:`ToolError` when the path is no longer what was checked."""
    parent, name = os.path.split(real)
    dfd = os.open(parent or os.sep, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        where = _fd_path(dfd)
        if where is None:  # no kernel path: the directory must still be the one named
            where = parent if os.path.samestat(os.fstat(dfd), os.stat(parent)) else None
        if where != parent:
            raise ToolError(
                f"{parent} changed since it was checked (now {where or 'elsewhere'}); "
                "nothing was touched"
            )
        try:
            return os.open(name, flags | _NOFOLLOW | _CLOEXEC, mode, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ToolError(
                    f"{real} became a symbolic link since it was checked; nothing was touched"
                ) from None
            raise
    finally:
        os.close(dfd)


def read_checked(real: str, limit: int | None = None) -> bytes:
    """The file's bytes (at most ``limit``)."""
    fd = open_checked(real, os.O_RDONLY)
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", real)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read() if limit is None else fh.read(limit)
    finally:
        os.close(fd)


def write_checked(real: str, data: bytes) -> None:
    """Replace the file's content (creating it, 0644 before the umask)."""
    fd = open_checked(real, os.O_WRONLY | os.O_CREAT)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"{real} is not a regular file")
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def unlink_checked(real: str) -> None:
    """Remove the file at ``real`` (as checked): through its verified parent directory,
    so a directory swapped for a link since the check removes nothing elsewhere."""
    parent, name = os.path.split(real)
    dfd = os.open(parent or os.sep, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        where = _fd_path(dfd)
        if where is None:
            where = parent if os.path.samestat(os.fstat(dfd), os.stat(parent)) else None
        if where != parent:
            raise ToolError(f"{parent} changed since it was checked; nothing was removed")
        if stat.S_ISDIR(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", real)
        os.unlink(name, dir_fd=dfd)
    finally:
        os.close(dfd)
