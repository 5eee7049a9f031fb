"""Reading a text file the project (or the user's configuration) supplies, within bounds.

Every feature that feeds a file it did not write to the model, unasked, reads it through
:func:`read_project_text`: instruction files (``AGENTS.md``, ``CLAUDE.md``,
``.acp-agent/instructions.md``), prompt commands (``.acp-agent/commands/*.md``), Agent
Skills (``SKILL.md``, ``skills``: a user's in their skills directories), and anything of
the kind to come (nested instructions). A repository is not trusted:
``AGENTS.md -> ~/.ssh/id_rsa`` must not put the key into a request. So a file is read
only when what was actually opened lies inside one of the allowed places, symlinks
resolved (the descriptor's own path is checked, so a link swapped in between the check
and the read changes nothing); only regular files (never a FIFO, which would block, or
a device); at most ``max_bytes``; and only text (a NUL byte or bytes that are not UTF-8
are refused). A refusal is a value naming the file and why, for the caller to tell the
user (``engine.notices.notify``); it is never an exception.

An allowed place may be a directory (the file lies in it or below) or a file itself (the
file must be exactly that one: no link leads elsewhere), which is how a file found above
the session's roots (the repository's ``AGENTS.md`` for a session opened in a
subdirectory) is read only where it was found.
"""

from __future__ import annotations

import codecs
import fcntl
import os
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True, slots=True)
class ProjectText:
    """A file's text (``cut``: the file went on past ``max_bytes``)."""

    path: str
    text: str
    cut: bool = False


@dataclass(frozen=True, slots=True)
class Refused:
    """A file that was not read, and why (in words for the user)."""

    path: str
    reason: str


def _place(path: str) -> str:
    """An allowed place, resolved: a directory with its links; a file as itself (its
    directory's links resolved, never a link of its own)."""
    if os.path.isdir(path):
        return os.path.realpath(path)
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(os.path.realpath(directory), name)


def _inside(path: str, place: str) -> bool:
    """``path`` is ``place`` or lies below it (both absolute and real)."""
    return os.path.commonpath([path, place]) == place


def _opened_path(fd: int, fallback: str) -> str:
    """Where the open file really is: the kernel's path of the descriptor where the
    system says it (Linux, macOS); else the path resolved now, if it is still the same
    file (else the empty string: nowhere allowed)."""
    if sys.platform.startswith("linux"):
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    elif sys.platform == "darwin":
        try:
            raw = fcntl.fcntl(fd, 50, b"\0" * 1024)  # F_GETPATH
            return raw.split(b"\0", 1)[0].decode(errors="surrogateescape")
        except OSError:
            pass
    real = os.path.realpath(fallback)
    try:
        return real if os.path.samestat(os.fstat(fd), os.stat(real)) else ""
    except OSError:
        return ""


def read_project_text(
    path: str, allowed: Sequence[str], *, max_bytes: int = 256 * 1024
) -> ProjectText | Refused:
    """The text of ``path`` if it really lies in one of ``allowed`` (directories or
    files; resolved here), is a regular file and is text; at most ``max_bytes`` of it."""
    places = [_place(p) for p in allowed]

    def outside(real: str) -> Refused | None:
        if real and any(_inside(real, place) for place in places):
            return None
        where = real or "a file that changed while it was opened"
        return Refused(path, f"it leads to {where}, outside the session's roots")

    # Checked before opening (opening a device may do something), and again on what
    # was opened (a link may have been swapped in between).
    refused = outside(os.path.realpath(path))
    if refused is not None:
        return refused
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return Refused(path, "it is not a regular file")
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        return Refused(path, f"it cannot be read ({exc.strerror or exc})")
    try:
        refused = outside(_opened_path(fd, path))
        if refused is not None:
            return refused
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return Refused(path, "it is not a regular file")
        data = b""
        while len(data) <= max_bytes:
            try:
                chunk = os.read(fd, max_bytes + 1 - len(data))
            except BlockingIOError:  # pragma: no cover (regular files do not block)
                continue
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        return Refused(path, f"it cannot be read ({exc.strerror or exc})")
    finally:
        os.close(fd)
    cut = len(data) > max_bytes
    data = data[:max_bytes]
    if b"\0" in data:
        return Refused(path, "it is a binary file")
    try:  # a cut may fall inside a character: the incomplete end is dropped
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=not cut)
    except UnicodeDecodeError:
        return Refused(path, "it is not UTF-8 text")
    return ProjectText(path, text, cut)


def config_dir(env: Mapping[str, str]) -> str:
    """The user's own acp-agent configuration directory (``$XDG_CONFIG_HOME/acp-agent``),
    where their instructions, commands and skills live."""
    config_home = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config_home, "acp-agent")
