"""The session index (``acp_agent/sessionindex.py``, issue 17): a page of ``session/list``
reads the index and nothing else; it always says what the files say (compared with listing
by reading every meta file): after changes made without it, a process killed mid-change,
a torn or missing index, several processes writing at once; and when no index can be used
the store lists from the files."""

from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acp_agent.sessions.records import Meta, encode_meta, now_iso
from acp_agent.sessions.sessionindex import SessionIndex
from acp_agent.sessions.store import ArchiveFilter, Store

from .harness import ROOT
from .limits import WAIT
from .test_session_store import build_session, header


def indexed(state_dir: str) -> Store:
    return Store(state_dir, index=SessionIndex(state_dir))


def make(store: Store, n: int, cwds: tuple[str, ...] = ("/a", "/b", "/c")) -> None:
    """``n`` sessions, some titled, some prompted (with a meta file), some never."""
    for i in range(n):
        writer = store.create(header(f"sess_{i:04d}", cwds[i % len(cwds)]))
        if i % 3:
            writer.touch(updated_at=f"2025-01-{1 + i % 28:02d}T00:00:00.{i:03d}Z",
                         title=f"t{i}" if i % 2 else None)  # fmt: skip
        writer.close()
    store.writer.wait()


def every_page(
    store: Store, cwd: str | None = None, limit: int = 7, archived: ArchiveFilter = "exclude"
) -> list[Meta]:
    out: list[Meta] = []
    cursor = None
    while True:
        page, cursor = store.page(cwd, cursor, limit, archived)
        out += page
        if cursor is None:
            return out


def truth(state_dir: str, cwd: str | None = None) -> list[Meta]:
    """What the files say: the listing without an index."""
    return every_page(Store(state_dir), cwd)


def test_pages_agree_with_the_files(state_dir: str) -> None:
    store = indexed(state_dir)
    make(store, 60)
    for cwd in (None, "/a", "/b", "/nowhere"):
        assert every_page(store, cwd) == truth(state_dir, cwd)
    assert len(every_page(store)) == 60


def test_a_page_reads_only_the_index(state_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = indexed(state_dir)
    make(store, 40)
    every_page(store)  # the index is current
    opened: list[str] = []
    real_open, real_os_open, real_scandir = builtins.open, os.open, os.scandir

    def spy(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(path: Any, *args: Any, **kwargs: Any) -> Any:
            opened.append(str(path))
            return real(path, *args, **kwargs)

        return call

    monkeypatch.setattr(builtins, "open", spy(real_open))
    monkeypatch.setattr(os, "open", spy(real_os_open))
    monkeypatch.setattr(os, "scandir", spy(real_scandir))
    page, cursor = store.page("/b", None, 5)
    page2, _ = store.page("/b", cursor, 5)
    assert len(page) == len(page2) == 5
    assert [p for p in opened if p.startswith(store.root)] == []
    assert store.index is not None and isinstance(store.index, SessionIndex)


def test_changes_made_without_the_index_are_seen(state_dir: str) -> None:
    """An older agent, a person: a session added, retitled, removed behind its back."""
    store = indexed(state_dir)
    make(store, 12)
    every_page(store)
    plain = Store(state_dir)  # writes nothing to the index
    writer = plain.create(header("sess_new", "/a"))
    writer.touch(title="added")
    writer.close()
    plain.writer.wait()
    meta = Meta(id="sess_0001", cwd="/b", created_at=now_iso(), updated_at=now_iso(), title="x")
    tmp = Path(store.root) / "by-hand.tmp"
    tmp.write_bytes(encode_meta(meta))
    os.replace(tmp, store.meta_path("sess_0001"))
    os.unlink(store.log_path("sess_0002"))
    got = every_page(store)
    assert got == truth(state_dir)
    ids = {m.id: m for m in got}
    assert "sess_new" in ids and ids["sess_new"].title == "added"
    assert ids["sess_0001"].title == "x" and "sess_0002" not in ids


def test_a_change_cut_short_is_derived_again(state_dir: str) -> None:
    """Killed between marking a session and storing its row: the mark says so."""
    store = indexed(state_dir)
    make(store, 6)
    every_page(store)
    index = store.index
    assert isinstance(index, SessionIndex)
    meta = Meta(id="sess_0004", cwd="/c", created_at=now_iso(), updated_at="2030-01-01", title="z")
    with index._exclusive():
        index._begin("sess_0004")
        path = store.meta_path("sess_0004")
        Path(path + ".tmp").write_bytes(encode_meta(meta))
        os.replace(path + ".tmp", path)  # ... and the process dies here
    first = every_page(store)[0]
    assert (first.id, first.title) == ("sess_0004", "z")
    assert every_page(store) == truth(state_dir)


@pytest.mark.parametrize("damage", ["missing", "torn", "garbage", "other-version"])
def test_a_damaged_index_is_rebuilt(state_dir: str, damage: str) -> None:
    store = indexed(state_dir)
    make(store, 20)
    every_page(store)
    index = store.index
    assert isinstance(index, SessionIndex)
    path = Path(index.path)
    index._close()
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    if damage == "missing":
        path.unlink()
    elif damage == "torn":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3])
    elif damage == "garbage":
        path.write_bytes(b"not a database at all" * 100)
    else:
        import sqlite3

        db = sqlite3.connect(path)
        db.execute("PRAGMA user_version = 99")
        db.close()
    fresh = indexed(state_dir)  # another process, or this one starting again
    assert every_page(fresh) == truth(state_dir) and len(every_page(fresh)) == 20


def test_without_a_usable_index_the_files_are_read(state_dir: str) -> None:
    Path(state_dir, "sessions-index").write_text("a file where the index would go")
    store = indexed(state_dir)
    make(store, 9)
    assert every_page(store) == truth(state_dir) and len(every_page(store)) == 9


def test_deleted_sessions_leave_the_index(state_dir: str) -> None:
    store = indexed(state_dir)
    build_session(store, "sess_1", 1)
    make(store, 3)
    store.delete("sess_1")
    assert "sess_1" not in {m.id for m in every_page(store)}
    assert every_page(store) == truth(state_dir)


WRITER = """
import sys
from acp_agent.sessions.records import Header, now_iso
from acp_agent.sessions.sessionindex import SessionIndex
from acp_agent.sessions.store import Store

state, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = Store(state, index=SessionIndex(state))
for i in range(n):
    writer = store.create(Header(id=f"sess_{name}_{i}", cwd="/" + name, created_at=now_iso()))
    writer.touch(updated_at=now_iso(), title=f"{name} {i}")
    if i % 5 == 4:
        writer.close()
        store.delete(f"sess_{name}_{i - 1}")
    else:
        writer.close()
store.writer.wait()
"""


def test_several_processes_at_once(state_dir: str) -> None:
    """Three processes create, retitle and delete while this one lists: the index ends
    saying what the files say, without a rebuild in between being needed for that."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, state_dir, name, "40"], env=env)
        for name in ("p", "q", "r")
    ]
    store = indexed(state_dir)
    seen = 0
    while any(p.poll() is None for p in procs):
        seen = max(seen, len(every_page(store, limit=25)))
    assert all(p.wait(WAIT) == 0 for p in procs)
    final = every_page(store)
    assert final == truth(state_dir) and len(final) == 3 * (40 - 8)
    assert json.dumps(sorted(m.cwd for m in final)).count("/p") == 32
