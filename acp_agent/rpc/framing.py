"""Newline-delimited JSON framing over byte streams.

:class:`LineReader` splits incoming bytes on ``\\n`` with a per-message size cap; a line
over the cap is discarded as it streams (memory stays bounded) and reported as
:class:`Oversized`, so the connection can answer with an error and carry on.
:class:`PipeWriter` writes whole lines to an asyncio write transport with back-pressure.
Both have file-descriptor constructors: :func:`open_stdio` for our own stdin/stdout (the
agent), :func:`open_child` for a subprocess's (a client driving an agent); and in-memory
twins for tests.
"""

from __future__ import annotations

import asyncio
import collections
import os
import stat
import sys
from typing import IO, Any, Protocol

DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
_HIGH_WATER = 256 * 1024  # bounds the backlog a cancel response waits behind
_BATCH = 64 * 1024  # lines written in one loop turn go out together, up to this much
_READ_QUEUE_PAUSE = 64


class Oversized:
    """A line that exceeded the size cap (its content was discarded)."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size


class LineSource(Protocol):
    async def readline(self) -> bytes | Oversized | None:
        """The next line without its terminator; ``None`` at end of input."""
        ...


class LineSink(Protocol):
    def write_line(self, line: bytes) -> None:
        """Queue one complete line (``line`` must already end with ``\\n``)."""
        ...

    async def drain(self) -> None: ...

    async def aclose(self, timeout: float = 1.0) -> None:
        """Flush what is buffered (complete lines only reach the peer) and close."""
        ...


class LineReader(asyncio.Protocol):
    """An asyncio protocol that turns a byte stream into lines."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self._max = max_bytes
        self._buf = bytearray()
        self._discarding = 0  # bytes dropped of the current oversized line
        self._lines: collections.deque[bytes | Oversized | None] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False
        self._eof = False

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.feed(data)

    def eof_received(self) -> bool | None:
        self.feed_eof()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.feed_eof()

    # -- feeding (also used directly by in-memory tests)
    def feed(self, data: bytes) -> None:
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                self._append(data[start:] if start else data)
                break
            self._append(data[start:nl])
            self._finish_line()
            start = nl + 1
        self._wake()
        if len(self._lines) > _READ_QUEUE_PAUSE and self._transport and not self._paused:
            self._paused = True
            self._transport.pause_reading()

    def _append(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self._discarding:
            self._discarding += len(chunk)
        elif len(self._buf) + len(chunk) > self._max:
            self._discarding = len(self._buf) + len(chunk)
            self._buf = bytearray()
        else:
            self._buf += chunk

    def _finish_line(self) -> None:
        if self._discarding:
            self._lines.append(Oversized(self._discarding))
            self._discarding = 0
            return
        line = bytes(self._buf)
        self._buf.clear()
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            self._lines.append(line)

    def stop(self) -> None:
        """End the input now (the process was told to stop): the whole lines already read
        are still served, a line not yet complete is dropped."""
        if not self._eof:
            self._buf.clear()
            self._discarding = 0
            self.feed_eof()

    def feed_eof(self) -> None:
        if self._eof:
            return
        self._eof = True
        if self._buf.strip() and not self._discarding:
            self._lines.append(bytes(self._buf))
        elif self._discarding:
            self._lines.append(Oversized(self._discarding))
        self._buf.clear()
        self._lines.append(None)
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def readline(self) -> bytes | Oversized | None:
        while not self._lines:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item = self._lines.popleft()
        if item is None:
            self._lines.appendleft(None)  # EOF is sticky
        elif self._paused and len(self._lines) < _READ_QUEUE_PAUSE // 2 and self._transport:
            self._paused = False
            self._transport.resume_reading()
        return item


class PipeWriter:
    """Writes lines to a pipe without blocking the event loop.

    Lines written during one turn of the event loop go out together, in one ``write``,
    when the loop turns (``call_soon``), or at once past :data:`_BATCH` bytes: a fast
    stream costs one system call per read from the model, not one per line, and no line
    waits longer than the code that wrote it. Bytes the pipe does not take at once wait
    in a buffer that the loop flushes when the pipe is writable; ``drain`` waits while
    that buffer is large (a slow reader). On close, what the peer has not read within
    the timeout is dropped, except the rest of the line that was cut mid-way: that is
    always written (blocking until the peer reads it or closes the pipe, however slow it
    is), so the peer only ever sees whole lines.
    """

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file  # keeps the descriptor open
        self._fd = fd = file.fileno()
        os.set_blocking(fd, False)
        self._loop = asyncio.get_running_loop()
        self._lines: list[bytes] = []  # written this loop turn, not yet handed to the pipe
        self._size = 0
        self._buf = bytearray()  # what the pipe refused; sent when it is writable
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._flushed = asyncio.Event()
        self._flushed.set()
        self._closed = False
        self._mid_line = False  # the peer has the start of a line, not yet its end

    def write_line(self, line: bytes) -> None:
        if self._closed:
            return
        if not self._lines:
            self._loop.call_soon(self._flush_lines)
        self._lines.append(line)
        self._size += len(line)
        if self._size >= _BATCH:
            self._flush_lines()

    def _flush_lines(self) -> None:
        if not self._lines:
            return
        data = self._lines[0] if len(self._lines) == 1 else b"".join(self._lines)
        self._lines.clear()
        self._size = 0
        if self._closed:
            return
        if not self._buf:
            try:
                n = os.write(self._fd, data)
            except BlockingIOError:
                n = 0
            except OSError:  # the reader went away (EPIPE)
                self._closed = True
                return
            if n == len(data):
                return
            self._mid_line = n > 0 and data[n - 1] != 0x0A
            self._buf += memoryview(data)[n:]
            self._flushed.clear()
            self._loop.add_writer(self._fd, self._on_writable)
        else:
            self._buf += data
        if len(self._buf) > _HIGH_WATER:
            self._can_write.clear()

    def _on_writable(self) -> None:
        try:
            n = os.write(self._fd, self._buf)
        except BlockingIOError:
            return
        except OSError:
            self._closed = True
            n = len(self._buf)
        if n:
            self._mid_line = self._buf[n - 1] != 0x0A
        del self._buf[:n]
        if len(self._buf) < _HIGH_WATER // 4:
            self._can_write.set()
        if not self._buf:
            self._loop.remove_writer(self._fd)
            self._flushed.set()

    async def drain(self) -> None:
        if not self._can_write.is_set():
            await self._can_write.wait()

    async def aclose(self, timeout: float = 1.0) -> None:
        self._flush_lines()
        if self._buf and not self._closed:
            try:
                await asyncio.wait_for(self._flushed.wait(), timeout)
            except TimeoutError:
                self._finish_cut_line()
        self._closed = True
        if self._buf:
            self._loop.remove_writer(self._fd)
            self._buf.clear()
        self._can_write.set()
        self._file.close()  # a child reading the other end sees end of input

    def _finish_cut_line(self) -> None:
        """Write up to the end of the line that is partly out: blocking, until the peer
        has taken it or has closed the pipe (no time limit: a busy peer is still a peer)."""
        if not self._mid_line:
            return
        rest = memoryview(bytes(self._buf[: self._buf.find(b"\n") + 1]))
        os.set_blocking(self._fd, True)
        try:
            while rest:
                rest = rest[os.write(self._fd, rest) :]
        except OSError:  # the peer closed the pipe: it sees no more lines at all
            pass


class FdWriter:
    """Blocking fallback for an fd that asyncio cannot watch (a regular file)."""

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file  # keeps the descriptor open
        self._fd = file.fileno()

    def write_line(self, line: bytes) -> None:
        view = memoryview(line)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    async def drain(self) -> None:
        return None

    async def aclose(self, timeout: float = 1.0) -> None:
        return None


def _pollable(fd: int) -> bool:
    """Pipes, sockets and terminals work with asyncio's pipe transports; files and
    devices such as /dev/null do not (epoll refuses them)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


async def open_stdio(max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> tuple[LineReader, LineSink]:
    """Wire stdin/stdout to a reader and a writer (pipes, sockets, ttys or files)."""
    loop = asyncio.get_running_loop()
    reader = LineReader(max_bytes)
    stdin = os.fdopen(os.dup(sys.stdin.fileno()), "rb", buffering=0)
    if _pollable(stdin.fileno()):
        await loop.connect_read_pipe(lambda: reader, stdin)
    else:  # a regular file or a device: read it in a thread

        def pump() -> None:
            while chunk := stdin.read(1 << 20):
                loop.call_soon_threadsafe(reader.feed, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)

        loop.run_in_executor(None, pump)
    stdout_fd = os.dup(sys.stdout.fileno())
    # Anything printed by accident now goes to stderr, never into the protocol stream.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    stdout = os.fdopen(stdout_fd, "wb", buffering=0)
    writer: LineSink = PipeWriter(stdout) if _pollable(stdout_fd) else FdWriter(stdout)
    return reader, writer


async def open_child(
    program: str, *args: str, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, **kwargs: Any
) -> tuple[asyncio.subprocess.Process, LineReader, PipeWriter]:
    """Start ``program`` with its stdin and stdout on new pipes, and wire our ends to a
    writer and a reader: the other side of :func:`open_stdio`. Other keyword arguments
    (``stderr``, ``env``, ``cwd``...) go to :func:`asyncio.create_subprocess_exec`.
    Closing the writer (``aclose``) ends the child's input."""
    child_stdin, to_child = os.pipe()  # (read end, write end); not inheritable: only
    from_child, child_stdout = os.pipe()  # the copies the child gets as fds 0 and 1 pass
    try:
        proc = await asyncio.create_subprocess_exec(
            program, *args, stdin=child_stdin, stdout=child_stdout, **kwargs
        )
    except BaseException:
        os.close(to_child)
        os.close(from_child)
        raise
    finally:  # the child has its own copies now
        os.close(child_stdin)
        os.close(child_stdout)
    reader = LineReader(max_bytes)
    await asyncio.get_running_loop().connect_read_pipe(
        lambda: reader, os.fdopen(from_child, "rb", buffering=0)
    )
    return proc, reader, PipeWriter(os.fdopen(to_child, "wb", buffering=0))


class MemoryPipe:
    """An in-memory line sink whose lines a :class:`LineReader` can read (tests)."""

    def __init__(self, reader: LineReader) -> None:
        self._reader = reader

    def write_line(self, line: bytes) -> None:
        self._reader.feed(line)

    async def drain(self) -> None:
        await asyncio.sleep(0)

    async def aclose(self, timeout: float = 1.0) -> None:
        self._reader.feed_eof()
