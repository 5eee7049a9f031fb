"""The open, owned log of one session, as the event loop sees it (:class:`SessionLog`):
records appended, message chunks coalesced, ``fsync`` at turn boundaries, the meta file
kept in step; every disk operation handed to the store's writer thread
(:mod:`.diskwriter`). The store (:mod:`.store`) opens and creates these.

Message and thought chunks are coalesced per ``messageId`` in memory and written as one
record when the message ends, before any other record, and while it streams at least
every :data:`FLUSH_INTERVAL` (50 ms) or :data:`FLUSH_CHARS` (4,096 characters), whichever
comes first: never a write per chunk, and a SIGKILL loses at most that much of a reply.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias

import msgspec

from ..protocol import UNSET
from ..protocol import types as t
from .diskwriter import LogFile
from .records import Meta, MetaFold, Record, Update, encode

if TYPE_CHECKING:
    from .store import Store

#: Buffered chunks are written at least this often (seconds) ...
FLUSH_INTERVAL = 0.05
#: ... or once this many characters are buffered, whichever comes first.
FLUSH_CHARS = 4096

_Chunk: TypeAlias = t.AgentMessageChunk | t.AgentThoughtChunk


class SessionLog:
    """The open, owned (``flock``-ed) log of one session, as the event loop sees it.

    Every write, ``fsync`` and index update is handed to the store's
    :class:`~acp_agent.sessions.diskwriter.DiskWriter` thread and never blocks the caller.
    Errors writing are logged, never raised: a full disk must not break the
    conversation. What was not written waits in memory and goes out once writing works
    again (:class:`~acp_agent.sessions.diskwriter.LogFile`); :meth:`watch` hears of both.
    """

    def __init__(self, store: Store, fd: int | None, meta: Meta, path: str | None = None) -> None:
        self.store = store
        self.meta = meta
        self._file = LogFile(fd, meta.id, self._failed, path=path)
        self._loop: asyncio.AbstractEventLoop | None = _running_loop()
        self._open = True
        self._chunk_type: type[_Chunk] | None = None
        self._chunk_id: str | None = None
        self._texts: list[str] = []
        self._size = 0
        self._timer: asyncio.TimerHandle | None = None
        self._lock = threading.Lock()
        self._handler: Callable[[OSError | None], None] | None = None
        self._problem: OSError | None = None

    def watch(self, handler: Callable[[OSError | None], None]) -> None:
        """Call ``handler(error)`` on this event loop when saving fails, and
        ``handler(None)`` when it works again; at once if it is failing already."""
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._handler = handler
            problem = self._problem
        if problem is not None:
            self._loop.call_soon(handler, problem)

    def append(self, record: Record) -> None:
        if self._texts:
            self.flush()
        self._write(encode(record))

    def extend(self, records: Sequence[Record]) -> None:
        """Append many records with one write (forks copy their history this way)."""
        if self._texts:
            self.flush()
        self._write(b"".join(encode(r) for r in records))

    def chunk(self, update: _Chunk) -> None:
        """Buffer a message or thought chunk; consecutive chunks of one message coalesce."""
        content = update.content
        if (
            type(content) is not t.TextContent
            or content.annotations is not UNSET
            or update.meta is not UNSET
            or not isinstance(update.message_id, str)
        ):
            self.append(Update(update=update))
            return
        if self._texts and type(update) is self._chunk_type and update.message_id == self._chunk_id:
            self._texts.append(content.text)
            self._size += len(content.text)
            if self._size >= FLUSH_CHARS:
                self.flush()
            return
        if self._texts:
            self.flush()
        self._chunk_type, self._chunk_id = type(update), update.message_id
        self._texts = [content.text]
        self._size = len(content.text)
        loop = self._loop or _running_loop()
        if loop is not None:  # no loop (a synchronous caller): flushed by the next record
            self._loop = loop
            self._timer = loop.call_later(FLUSH_INTERVAL, self.flush)

    def flush(self) -> None:
        """Hand the buffered chunks to the writer as one record."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._texts or self._chunk_type is None:
            return
        text, self._texts = "".join(self._texts), []
        chunk = self._chunk_type(content=t.TextContent(text=text), message_id=self._chunk_id)
        self._write(encode(Update(update=chunk)))

    def sync(self) -> concurrent.futures.Future[None]:
        """Flush and ``fsync``: everything so far survives a power cut once the returned
        future is done."""
        self.flush()
        if self._open:
            self.store.writer.submit(self._file.sync)
        return self.store.writer.barrier()

    async def durable(self) -> None:
        """:meth:`sync`, awaited without blocking the loop."""
        await asyncio.wrap_future(self.sync())

    def touch(self, **changes: object) -> None:
        """Update the index entry (``title``, ``updated_at``, ``cwd``, ...) and store it
        (appended to the meta file: ``Store.refresh_meta``)."""
        for name, value in changes.items():
            setattr(self.meta, name, value)
        if self._open:
            self.store.writer.submit(self._write_meta, msgspec.structs.replace(self.meta))

    def amend(self, record: Record) -> None:
        """Append a record that changes what the meta file shows (``ClientTitle``,
        ``Archived``) and rewrite the meta file; nothing if it changes nothing there."""
        fold = MetaFold(self.meta.id)
        fold.meta = msgspec.structs.replace(self.meta)
        fold.feed(record)
        if fold.meta != self.meta:
            self.append(record)
            self.meta = fold.meta
            self.touch()

    def _write_meta(self, meta: Meta) -> None:
        try:
            if self._file.deleted():
                return  # deleted (by session/delete, maybe in another process): stay gone
            self.store.refresh_meta(meta)
        except OSError as exc:
            self._file.failed("index", exc)
        else:
            self._file.succeeded("index")

    def close(self) -> None:
        if not self._open:
            return
        self.flush()
        self._open = False
        self.store.writer.submit(self._finish, msgspec.structs.replace(self.meta))

    def _finish(self, meta: Meta) -> None:
        if self._file.written:  # a log only read (load, close) stays untouched
            self._file.sync()
            self._write_meta(meta)
        self._file.close()

    def _write(self, data: bytes) -> None:
        if self._open:
            self.store.writer.submit(self._file.write, data)

    def _failed(self, what: str, exc: OSError | None) -> None:
        """On the writer thread: remember, and pass the news to the loop."""
        with self._lock:
            self._problem = exc
            handler, loop = self._handler, self._loop
        if handler is not None and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(handler, exc)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
