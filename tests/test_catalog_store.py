"""What ``session/set_title`` and ``session/archive`` keep on disk (issue 16), below the
protocol: titles normalised, ``Store.amend`` on a session no process has open, the open
session's ``SessionLog.amend``, the ``archived`` filter with and without the index, and
an index of the previous layout rebuilt."""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
from pathlib import Path

import pytest

from acp_agent.errors import InvalidParams
from acp_agent.handlers.catalog import TITLE_LIMIT, normalized_title
from acp_agent.sessions.records import (
    Archived,
    ClientTitle,
    Meta,
    Prompt,
    TurnEnd,
    meta_of,
    now_iso,
)
from acp_agent.sessions.replay import restore
from acp_agent.sessions.sessionindex import SessionIndex
from acp_agent.sessions.store import ArchiveFilter, Store

from .test_session_index import every_page, indexed
from .test_session_store import header


class TestNormalizedTitle:
    @pytest.mark.parametrize(("given", "stored"), [
        ("Plain", "Plain"),
        ("  padded\t", "padded"),
        ("two\nlines\r\nand\u2028more", "two lines and more"),
        ("a\x00b\x7fc\x9fd", "a b c d"),
        ("runs    of \t\t whitespace", "runs of whitespace"),
        ("x" * 1000, "x" * TITLE_LIMIT),
        ("y" * (TITLE_LIMIT - 1) + " z", "y" * (TITLE_LIMIT - 1)),
        ("😀" * 300, "😀" * TITLE_LIMIT),
    ])  # fmt: skip
    def test_stored_form(self, given: str, stored: str) -> None:
        assert normalized_title(given) == stored

    @pytest.mark.parametrize("given", ["", " ", "\n\t", "\x00\x01", "\u3000\u2029"])
    def test_nothing_left_is_invalid(self, given: str) -> None:
        with pytest.raises(InvalidParams, match="title"):
            normalized_title(given)


def stored(state_dir: str, sid: str = "sess_1") -> Store:
    """An indexed store with one closed session that had a turn."""
    store = indexed(state_dir)
    writer = store.create(header(sid))
    at = now_iso()
    writer.append(Prompt(message_id="m1", blocks=[], at=at))
    writer.append(TurnEnd(stop_reason="end_turn", at=at))
    writer.touch(updated_at=at)
    writer.close()
    store.writer.wait()
    return store


def log_lines(store: Store, sid: str = "sess_1") -> list[str]:
    return Path(store.log_path(sid)).read_text().splitlines()


class TestStoreAmend:
    def test_recorded_in_the_log_the_meta_file_and_the_index(self, state_dir: str) -> None:
        store = stored(state_dir)
        meta = store.amend("sess_1", ClientTitle(title="Named", at="2999-01-01T00:00:00.000Z"))
        assert (meta.title, meta.titled_by_client) == ("Named", True)
        assert meta.updated_at == "2999-01-01T00:00:00.000Z"
        assert json.loads(log_lines(store)[-1])["r"] == "client_title"
        on_disk = json.loads(Path(store.meta_path("sess_1")).read_text().splitlines()[-1])
        assert on_disk["title"] == "Named" and on_disk["titled_by_client"] is True
        store.amend("sess_1", Archived(archived=True, at=now_iso()))
        assert [m.id for m in store.page(archived="only")[0]] == ["sess_1"]
        assert store.page()[0] == []
        logged = meta_of("sess_1", store.read("sess_1"))
        assert logged is not None and logged.archived and logged.title == "Named"
        state = restore(store.read("sess_1"))
        assert (state.title, state.titled_by_client) == ("Named", True)

    def test_a_change_that_changes_nothing_is_not_written(self, state_dir: str) -> None:
        store = stored(state_dir)
        store.amend("sess_1", Archived(archived=False, at=now_iso()))  # never archived
        before = os.stat(store.log_path("sess_1")), os.stat(store.meta_path("sess_1"))
        store.amend("sess_1", Archived(archived=False, at=now_iso()))
        store.amend("sess_1", Archived(archived=True, at=now_iso()))
        store.amend("sess_1", Archived(archived=True, at=now_iso()))  # again: nothing
        assert len(log_lines(store)) == 4 and before[0].st_size < os.stat(
            store.log_path("sess_1")).st_size  # fmt: skip
        assert [json.loads(line)["r"] for line in log_lines(store)] == [
            "header", "prompt", "turn_end", "archived"]  # fmt: skip

    def test_after_a_torn_tail_on_a_line_of_its_own(self, state_dir: str) -> None:
        store = stored(state_dir)
        with open(store.log_path("sess_1"), "ab") as fh:
            fh.write(b'{"r":"prompt","mess')
        store.amend("sess_1", Archived(archived=True, at=now_iso()))
        assert json.loads(log_lines(store)[-1])["r"] == "archived"
        meta = meta_of("sess_1", store.read("sess_1"))
        assert meta is not None and meta.archived

    def test_without_a_meta_file_the_log_says(self, state_dir: str) -> None:
        store = stored(state_dir)
        os.unlink(store.meta_path("sess_1"))
        meta = store.amend("sess_1", Archived(archived=True, at=now_iso()))
        assert meta.archived and meta.cwd == header().cwd
        last = Path(store.meta_path("sess_1")).read_text().splitlines()[-1]
        assert json.loads(last)["archived"] is True

    def test_unknown_and_owned_sessions(self, state_dir: str) -> None:
        store = stored(state_dir)
        record = Archived(archived=True, at=now_iso())
        for unknown in ("sess_nope", "../sess_1", ""):
            with pytest.raises(FileNotFoundError):
                store.amend(unknown, record)
        Path(store.root, "sess_empty.jsonl").write_text("")  # no header: not a session
        with pytest.raises(FileNotFoundError):
            store.amend("sess_empty", record)
        fd = os.open(store.log_path("sess_1"), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # as a process that has the session open
            with pytest.raises(BlockingIOError):
                store.amend("sess_1", record)
        finally:
            os.close(fd)
        assert store.amend("sess_1", record).archived


def test_an_open_session_amends_through_its_log(state_dir: str) -> None:
    store = indexed(state_dir)
    writer = store.create(header("sess_open"))
    writer.amend(ClientTitle(title="Live", at=now_iso()))
    writer.amend(Archived(archived=True, at=now_iso()))
    size = len(store.read("sess_open"))
    writer.amend(Archived(archived=True, at=now_iso()))  # nothing new
    assert len(store.read("sess_open")) == size
    store.writer.wait()
    (meta,) = store.page(archived="only")[0]
    assert (meta.title, meta.titled_by_client, meta.archived) == ("Live", True, True)
    writer.close()
    store.writer.wait()
    last = Path(store.meta_path("sess_open")).read_text().splitlines()[-1]
    assert Meta(**json.loads(last)).archived


def shown(i: int, archived: ArchiveFilter) -> bool:
    """Whether session ``i`` of the test below (every fourth archived) passes the filter."""
    return archived == "include" or (i % 4 == 0) == (archived == "only")


@pytest.mark.parametrize("archived", ["exclude", "include", "only"])
def test_the_filter_with_and_without_the_index(state_dir: str, archived: ArchiveFilter) -> None:
    store = indexed(state_dir)
    for i in range(30):
        writer = store.create(header(f"sess_{i:04d}", "/a" if i % 2 else "/b"))
        writer.touch(updated_at=f"2025-01-01T00:00:{i:02d}.000Z")
        if i % 4 == 0:
            writer.amend(Archived(archived=True, at=now_iso()))
        writer.close()
    store.writer.wait()
    plain = Store(state_dir)  # lists by reading every meta file
    for cwd in (None, "/a"):
        with_index = [m.id for m in every_page(store, cwd, archived=archived)]
        from_files = [m.id for m in every_page(plain, cwd, archived=archived)]
        assert with_index == from_files

        assert with_index == [f"sess_{i:04d}" for i in reversed(range(30))
                              if (cwd is None or i % 2 == 1) and shown(i, archived)]  # fmt: skip


def test_an_index_of_the_previous_layout_is_rebuilt(state_dir: str) -> None:
    """An index written by an agent before ``archived`` existed (schema 1) is rebuilt."""
    store = stored(state_dir)
    store.amend("sess_1", Archived(archived=True, at=now_iso()))
    index = store.index
    assert isinstance(index, SessionIndex)
    index._close()
    for suffix in ("", "-wal", "-shm"):
        Path(index.path + suffix).unlink(missing_ok=True)
    db = sqlite3.connect(index.path)
    db.executescript("""
        CREATE TABLE sessions (id TEXT PRIMARY KEY, cwd TEXT NOT NULL, updated_at TEXT NOT NULL,
                               meta BLOB NOT NULL, version TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE pending (id TEXT PRIMARY KEY) WITHOUT ROWID;
        PRAGMA user_version = 1;
    """)
    db.close()
    fresh = SessionIndex(state_dir)
    only = fresh.page(None, None, 10, "only")  # None: unusable (the files would be read)
    assert only is not None and [m.id for m in only] == ["sess_1"]
    assert fresh.page(None, None, 10, "exclude") == []
