"""Checkpoints below the commands: the recorder (tool paths, directories, links, the
shadow snapshot of what commands did), planning and putting back, the shadow repository's
rules (ignore files, large and binary files, attributes that would change bytes), and the
turn log that ``/rewind`` reads."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from acp_agent.config import Checkpoints as Settings
from acp_agent.engine.checkpoints import Recorder, Store, plan, put_back
from acp_agent.engine.shadow import Shadow, stand_in
from acp_agent.sessions.records import Checkpoint, Rewind, Undone
from acp_agent.sessions.session import Session
from acp_agent.sessions.turnlog import TurnLog


async def _emit(sid: str, update: Any) -> None:
    return None


def world(tmp_path: Path, **settings: Any) -> tuple[Path, Store, Session]:
    ws = tmp_path / "ws"
    ws.mkdir()
    store = Store(str(tmp_path / "state"), Settings(**settings), dict(os.environ))
    return ws, store, Session("sess_t", str(ws), _emit)


def snapshot_of(ws: Path) -> dict[str, tuple[str, bytes | str, int]]:
    out: dict[str, tuple[str, bytes | str, int]] = {}
    for here, dirs, files in os.walk(ws):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(here, d)))]:
            path = Path(here, name)
            rel = str(path.relative_to(ws))
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path), 0)
            else:
                out[rel] = ("file", path.read_bytes(), path.stat().st_mode & 0o7777)
    return out


async def test_recorded_paths_and_what_commands_did_are_put_back(tmp_path: Path) -> None:
    ws, store, session = world(tmp_path)
    (ws / ".gitignore").write_text("ignored/\n")
    (ws / "ignored").mkdir()
    (ws / "ignored" / "cache.txt").write_text("cache")
    (ws / "dir").mkdir()
    (ws / "dir" / "x.txt").write_text("x")
    (ws / "dir" / "y.txt").write_text("y")
    os.symlink("dir/x.txt", ws / "link")
    (ws / "exec.sh").write_text("run")
    (ws / "exec.sh").chmod(0o700)
    (ws / ".gitattributes").write_text("* text eol=crlf\n")  # must not change bytes
    (ws / "lf.txt").write_bytes(b"one\ntwo\n")
    before = snapshot_of(ws)
    recorder = Recorder(store, session, "t1")
    await recorder.before_change([str(ws / "dir"), str(ws / "moved"), str(ws / "link"),
                                  str(ws / "ignored" / "cache.txt")])  # fmt: skip
    os.rename(ws / "dir", ws / "moved")  # as move_file would
    os.unlink(ws / "link")
    os.symlink("elsewhere", ws / "link")
    (ws / "ignored" / "cache.txt").write_text("new cache")
    # what "commands" did: not recorded path by path, found by the snapshot
    (ws / "exec.sh").write_text("changed")
    (ws / "lf.txt").write_bytes(b"ONE\n")
    (ws / "made.txt").write_text("made")
    checkpoint = await recorder.finish()
    assert checkpoint is not None
    changed = {os.path.relpath(c.path, ws) for c in checkpoint.files}
    assert changed == {"dir/x.txt", "dir/y.txt", "moved/x.txt", "moved/y.txt", "link",
                       "ignored/cache.txt", "exec.sh", "lf.txt", "made.txt"}  # fmt: skip
    steps = plan([checkpoint], session.id, 1 << 20)
    assert not any(s.conflict for s in steps) and all(s.restorable for s in steps)
    for step in steps:
        put_back(store, session.id, step)
    after = snapshot_of(ws)
    assert after == {**before, "exec.sh": ("file", b"run", 0o755)}  # git keeps x, not 0700
    assert not (ws / "moved").exists()


async def test_a_turn_that_changes_nothing_leaves_no_checkpoint(tmp_path: Path) -> None:
    ws, store, session = world(tmp_path)
    (ws / "a.txt").write_text("a")
    recorder = Recorder(store, session, "t1")
    await recorder.before_change([str(ws / "a.txt")])
    assert await recorder.finish() is None


async def test_large_files_are_known_by_their_hash_small_binaries_kept(tmp_path: Path) -> None:
    ws, store, session = world(tmp_path, max_file_size=100)
    (ws / "big.txt").write_text("b" * 200)
    (ws / "big.bin").write_bytes(b"\0" * 200)
    (ws / "small.bin").write_bytes(b"\0\1\2\r\n\xff")
    recorder = Recorder(store, session, "t1")
    await recorder.before_change([])  # a command: the snapshot only
    (ws / "big.txt").write_text("c" * 200)
    (ws / "big.bin").write_bytes(b"\1" * 200)
    (ws / "small.bin").write_bytes(b"\0\1\3")
    checkpoint = await recorder.finish()
    assert checkpoint is not None
    assert {os.path.basename(c.path): c.before.kept for c in checkpoint.files} == {
        "big.bin": False, "big.txt": False, "small.bin": True}
    steps = plan([checkpoint], session.id, 100)
    assert [(os.path.basename(s.path), s.restorable) for s in steps] == [
        ("big.bin", False), ("big.txt", False), ("small.bin", True)]
    put_back(store, session.id, steps[2])
    assert (ws / "small.bin").read_bytes() == b"\0\1\2\r\n\xff"  # byte for byte


async def test_a_conflict_is_what_changed_since_the_turn(tmp_path: Path) -> None:
    ws, store, session = world(tmp_path, snapshot=False)
    (ws / "a.txt").write_text("a")
    recorder = Recorder(store, session, "t1")
    await recorder.before_change([str(ws / "a.txt"), str(ws / "b.txt")])
    (ws / "a.txt").write_text("agent")
    (ws / "b.txt").write_text("agent")
    checkpoint = await recorder.finish()
    assert checkpoint is not None
    (ws / "a.txt").write_text("user")
    (ws / "b.txt").unlink()  # already as it was: nothing to do
    steps = plan([checkpoint], session.id, 1 << 20)
    assert [(os.path.basename(s.path), s.conflict) for s in steps] == [("a.txt", True)]


def test_the_shadow_keeps_out_of_the_users_repository(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "f.txt").write_text("f")
    hooks = ws / ".git" / "hooks"
    (hooks / "post-index-change").write_text(f"#!/bin/sh\ntouch {tmp_path}/hooked\n")
    (hooks / "post-index-change").chmod(0o755)
    before = sorted(p.name for p in (ws / ".git").iterdir())
    shadow = Shadow(str(tmp_path / "shadow"), str(ws), dict(os.environ), 1 << 20)
    first = shadow.snapshot()
    (ws / "f.txt").write_text("g")
    changes = shadow.changes(first, shadow.snapshot())
    assert [(c.path, shadow.blob(c.sha)) for c in changes] == [("f.txt", b"f")]
    assert sorted(p.name for p in (ws / ".git").iterdir()) == before  # no index written
    assert not (ws / ".git" / "index").exists() and not (tmp_path / "hooked").exists()
    assert stand_in(b"plain") is None


def test_the_turn_log_follows_the_history() -> None:
    log = TurnLog()
    log.prompt("m1", "one", "t", 0)
    log.prompt("m2", "/help", "t", 2)  # answered by itself: the history did not grow
    log.prompt("m3", "three", "t", 2)
    assert [m.turn for m in log.turns(4)] == ["m1", "m3"]
    log.rewritten(keep=2)  # a refusal's truncation after m3's start
    assert [m.history for m in log.marks] == [0, 2, 2]
    log.rewritten()  # a compaction
    assert all(m.history is None for m in log.marks)
    log.checkpoint(Checkpoint(turn="m1", at="t", files=[]))
    log.checkpoint(Checkpoint(turn="m3", at="t", files=[]))
    log.took_back(Undone(turns=["m3"], at="t"))
    assert [c.turn for c in log.live()] == ["m1"]
    log.prompt("m4", "four", "t", 1)
    log.rewound(Rewind(turn="m4", prompt="four", taken=1, length=1, files=0,
                       message_id="x", at="t"))  # fmt: skip
    assert [m.turn for m in log.marks] == ["m1", "m2", "m3"]


def test_the_configuration_section() -> None:
    from acp_agent.config import ConfigError, from_mapping

    config = from_mapping({"checkpoints": {"enabled": False, "max-file-size": 10}})
    assert not config.checkpoints.enabled and config.checkpoints.max_file_size == 10
    try:
        from_mapping({"checkpoints": {"max-size": -1}})
    except ConfigError as exc:
        assert "`checkpoints.max-size` must not be negative" in str(exc)
    else:
        raise AssertionError("a negative size was accepted")
