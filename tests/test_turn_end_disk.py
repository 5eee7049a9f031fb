"""What a turn's end costs on disk (issue 30): the meta file gets the entry as a line
appended (no new file, no rename) and the index row follows; past a size it is written
anew; a line cut by a crash is passed over; a meta file written whole (as before) still
reads."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from acp_agent.sessions.records import Meta, decode_meta, encode_meta
from acp_agent.sessions.sessionindex import SessionIndex
from acp_agent.sessions.store import META_APPEND_LIMIT, Store

from .test_session_index import indexed
from .test_session_store import header


def turns(store: Store, n: int, sid: str = "sess_1") -> list[tuple[int, int]]:
    """``n`` turn ends of an open session; each one's meta file (inode, size) after."""
    writer = store.create(header(sid))
    seen = []
    for i in range(n):
        writer.touch(updated_at=f"2025-01-01T00:00:{i % 60:02d}.{i:03d}Z", title=f"t{i}")
        store.writer.wait()
        info = os.stat(store.meta_path(sid))
        seen.append((info.st_ino, info.st_size))
    writer.close()
    store.writer.wait()
    return seen


def test_a_turn_end_appends_to_the_meta_file(state_dir: str) -> None:
    store = indexed(state_dir)
    seen = turns(store, 5)
    inodes = {ino for ino, _ in seen}
    assert len(inodes) == 1  # written once, then appended to: never replaced
    assert [size for _, size in seen] == sorted({size for _, size in seen})  # it grows
    data = Path(store.meta_path("sess_1")).read_bytes()
    assert len(data.split(b"\n")) == 5 + 1  # the close appends the final entry too
    entry = decode_meta(data)
    assert (entry.title, entry.updated_at) == ("t4", "2025-01-01T00:00:04.004Z")
    (listed,), _ = store.page()  # the index row followed
    assert listed == entry
    (fresh,), _ = Store(state_dir, index=SessionIndex(state_dir)).page()  # another process
    assert fresh == entry


def test_past_the_limit_it_is_written_anew(state_dir: str) -> None:
    store = indexed(state_dir)
    line = len(encode_meta(Meta(id="sess_1", cwd="/w", created_at="x", updated_at="x",
                                title="t0"))) + 40  # fmt: skip
    seen = turns(store, META_APPEND_LIMIT // line + 10)
    assert len({ino for ino, _ in seen}) >= 2  # replaced when it got too large
    assert max(size for _, size in seen) <= META_APPEND_LIMIT + 2 * line
    assert decode_meta(Path(store.meta_path("sess_1")).read_bytes()).title == f"t{len(seen) - 1}"


def test_a_torn_last_line_is_passed_over(state_dir: str) -> None:
    store = indexed(state_dir)
    turns(store, 3)
    path = Path(store.meta_path("sess_1"))
    with open(path, "ab") as fh:  # a crash in the middle of an append
        fh.write(b'\n{"id":"sess_1","cwd":"/w","crea')
    assert decode_meta(path.read_bytes()).title == "t2"
    fresh = Store(state_dir)  # no index: the store reads the meta files
    assert [m.title for m in fresh.page()[0]] == ["t2"]
    with pytest.raises(msgspec.DecodeError):
        decode_meta(b'{"id":"s"\n{"cwd"')


def test_a_meta_file_written_whole_still_reads(state_dir: str) -> None:
    meta = Meta(id="sess_1", cwd="/w", created_at="c", updated_at="u", title="old")
    assert decode_meta(encode_meta(meta)) == meta
    store = Store(state_dir)
    store.create(header()).close()
    store.writer.wait()
    Path(store.meta_path("sess_1")).write_bytes(encode_meta(meta))  # as agents before wrote it
    writer, _ = store.open("sess_1")
    assert writer is not None
    writer.touch(title="new")
    writer.close()
    store.writer.wait()
    assert decode_meta(Path(store.meta_path("sess_1")).read_bytes()).title == "new"


def test_a_batch_writes_each_run_to_one_log_at_once() -> None:
    """The writer joins consecutive writes to one log (a batch from one turn of the
    loop), in order, and nothing else; a burst of 100,000 joins in one pass."""
    from acp_agent.sessions.diskwriter import LogFile, _joined

    a, b = LogFile(None, "a"), LogFile(None, "b")

    def other() -> None:
        return None

    jobs: list[Any] = [(a.write, (b"1",)), (a.write, (b"2",)), (other, ()), (a.write, (b"3",)),
                       (b.write, (b"4",)), (b.write, (b"5",)), (a.write, (b"6",))]  # fmt: skip
    assert [(getattr(fn, "__self__", None), args) for fn, args in _joined(jobs)] == [
        (a, (b"12",)), (None, ()), (a, (b"3",)), (b, (b"45",)), (a, (b"6",))
    ]
    ((fn, (data,)),) = _joined([(a.write, (b"x" * 100,))] * 100_000)
    assert fn == a.write and len(data) == 10_000_000
