"""The index of stored sessions: one row per session (what ``session/list`` shows), in an
SQLite database of the standard library, so that a page costs O(page) whatever the number
of sessions and a ``cwd`` filter reads nothing else.

The logs are the truth, their ``.meta.json`` files summaries derived from them, and this
index a cache of those, under ``<state>/sessions-index/``. It is never trusted blindly:

* Every change this code makes to ``sessions/`` (a log created, a meta file replaced, a
  session deleted) runs under one lock shared by every agent process (a ``flock`` on
  ``sessions-index/lock``), between two index transactions: the first marks the session
  pending, the second stores its row, clears the mark and records the directory's state
  (mtime, size, inode) as the one the index matches. A process killed in between leaves
  the mark, and the next reader derives that session again.
* A reader compares the directory's state with the recorded one (one ``stat``). Any
  difference (a session created, replaced or removed by anything else: an older agent, a
  person, a copy, a crash) and the index is reconciled with the directory before it
  answers: every log listed; each row checked against its meta file (inode and mtime) or,
  for a session without one, against its log's size; derived again where they differ;
  rows without a log dropped.
* A missing, torn or foreign index file (not a database, another schema version) is
  deleted and rebuilt from the directory. When none can be used at all (an unwritable
  state directory), :meth:`SessionIndex.page` answers ``None`` and the store lists by
  reading every meta file, as it did before the index.

The store (:mod:`.store`) calls :meth:`SessionIndex.change` around its own changes and
:meth:`SessionIndex.page` to list; it does not import this module (the session registry
gives it one), so the store stays below everything else.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator

import msgspec

from .. import log
from .ids import valid_id
from .records import Meta, decode_meta, encode_meta, meta_of, read_records
from .store import ArchiveFilter

SCHEMA = 2
"""The layout's version (``PRAGMA user_version``); an index of another is rebuilt. 2: the
``archived`` column (``session/archive``)."""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    cwd TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    archived INTEGER NOT NULL,
    meta BLOB NOT NULL,
    version TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS by_time ON sessions (archived, updated_at, id);
CREATE INDEX IF NOT EXISTS by_cwd ON sessions (cwd, archived, updated_at, id);
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending (id TEXT PRIMARY KEY) WITHOUT ROWID;
"""
_meta_decoder = msgspec.json.Decoder(Meta)


class SessionIndex:
    """The index of ``<state_dir>/sessions/``. Thread-safe; blocking (worker threads and
    the store's writer thread only, never the event loop)."""

    def __init__(self, state_dir: str) -> None:
        self.sessions = os.path.join(state_dir, "sessions")
        self.root = os.path.join(state_dir, "sessions-index")
        self.path = os.path.join(self.root, "sessions.sqlite3")
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        self._inode = 0
        self._lock_fd = -1
        self._depth = 0  # nested holds of the exclusive lock by the thread holding _lock
        self.rebuilt = 0
        """Full reconciliations with the directory so far (tests and benchmarks read it)."""

    def open(self) -> None:
        """Open (or create) the database now rather than on first use; never raises."""
        try:
            with self._lock:
                self._current()
        except (OSError, sqlite3.Error) as exc:
            log.debug("the session index cannot be opened", error=str(exc))

    # ------------------------------------------------------------------ listing

    def page(
        self,
        cwd: str | None,
        after: tuple[str, str] | None,
        limit: int,
        archived: ArchiveFilter = "exclude",
    ) -> list[Meta] | None:
        """Up to ``limit`` entries, newest first (by ``updated_at``, then id), in ``cwd``
        if given, archived or not as ``archived`` says, after the ``(updated_at, id)`` of
        ``after``; ``None`` when no index can be used (list by reading the meta files
        instead)."""
        try:
            with self._lock:
                db = self._current()
                if self._state(db) != (self._directory(), ""):
                    with self._exclusive():
                        self._reconcile(self._current())
                        db = self._current()
                where: list[str] = []
                args: list[str | int] = []
                if cwd is not None:
                    where.append("cwd = ?")
                    args.append(cwd)
                if archived != "include":
                    where.append("archived = ?")
                    args.append(int(archived == "only"))
                if after is not None:
                    where.append("(updated_at, id) < (?, ?)")
                    args += after
                query = "SELECT meta FROM sessions"
                if where:
                    query += " WHERE " + " AND ".join(where)
                query += " ORDER BY updated_at DESC, id DESC LIMIT ?"
                rows = db.execute(query, (*args, limit)).fetchall()
        except (OSError, sqlite3.Error) as exc:
            log.warning("the session index cannot be used; listing from the files", error=str(exc))
            return None
        return [_meta_decoder.decode(row[0]) for row in rows]

    # ------------------------------------------------------------------ changes

    def change(self, session_id: str, apply: Callable[[], None], meta: Meta | None) -> None:
        """Run ``apply`` (the store's change to ``session_id``'s files: ``meta`` is its
        entry from now on, ``None`` for a deletion) under the index's lock, and keep the
        index in step. ``apply``'s exceptions propagate; the index's own failures never do
        (the next reader reconciles)."""
        with self._lock:
            try:
                self._acquire()
            except OSError as exc:
                log.warning("the session index cannot be locked", error=str(exc))
                apply()
                return
            try:
                try:
                    db, in_step = self._begin(session_id)
                except (OSError, sqlite3.Error) as exc:
                    log.warning("the session index cannot be written", error=str(exc))
                    apply()
                    return
                try:
                    apply()
                except BaseException:
                    self._finish(db, session_id, None, in_step=False, failed=True)
                    raise
                self._finish(db, session_id, meta, in_step)
            finally:
                self._release()

    def _begin(self, session_id: str) -> tuple[sqlite3.Connection, bool]:
        """Mark ``session_id`` pending; whether the index matched the directory before."""
        db = self._current()
        in_step = self._state(db) == (self._directory(), "")
        with _transaction(db):
            db.execute("INSERT OR IGNORE INTO pending VALUES (?)", (session_id,))
        return db, in_step

    def _finish(
        self,
        db: sqlite3.Connection,
        session_id: str,
        meta: Meta | None,
        in_step: bool,
        failed: bool = False,
    ) -> None:
        """Store the row (none for a deletion; untouched when the change ``failed``)."""
        try:
            with _transaction(db):
                if failed:
                    pass  # what changed, if anything, the directory's state says
                elif meta is None:
                    db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
                else:
                    self._put(db, meta, self._version(session_id))
                db.execute("DELETE FROM pending WHERE id = ?", (session_id,))
                if in_step:  # else something else changed the directory too: reconcile
                    self._record(db, self._directory())
        except (OSError, sqlite3.Error) as exc:
            log.warning("the session index cannot be written", error=str(exc))

    def refresh(self, meta: Meta) -> None:
        """The store appended ``meta`` to its session's meta file (``Store.refresh_meta``:
        no entry of the directory changed): the row follows, in one transaction. A
        process killed between the two leaves the row an entry behind its file until a
        reconciliation finds the file's version changed. Never raises."""
        with self._lock:
            try:
                db = self._current()
                with _transaction(db):
                    self._put(db, meta, self._version(meta.id))
            except (OSError, sqlite3.Error) as exc:
                log.warning("the session index cannot be written", error=str(exc))

    # ------------------------------------------------------------------ reconciling

    def _reconcile(self, db: sqlite3.Connection) -> None:
        """Bring the index in line with the directory (under the exclusive lock)."""
        directory = self._directory()
        known, pending = self._state(db)
        if known == directory and not pending:
            return  # another thread or process just did
        if known == directory:  # only sessions whose change was cut short
            with _transaction(db):
                for (session_id,) in db.execute("SELECT id FROM pending").fetchall():
                    self._derive(db, session_id, self._version(session_id))
                db.execute("DELETE FROM pending")
            return
        self.rebuilt += 1
        rows = dict(db.execute("SELECT id, version FROM sessions").fetchall())
        logs = set()
        with _transaction(db):
            for session_id, version in self._listing():
                logs.add(session_id)
                if rows.get(session_id) != version:
                    self._derive(db, session_id, version)
            gone = [(session_id,) for session_id in rows if session_id not in logs]
            db.executemany("DELETE FROM sessions WHERE id = ?", gone)
            db.execute("DELETE FROM pending")
            self._record(db, directory)

    def _listing(self) -> Iterator[tuple[str, str]]:
        """Every session in the directory with the version of what its row comes from."""
        try:
            entries = {entry.name: entry for entry in os.scandir(self.sessions)}
        except FileNotFoundError:
            return
        for name in entries:
            if not name.endswith(".jsonl"):
                continue
            session_id = name[: -len(".jsonl")]
            if not valid_id(session_id):
                continue
            meta = entries.get(session_id + ".meta.json")
            try:
                if meta is not None:
                    info = meta.stat()
                    yield session_id, f"m{info.st_ino}:{info.st_mtime_ns}"
                else:
                    yield session_id, f"l{entries[name].stat().st_size}"
            except FileNotFoundError:
                continue  # deleted meanwhile

    def _version(self, session_id: str) -> str:
        base = os.path.join(self.sessions, session_id)
        with contextlib.suppress(FileNotFoundError):
            info = os.stat(base + ".meta.json")
            return f"m{info.st_ino}:{info.st_mtime_ns}"
        with contextlib.suppress(FileNotFoundError):
            return f"l{os.stat(base + '.jsonl').st_size}"
        return ""

    def _derive(self, db: sqlite3.Connection, session_id: str, version: str) -> None:
        """The row of ``session_id`` from its files: the meta file, else the log."""
        base = os.path.join(self.sessions, session_id)
        meta: Meta | None = None
        if version.startswith("m"):
            with contextlib.suppress(OSError, msgspec.DecodeError):
                with open(base + ".meta.json", "rb") as fh:
                    meta = decode_meta(fh.read())
                if meta.id != session_id:
                    meta = None
        if meta is None:
            try:
                fd = os.open(base + ".jsonl", os.O_RDONLY)
            except FileNotFoundError:
                db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
                return
            try:
                meta = meta_of(session_id, read_records(fd, base + ".jsonl"))
            finally:
                os.close(fd)
        if meta is None:  # no readable header: not a session
            db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        else:
            self._put(db, meta, version)

    # ------------------------------------------------------------------ plumbing

    def _put(self, db: sqlite3.Connection, meta: Meta, version: str) -> None:
        db.execute(
            "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?, ?, ?)",
            (meta.id, meta.cwd, meta.updated_at, meta.archived, encode_meta(meta), version),
        )

    def _directory(self) -> str:
        """The sessions directory's state: it changes with every entry added, replaced or
        removed (and with nothing else this code does)."""
        try:
            info = os.stat(self.sessions)
        except FileNotFoundError:
            return "none"
        return f"{info.st_mtime_ns}:{info.st_size}:{info.st_ino}"

    def _state(self, db: sqlite3.Connection) -> tuple[str, str]:
        """(the directory state the index matches, ``"pending"`` if a change is open)."""
        row = db.execute("SELECT value FROM state WHERE key = 'directory'").fetchone()
        pending = db.execute("SELECT 1 FROM pending LIMIT 1").fetchone()
        return (row[0] if row else "", "pending" if pending else "")

    def _record(self, db: sqlite3.Connection, directory: str) -> None:
        db.execute("INSERT OR REPLACE INTO state VALUES ('directory', ?)", (directory,))

    def _current(self) -> sqlite3.Connection:
        """The open database, reopened if its file was replaced (another process rebuilt
        it) and rebuilt if it is missing, torn or not ours."""
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            inode = 0
        if self._db is not None and inode == self._inode:
            return self._db
        self._close()
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        try:
            return self._open()
        except sqlite3.DatabaseError as exc:  # torn, not a database, another schema
            log.warning("rebuilding the session index", path=self.path, error=str(exc))
            self._close()
            with self._exclusive():
                for suffix in ("", "-wal", "-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.path + suffix)
            return self._open()

    def _open(self) -> sqlite3.Connection:
        # private to the user, like everything in the state directory (SQLite gives its
        # -wal and -shm files the database's permissions)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db = db
        db.execute("PRAGMA busy_timeout = 10000")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")  # the logs are the truth: no fsync here
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA):
            raise sqlite3.DatabaseError(f"schema {version}, not {SCHEMA}")
        if version == 0:
            db.executescript(_SCHEMA)  # IF NOT EXISTS: processes creating it at once agree
            db.execute(f"PRAGMA user_version = {SCHEMA}")
        db.execute("SELECT count(*) FROM sessions WHERE id = ''").fetchone()  # torn: raises
        self._inode = os.stat(self.path).st_ino
        return db

    def _close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """This process's other threads and every other process kept out (reentrant)."""
        with self._lock:
            self._acquire()
            try:
                yield
            finally:
                self._release()

    def _acquire(self) -> None:  # the caller holds ``_lock``
        if self._depth == 0:
            if self._lock_fd < 0:
                os.makedirs(self.root, mode=0o700, exist_ok=True)
                self._lock_fd = os.open(os.path.join(self.root, "lock"), os.O_RDWR | os.O_CREAT,
                                        0o600)  # fmt: skip
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        self._depth += 1

    def _release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
