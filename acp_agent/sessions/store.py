"""Durable sessions: one append-only JSON-lines log per session, plus a small index entry.

Layout under ``<state>/sessions/``::

    <id>.jsonl       the log: a header, then one record per line, appended as events happen
    <id>.meta.json   what ``session/list`` shows (cwd, roots, title, updatedAt): written
                     atomically (temp file + ``os.replace``), then the entry as it stands
                     appended as a line when a turn ends (the last line that decodes is
                     the entry; past ``META_APPEND_LIMIT`` bytes the file is written
                     anew); derived from the log when missing (a session never
                     prompted, a crash)

Crash safety: every record is one complete line written by a single ``os.write`` on an
``O_APPEND`` descriptor, so a process killed at any instant loses at most the line being
written. A torn or undecodable line is skipped, with a warning, when a log is read; the
next writer starts on a fresh line. Logs are ``fsync``'ed at turn boundaries (the
prompt's response waits for it). Reading never rewrites or truncates a log. All of this
disk work runs on one writer thread (:mod:`.diskwriter`), never on the event loop.

Several agent processes may share the directory. A process writing a session holds an
exclusive ``flock`` on its log for as long as the session is open; other processes can
still list and read (replay) it, but :meth:`Store.open` hands them no writer.

Listing reads an index (:mod:`.sessionindex`, given by ``registry``) when the store has
one: it is told of every change here (a log created, a meta file replaced, a session
deleted) and rebuilt from the directory whenever it may be wrong. Reading streams: a log
is decoded a block at a time (:func:`~acp_agent.sessions.records.read_records`), never whole.

An open session writes through its :class:`~acp_agent.sessions.sessionlog.SessionLog` (chunks
coalesced, see there). A session no process has open is changed by :meth:`Store.amend`
(one record appended, ``fsync``-ed, and its meta file replaced, before it returns):
``session/set_title``, ``archive``, ``unarchive``.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from typing import Literal, Protocol, TypeVar

import msgspec

from .diskwriter import DiskWriter
from .ids import valid_id
from .records import (
    Header,
    Meta,
    MetaFold,
    Record,
    Settings,
    bulk,
    decode_meta,
    encode,
    encode_meta,
    meta_of,
    read_records,
)
from .sessionlog import FLUSH_CHARS, FLUSH_INTERVAL, SessionLog

__all__ = [
    "FLUSH_CHARS",
    "FLUSH_INTERVAL",
    "ArchiveFilter",
    "Index",
    "SessionLog",
    "Snapshot",
    "Store",
]

PAGE_SIZE = 50
#: A meta file larger than this (bytes) is written anew rather than appended to.
META_APPEND_LIMIT = 16 * 1024
ArchiveFilter = Literal["exclude", "include", "only"]
"""Which sessions a listing shows: not archived (the default), all, archived only."""

T = TypeVar("T")


# --------------------------------------------------------------------------- the store


class Index(Protocol):
    """What the store needs of an index of its sessions (:mod:`.sessionindex`)."""

    def change(self, session_id: str, apply: Callable[[], None], meta: Meta | None) -> None:
        """Run the store's change ``apply`` to a session; ``meta``: its entry after."""
        ...

    def refresh(self, meta: Meta) -> None:
        """A session's meta file had ``meta`` appended (its directory is unchanged)."""
        ...

    def page(
        self, cwd: str | None, after: tuple[str, str] | None, limit: int, archived: ArchiveFilter
    ) -> list[Meta] | None:
        """Entries newest first after ``after``; ``None``: unusable, scan instead."""
        ...


class Snapshot:
    """A log as it stood when opened: its records can be read again, the same ones, until
    :meth:`close` (the descriptor keeps a deleted log readable)."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path
        self.size = os.fstat(fd).st_size

    def records(self) -> Iterator[Record]:
        return read_records(self.fd, self.path, self.size)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Store:
    """The sessions directory. Its blocking methods (``create``, ``open``, ``read``,
    ``page``, ``delete``) are for worker threads (``asyncio.to_thread``); they first wait
    for the :attr:`writer`, so they see every write made before them."""

    def __init__(self, state_dir: str, index: Index | None = None) -> None:
        self.root = os.path.join(state_dir, "sessions")
        self.writer = DiskWriter()
        self.index = index
        self._ready = False

    def _change(self, session_id: str, apply: Callable[[], None], meta: Meta | None) -> None:
        """A change to the directory, told to the index if there is one."""
        if self.index is None:
            apply()
        else:
            self.index.change(session_id, apply, meta)

    def log_path(self, session_id: str) -> str:
        return os.path.join(self.root, session_id + ".jsonl")

    def meta_path(self, session_id: str) -> str:
        return os.path.join(self.root, session_id + ".meta.json")

    def _ensure_dir(self) -> None:
        """The state directory and ``sessions/`` in it, private to the user (0700)."""
        if not self._ready:
            for directory in (os.path.dirname(self.root), self.root):
                os.makedirs(directory, mode=0o700, exist_ok=True)
                with contextlib.suppress(OSError):  # not ours to change: leave it
                    if os.stat(directory).st_mode & 0o077:
                        os.chmod(directory, 0o700)
            self._ready = True

    def create(self, header: Header, body: Sequence[Record] = ()) -> SessionLog:
        """Create and own a new log holding ``header`` and ``body``. When the disk refuses
        (read-only, full), the log is created by the first write that works, and the
        records wait in memory meanwhile. Raises ``FileExistsError`` for a taken id."""
        path = self.log_path(header.id)
        meta = meta_of(header.id, [header, *body]) or Meta(
            id=header.id, cwd=header.cwd, created_at=header.created_at, updated_at=header.created_at
        )
        made: list[int] = []

        def make() -> None:
            self._ensure_dir()
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise
            made.append(fd)

        try:
            self._change(header.id, make, meta)
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                raise
        fd = made[0] if made else None  # None: a read-only or full disk (see LogFile)
        writer = SessionLog(self, fd, meta, path=path if fd is None else None)
        writer.extend([header, *body])
        if body and not all(isinstance(r, Settings) for r in body):
            writer.touch()  # a copied history: list it without reading it
        return writer  # else the index entry waits for the first turn

    def open(self, session_id: str) -> tuple[SessionLog | None, list[Record]]:
        """Take ownership of a stored session and read it. The writer is ``None`` when
        another process owns the session (the records are then a read-only snapshot).
        Raises ``FileNotFoundError`` for unknown (or invalid) ids."""
        writer, records, snapshot = self.open_reading(session_id, list)
        snapshot.close()
        return writer, records

    def open_reading(
        self, session_id: str, consume: Callable[[Iterator[Record]], T], own: bool = True
    ) -> tuple[SessionLog | None, T, Snapshot]:
        """:meth:`open` (``own``: take ownership if no other process has it), with the
        records streamed to ``consume`` instead of returned, and the log's
        :class:`Snapshot` for reading the same records again (close it)."""
        if not valid_id(session_id):
            raise FileNotFoundError(session_id)
        self.writer.wait()  # a log this process just closed is released first
        fd = os.open(self.log_path(session_id), os.O_RDWR | os.O_APPEND)
        snapshot: Snapshot | None = None
        try:
            try:
                if not own:
                    raise BlockingIOError
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                snapshot, fd = Snapshot(fd, self.log_path(session_id)), -1
            else:
                snapshot = Snapshot(os.dup(fd), self.log_path(session_id))
            fold = MetaFold(session_id)

            def tapped() -> Iterator[Record]:
                for record in snapshot.records():
                    fold.feed(record)
                    yield record

            with bulk():
                result = consume(tapped())
            if fold.meta is None:
                raise FileNotFoundError(session_id)  # no readable header: not a session
            writer = SessionLog(self, fd, fold.meta) if fd >= 0 else None
            return writer, result, snapshot
        except BaseException:
            if fd >= 0:
                os.close(fd)
            if snapshot is not None:
                snapshot.close()
            raise

    def read(self, session_id: str) -> list[Record]:
        """The records of a stored session. Raises ``FileNotFoundError``."""
        with self.snapshot(session_id) as snapshot:
            return list(snapshot.records())

    @contextlib.contextmanager
    def snapshot(self, session_id: str) -> Iterator[Snapshot]:
        """:meth:`take_snapshot`, closed on exit."""
        snapshot = self.take_snapshot(session_id)
        try:
            yield snapshot
        finally:
            snapshot.close()

    def take_snapshot(self, session_id: str) -> Snapshot:
        """The log as it stands, to read, not own (close it). Raises ``FileNotFoundError``."""
        if not valid_id(session_id):
            raise FileNotFoundError(session_id)
        self.writer.wait()
        path = self.log_path(session_id)
        return Snapshot(os.open(path, os.O_RDONLY), path)

    def exists(self, session_id: str) -> bool:
        return valid_id(session_id) and os.path.exists(self.log_path(session_id))

    def write_meta(self, meta: Meta) -> None:
        self._ensure_dir()
        tmp = os.path.join(self.root, f".{meta.id}.{os.getpid()}.tmp")

        def replace() -> None:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, encode_meta(meta))
            finally:
                os.close(fd)
            os.replace(tmp, self.meta_path(meta.id))

        self._change(meta.id, replace, meta)

    def refresh_meta(self, meta: Meta) -> None:
        """The entry of a session changed (a turn ended): appended to its meta file as a
        line (one ``write``: no new file, no rename, no directory change, which on ext4
        cost 0.45 ms of CPU a turn), and its index row updated; the file is written anew
        (:meth:`write_meta`) when there is none yet or it has grown past
        :data:`META_APPEND_LIMIT`."""
        try:
            fd = os.open(self.meta_path(meta.id), os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:
            self.write_meta(meta)
            return
        try:
            anew = os.fstat(fd).st_size > META_APPEND_LIMIT
            if not anew:
                line = b"\n" + encode_meta(meta)
                if os.write(fd, line) != len(line):
                    raise OSError(errno.ENOSPC, "the meta file was cut short")
        finally:
            os.close(fd)
        if anew:
            self.write_meta(meta)
        elif self.index is not None:
            self.index.refresh(meta)

    def amend(self, session_id: str, record: Record) -> Meta:
        """Append ``record`` to the log of a session no process has open, ``fsync`` it and
        replace the meta file (and the index entry) with what it makes of the session;
        a record that would change nothing there is not written (archiving twice). Raises
        ``FileNotFoundError`` (unknown), ``BlockingIOError`` (open, here or elsewhere)."""
        if not valid_id(session_id):
            raise FileNotFoundError(session_id)
        self.writer.wait()  # a log this process just closed is released first
        path = self.log_path(session_id)
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fold = MetaFold(session_id)
            fold.meta = self._read_meta(session_id)  # what the list shows, else the log
            if fold.meta is None:
                with bulk():
                    fold.meta = meta_of(session_id, read_records(fd, path))
            if fold.meta is None:
                raise FileNotFoundError(session_id)  # no readable header: not a session
            before = msgspec.structs.replace(fold.meta)
            fold.feed(record)
            if fold.meta == before:
                return before
            size = os.fstat(fd).st_size
            line = encode(record)
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # after a torn tail: a fresh line
            if os.write(fd, line) != len(line):
                raise OSError(errno.ENOSPC, "the session log was cut short")
            os.fsync(fd)
            self.write_meta(fold.meta)
            return fold.meta
        finally:
            os.close(fd)  # releases the flock

    def delete(self, session_id: str) -> None:
        """Remove a session from the disk; unknown ids are fine."""
        if not valid_id(session_id):
            return
        self.writer.wait()

        def unlink() -> None:
            for path in (self.meta_path(session_id), self.log_path(session_id)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            # the command outputs its tools saved whole (tools.output)
            shutil.rmtree(os.path.join(os.path.dirname(self.root), "outputs", session_id),
                          ignore_errors=True)  # fmt: skip

        self._change(session_id, unlink, None)

    # ------------------------------------------------------------------ listing

    def entries(self, cwd: str | None = None) -> list[Meta]:
        """Every stored session's index entry (optionally only those in ``cwd``)."""
        self.writer.wait()
        try:
            names = [entry.name for entry in os.scandir(self.root)]
        except FileNotFoundError:
            return []
        logs = {n[: -len(".jsonl")] for n in names if n.endswith(".jsonl")}
        metas = {n[: -len(".meta.json")] for n in names if n.endswith(".meta.json")}
        out: list[Meta] = []
        for session_id in logs:
            if not valid_id(session_id):
                continue
            meta = self._read_meta(session_id) if session_id in metas else None
            if meta is None:  # crashed before the index entry was written: ask the log
                try:
                    meta = meta_of(session_id, self.read(session_id))
                except OSError:
                    meta = None
            if meta is not None and (cwd is None or meta.cwd == cwd):
                out.append(meta)
        return out

    def _read_meta(self, session_id: str) -> Meta | None:
        try:
            with open(self.meta_path(session_id), "rb") as fh:
                meta = decode_meta(fh.read())
        except (OSError, msgspec.DecodeError):
            return None
        return meta if meta.id == session_id else None

    def page(
        self,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = PAGE_SIZE,
        archived: ArchiveFilter = "exclude",
    ) -> tuple[list[Meta], str | None]:
        """One page of sessions, newest first, and the cursor of the next page (if any):
        from the index (O(page)) when there is one, else from every meta file. Raises
        ``ValueError`` for a cursor this store did not hand out."""
        after = _decode_cursor(cursor) if cursor is not None else None
        found = None
        if self.index is not None:
            self.writer.wait()
            found = self.index.page(cwd, after, limit + 1, archived)
        if found is None:
            shown = [m for m in self.entries(cwd) if archived == "include"
                     or m.archived == (archived == "only")]  # fmt: skip
            found = sorted(shown, key=lambda m: (m.updated_at, m.id), reverse=True)
            if after is not None:
                found = [m for m in found if (m.updated_at, m.id) < after]
        page, more = found[:limit], len(found) > limit
        last = page[-1] if page and more else None
        return page, _encode_cursor(last.updated_at, last.id) if last else None


def _encode_cursor(updated_at: str, session_id: str) -> str:
    raw = msgspec.json.encode([updated_at, session_id])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        updated_at, session_id = msgspec.json.decode(raw, type=tuple[str, str])
    except (ValueError, msgspec.DecodeError):
        raise ValueError(f"invalid cursor {cursor!r}") from None
    return updated_at, session_id
