"""The store's disk writer: one thread that performs every write, ``fsync`` and index
update of the session logs, in the order they were asked for, so the event loop never
waits on the disk.

The loop side hands over work with :meth:`DiskWriter.submit` (never blocks) and can wait
for everything handed over so far: :meth:`DiskWriter.barrier` returns a future
(``await asyncio.wrap_future(...)`` on the loop, ``.result()`` in a worker thread).
What the event loop submits in one turn of the loop reaches the thread as one batch at
its end (a barrier hands it over at once), and consecutive writes to one log in a batch
are one ``write``: a prompt's records, its turn end, the meta entry and the ``fsync``
wake the thread once or twice, not once each (every wake-up is a switch of threads and
of the GIL: a sixth of a prompt's CPU here before).
Readers of the store in this process call :meth:`DiskWriter.wait` first, so they always
see what was written before them. The thread is started on first use and is a daemon:
the process's shutdown drains it (:meth:`DiskWriter.close`) before exiting.

Failures are the submitted function's business (:class:`LogFile` logs and remembers
them); an exception escaping one is logged and the thread goes on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import fcntl
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from .. import log

_Job = tuple[Callable[..., Any], tuple[Any, ...]]


class DiskWriter:
    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[list[_Job] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending: list[_Job] = []
        """Submitted, not handed to the thread yet (under ``_lock``)."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the writer thread, after everything submitted before
        (from the event loop: handed over at the end of this turn of the loop)."""
        if self._thread is None:
            self._start()
        with self._lock:
            self._pending.append((fn, args))
            first = len(self._pending) == 1
        if first:
            loop = asyncio._get_running_loop()
            if loop is None:
                self._hand_over()
            else:
                loop.call_soon(self._hand_over)

    def _hand_over(self) -> None:
        with self._lock:
            jobs, self._pending = self._pending, []
        if jobs:
            self._jobs.put(jobs)

    def barrier(self) -> concurrent.futures.Future[None]:
        """A future done once everything submitted so far has run."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self._thread is None:
            done.set_result(None)
        else:
            self.submit(_settle, done)
            self._hand_over()  # now: whoever waits may be blocking the loop
        return done

    def wait(self, timeout: float | None = None) -> None:
        """Block until everything submitted so far has run (not on the event loop)."""
        if self._thread is not None and threading.current_thread() is not self._thread:
            self.barrier().result(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Run what is queued, then stop the thread (blocking, bounded)."""
        thread = self._thread
        if thread is None:
            return
        self._hand_over()
        self._jobs.put(None)
        thread.join(timeout)
        self._thread = None

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="acp-agent-disk", daemon=True)
                thread.start()
                self._thread = thread

    def _run(self) -> None:
        while True:
            jobs = self._jobs.get()
            if jobs is None:
                return
            for fn, args in _joined(jobs):
                try:
                    fn(*args)
                except Exception:
                    log.exception("disk writer job failed")


def _joined(jobs: list[_Job]) -> list[_Job]:
    """``jobs`` with each run of writes to one log made one write."""
    out: list[_Job] = []
    run: list[bytes] = []  # the data of the run of writes ending ``out``
    for fn, args in jobs:
        if run and out[-1][0] == fn:
            run.append(args[0])
            continue
        if len(run) > 1:
            out[-1] = (out[-1][0], (b"".join(run),))
        run = [args[0]] if getattr(fn, "__func__", None) is LogFile.write else []
        out.append((fn, args))
    if len(run) > 1:
        out[-1] = (out[-1][0], (b"".join(run),))
    return out


#: Bytes kept in memory while a log cannot be written (a full disk); past this the
#: session is no longer saved, and says so. A healthy log takes a batch of any size.
MAX_PENDING = 64 * 1024 * 1024


class LogFile:
    """An owned (``flock``-ed), append-only log file, used by the writer thread only.

    Each record is one complete line written by ``os.write`` on an ``O_APPEND``
    descriptor. When the disk refuses (full, read-only, gone), the records wait in memory
    and every later write tries again with all of them, in order; a line cut by a failed
    write is left behind as a torn line (skipped when read) and written again whole. A
    log that could not even be created (``fd=None`` with a ``path``) is created by the
    first write that succeeds. ``on_error(what, exc)`` hears when writing starts failing
    (``what`` is ``write``, ``sync`` or ``index``) and when it all works again
    (``exc=None``).
    """

    def __init__(
        self,
        fd: int | None,
        name: str,
        on_error: Callable[[str, OSError | None], None] | None = None,
        *,
        path: str | None = None,
    ) -> None:
        self.fd = -1 if fd is None else fd
        self.name = name
        self.path = path
        self.on_error = on_error
        self.failing: set[str] = set()
        self.written = False
        self.closed = False
        self.lost = False
        self._pending = bytearray()
        self._torn = False  # the file ends in a cut line: the next record starts afresh
        if fd is not None:
            size = os.fstat(fd).st_size
            self._torn = bool(size) and os.pread(fd, 1, size - 1) != b"\n"

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if self._pending and len(self._pending) + len(data) > MAX_PENDING:
            # the cap bounds what piles up while writing fails; what arrives while the
            # log is healthy is written however large (one loop turn's batch may be)
            if not self.lost:
                self.lost = True
                lost = OSError(errno.EFBIG, "too much unsaved; no longer saved")
                if "write" in self.failing:  # said already that writing fails: now say this
                    log.error("a session log is no longer saved", session_id=self.name,
                              error=str(lost))  # fmt: skip
                self.failed("write", lost)
            return
        self._pending += data
        self._flush()

    def _flush(self) -> None:
        if not self._pending or self.lost:
            return
        try:
            self._ensure_open()
            if self._torn:
                self._pending[:0] = b"\n"
                self._torn = False
            view = memoryview(self._pending)
            written = 0
            try:
                while written < len(view):
                    written += os.write(self.fd, view[written:])
            finally:
                view.release()
                if written and written < len(self._pending):
                    self._torn = True  # a cut line: the whole pending data goes again
                    if self._pending[:1] == b"\n":
                        del self._pending[:1]
        except OSError as exc:
            self.failed("write", exc)
            return
        self._pending.clear()
        self.written = True
        self.succeeded("write")

    def _ensure_open(self) -> None:
        if self.fd >= 0 or self.path is None:
            if self.fd < 0:
                raise OSError(errno.EBADF, "the log is not open")
            return
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise
        self.fd = fd

    def sync(self) -> None:
        self._flush()
        if self.fd < 0 or self._pending:
            return
        try:
            os.fsync(self.fd)
        except OSError as exc:
            self.failed("sync", exc)
        else:
            self.succeeded("sync")

    def deleted(self) -> bool:
        """Whether the log was unlinked (by ``session/delete``, maybe in another process)."""
        return self.fd >= 0 and os.fstat(self.fd).st_nlink == 0

    @property
    def saved(self) -> bool:
        """Whether everything written so far is in the file."""
        return self.fd >= 0 and not self._pending and not self.lost

    def close(self) -> None:
        self._flush()
        self.closed = True
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)  # releases the flock

    def failed(self, what: str, exc: OSError) -> None:
        if what not in self.failing:
            first = not self.failing
            self.failing.add(what)
            log.error(f"cannot {what} a session log", session_id=self.name, error=str(exc))
            if first and self.on_error is not None:
                self.on_error(what, exc)

    def succeeded(self, what: str) -> None:
        if what in self.failing:
            self.failing.discard(what)
            log.warning(f"session log {what} works again", session_id=self.name)
            if not self.failing and self.on_error is not None:
                self.on_error(what, None)


def _settle(done: concurrent.futures.Future[None]) -> None:
    """A barrier reached: done, unless whoever waited for it gave up (a cancelled wait)."""
    if done.set_running_or_notify_cancel():
        done.set_result(None)
