"""A command's output for the model: its head and its tail within a token budget, and
all of it in a file the model can read.

The model reads at most :data:`~.budget.COMMAND_MAX_TOKENS` (estimated:
:func:`~.budget.estimate_tokens`) of a command's output: the first lines and the last
(the first compiler error and the summary), with a marker between them. When something
was cut, the whole output is saved in the session's output directory (under the state
directory: ``outputs/<session id>/``) and the marker names the file, so the model can
``read_file`` or ``grep`` it instead of running the command again. Each file holds at
most :data:`MAX_FILE_BYTES`; the directory at most :data:`MAX_DIR_BYTES` (the oldest
files go first); it is removed with its session (``Store.delete``). Reading it asks no
permission (``ToolContext.outputs``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from dataclasses import dataclass
from typing import BinaryIO

from .budget import COMMAND_MAX_TOKENS, estimate_tokens, size

#: Bytes of the head and of the tail kept in memory (more than the token budget needs).
KEEP_BYTES = 64 * 1024
#: One saved output at most (the rest is not saved, and the marker says so).
MAX_FILE_BYTES = 64 * 1024 * 1024
#: A session's saved outputs at most, together.
MAX_DIR_BYTES = 256 * 1024 * 1024

_seq = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Captured:
    text: str
    """What the model reads."""
    cut: bool
    saved: str | None = None
    """The file holding all of it (when something was cut and it could be saved)."""


class Capture:
    """Collects a command's output (``feed``) into what the model reads (``finish``),
    saving all of it in ``directory`` once it is more than memory keeps."""

    def __init__(self, directory: str | None) -> None:
        self.directory = directory
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.dropped = False  # bytes between head and tail were let go
        self.path: str | None = None
        self._file: BinaryIO | None = None
        self._saved = 0
        self.save_problem: str | None = None

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self.total += len(data)
        self._save(data)
        room = KEEP_BYTES - len(self.head)
        if room > 0 and not self.tail:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > KEEP_BYTES:
                self._spill()
                del self.tail[: len(self.tail) - KEEP_BYTES]
                self.dropped = True

    def _spill(self) -> None:
        """Memory is about to let go of output: from now on all of it goes to a file."""
        if self._file is not None or self.directory is None or self.save_problem:
            return
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            _prune(self.directory)
            name = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{next(_seq)}.txt"
            self.path = os.path.join(self.directory, name)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            self._file = os.fdopen(fd, "wb")
        except OSError as exc:
            self.path = None
            self.save_problem = exc.strerror or str(exc)
            return
        written = self.head + self.tail  # everything so far: nothing was dropped yet
        self._saved = 0
        self._write(bytes(written))

    def _save(self, data: bytes) -> None:
        if self._file is not None:
            self._write(data)

    def _write(self, data: bytes) -> None:
        assert self._file is not None
        room = MAX_FILE_BYTES - self._saved
        try:
            self._file.write(data[:room])
        except OSError as exc:
            self.save_problem = exc.strerror or str(exc)
            self._close()
            return
        self._saved += min(len(data), room)

    def _close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def finish(self, *, lost_head: str | None = None) -> Captured:
        """What the model reads. ``lost_head``: the output's beginning never reached us
        (the editor's terminal dropped it), said at the top."""
        head, tail = bytes(self.head), bytes(self.tail)
        text = (head + tail).decode("utf-8", "replace")
        prefix = f"[{lost_head}]\n" if lost_head else ""
        if not self.dropped and estimate_tokens(text) <= COMMAND_MAX_TOKENS:
            self._close()
            return Captured(prefix + text, bool(lost_head))
        self._spill()  # cut: all of it is saved (already, if memory let some go)
        self._close()
        half = COMMAND_MAX_TOKENS // 2
        first = _lines_within(head.decode("utf-8", "replace"), half, from_end=False)
        last = _lines_within((head + tail if not self.dropped else tail)
                             .decode("utf-8", "replace"), half, from_end=True)  # fmt: skip
        omitted = self.total - len(first.encode()) - len(last.encode())
        return Captured(prefix + first + self._marker(omitted) + last, True, self.path)

    def _marker(self, omitted: int) -> str:
        what = f"[... {size(max(0, omitted))} of output omitted"
        if self.path is not None:
            kept = (f" (the first {size(MAX_FILE_BYTES)} of {size(self.total)})"
                    if self._saved < self.total else "")  # fmt: skip
            return (f"{what}. All of it{kept} is saved in {self.path}: read_file it with "
                    "offset/limit, or grep it.]\n")
        why = f" (it could not be saved: {self.save_problem})" if self.save_problem else ""
        return (f"{what}{why}. To see all of it, redirect the output to a file "
                "(`cmd > out.log 2>&1`) and read it in parts with read_file or grep.]\n")


def _lines_within(text: str, tokens: int, *, from_end: bool) -> str:
    """Whole lines from the start (or the end) of ``text`` within ``tokens``; a single
    line longer than that is cut."""
    lines = text.splitlines(keepends=True)
    if from_end:
        lines.reverse()
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = estimate_tokens(line)
        if used + cost > tokens:
            left = tokens - used
            if left > 50:  # a long line: the part of it that fits
                kept.append(_part(line, left, from_end))
            break
        kept.append(line)
        used += cost
    if from_end:
        kept.reverse()
    out = "".join(kept)
    return out if from_end or out.endswith("\n") or not out else out + "\n"


def _part(line: str, tokens: int, from_end: bool) -> str:
    """As much of ``line`` as fits ``tokens`` (its start, or its end)."""
    n = tokens * 4
    while n > 0:
        part = line[-n:] if from_end else line[:n]
        if estimate_tokens(part) <= tokens:
            return part
        n = n * 3 // 4
    return ""


def _prune(directory: str) -> None:
    """Delete the oldest saved outputs until the directory is below MAX_DIR_BYTES minus
    room for one more file."""
    entries: list[tuple[float, int, str]] = []
    with os.scandir(directory) as it:
        for entry in it:
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                entries.append((info.st_mtime, info.st_size, entry.path))
    total = sum(e[1] for e in entries)
    for _, length, path in sorted(entries):
        if total + MAX_FILE_BYTES <= MAX_DIR_BYTES:
            break
        with contextlib.suppress(OSError):
            os.unlink(path)
            total -= length
