"""The store's disk writer: one thread that performs every write, ``fsync`` and index
update of the session logs, in the order they were asked for, so the event loop never
waits on the disk.

The loop side hands over work with :meth:`DiskWriter.submit` (never blocks) and can wait
for everything handed over so far: :meth:`DiskWriter.barrier` returns a future
(``await asyncio.wrap_future(...)`` on the loop, ``.result()`` in a worker thread).
Readers of the store in this process call :meth:`DiskWriter.wait` first, so they always
see what was written before them. The thread is started on first use and is a daemon:
the process's shutdown drains it (:meth:`DiskWriter.close`) before exiting.

Failures are the submitted function's business (:class:`LogFile` logs and remembers
them); an exception escaping one is logged and the thread goes on.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from . import log

_Job = tuple[Callable[..., Any], tuple[Any, ...]] | None


class DiskWriter:
    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the writer thread, after everything submitted before."""
        if self._thread is None:
            self._start()
        self._jobs.put((fn, args))

    def barrier(self) -> concurrent.futures.Future[None]:
        """A future done once everything submitted so far has run."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self._thread is None:
            done.set_result(None)
        else:
            self.submit(done.set_result, None)
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
            job = self._jobs.get()
            if job is None:
                return
            fn, args = job
            try:
                fn(*args)
            except Exception:
                log.exception("disk writer job failed")


class LogFile:
    """An owned (``flock``-ed), append-only log file, written by the writer thread only.

    Each record is one complete line written by ``os.write`` on an ``O_APPEND``
    descriptor; after a failed write the next record starts on a fresh line (the failed
    one is a torn line, skipped when the log is read). ``on_error`` hears of the first
    failure of each kind (``write``, ``sync``, ``index``) and of recovery (``None``).
    """

    def __init__(
        self, fd: int, name: str, on_error: Callable[[str, OSError | None], None] | None = None
    ) -> None:
        self.fd = fd
        self.name = name
        self.on_error = on_error
        self.failing: set[str] = set()
        self.written = False
        self._prefix = b""  # "\n" when the log ends in a torn line
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            self._prefix = b"\n"

    def write(self, data: bytes) -> None:
        if self.fd < 0:
            return
        if self._prefix:
            data, self._prefix = self._prefix + data, b""
        self.written = True
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError as exc:
            self._prefix = b"\n"  # whatever was written is a torn line: start afresh
            self._fail("write", exc)
        else:
            self._ok("write")

    def sync(self) -> None:
        if self.fd < 0:
            return
        try:
            os.fsync(self.fd)
        except OSError as exc:
            self._fail("sync", exc)
        else:
            self._ok("sync")

    def deleted(self) -> bool:
        """Whether the log was unlinked (by ``session/delete``, maybe in another process)."""
        return self.fd < 0 or os.fstat(self.fd).st_nlink == 0

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)  # releases the flock

    def _fail(self, what: str, exc: OSError) -> None:
        if what not in self.failing:
            self.failing.add(what)
            log.error(f"cannot {what} a session log", session_id=self.name, error=str(exc))
            if self.on_error is not None:
                self.on_error(what, exc)

    def _ok(self, what: str) -> None:
        if what in self.failing:
            self.failing.discard(what)
            log.warning(f"session log {what} works again", session_id=self.name)
            if not self.failing and self.on_error is not None:
                self.on_error(what, None)
