"""Disk errors while a session is stored: logged once, never raised, nothing lost (what
could not be written is kept and written once the disk has room again). The disk fills
up under the open log (its descriptor is pointed at ``/dev/full``, which fails every
write with ENOSPC)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from acp_agent import log
from acp_agent.sessions.records import Header, Settings, now_iso
from acp_agent.sessions.store import Store


def _fd_of(path: str) -> int:
    """The descriptor this process has open on ``path``."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == path:
                return int(name)
        except OSError:
            continue
    raise AssertionError(f"{path} is not open")


@contextlib.contextmanager
def full_disk(path: str) -> Iterator[Callable[[], None]]:
    """The disk under the open log ``path`` is full (its descriptor points at
    ``/dev/full``) until the function yielded is called, or the block ends."""
    fd = _fd_of(path)
    disk = os.dup(fd)  # the log file itself (and its lock)
    full = os.open("/dev/full", os.O_WRONLY)

    def room_again() -> None:
        os.dup2(disk, fd)

    try:
        os.dup2(full, fd)
        yield room_again
    finally:
        os.close(disk)
        os.close(full)


@pytest.fixture
def agent_log(tmp_path: Path) -> Iterator[Path]:
    """The agent's log (structured lines) goes to this file during the test."""
    path = tmp_path / "agent.log"
    log.configure("warning", str(path))
    try:
        yield path
    finally:
        log.configure("warning")


def test_a_full_disk_is_logged_once_and_the_log_recovers(
    state_dir: str, agent_log: Path
) -> None:
    store = Store(state_dir)
    writer = store.create(Header(id="sess_1", cwd="/w", created_at=now_iso()))
    writer.append(Settings(mode="ask", model="offline"))
    writer.sync().result()  # the disk writer thread has written it
    with full_disk(store.log_path("sess_1")) as room_again:
        writer.append(Settings(mode="plan", model="offline"))  # kept, not raised
        writer.append(Settings(mode="accept-edits", model="offline"))
        writer.sync().result()  # tried, and failed
        room_again()
        writer.append(Settings(mode="bypass", model="offline"))
        writer.close()
        store.writer.barrier().result()
    records = store.read("sess_1")
    modes = [r.mode for r in records if isinstance(r, Settings)]
    assert modes == ["ask", "plan", "accept-edits", "bypass"]  # the pending ones too
    text = agent_log.read_text()
    assert text.count("cannot write a session log") == 1
    assert "session log write works again" in text


def test_an_index_entry_that_cannot_be_written_is_logged(
    state_dir: str, agent_log: Path
) -> None:
    """The index entry (session/list's view) fails to be written: the log is unharmed."""
    store = Store(state_dir)
    writer = store.create(Header(id="sess_1", cwd="/w", created_at=now_iso()))
    writer.sync().result()  # the log exists before its directory moves
    moved = store.root + ".moved"
    os.rename(store.root, moved)  # the open log moves along
    Path(store.root).write_text("not a directory any more")
    writer.append(Settings(mode="plan", model="offline"))
    writer.touch(title="A title")
    writer.close()
    store.writer.barrier().result()
    assert "cannot index a session log" in agent_log.read_text()
    os.unlink(store.root)
    os.rename(moved, store.root)
    assert [type(r) for r in store.read("sess_1")] == [Header, Settings]


def test_a_batch_larger_than_the_unsaved_cap_is_written_when_the_disk_is_fine(
    state_dir: str, agent_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap bounds what piles up while writing fails, not one loop turn's batch:
    records appended on a running loop reach the thread as one write of any size."""
    import asyncio

    from acp_agent.sessions import diskwriter

    monkeypatch.setattr(diskwriter, "MAX_PENDING", 4096)
    store = Store(state_dir)

    async def burst() -> None:  # one turn of the loop: handed over as one batch
        writer = store.create(Header(id="sess_1", cwd="/w", created_at=now_iso()))
        for n in range(200):
            writer.append(Settings(mode="ask", model=f"model-{n:04}-" + "x" * 40))
        writer.close()

    asyncio.run(burst())
    store.writer.barrier().result()
    models = [r.model for r in store.read("sess_1") if isinstance(r, Settings)]
    assert len(models) == 200 and models[-1].startswith("model-0199-")
    assert "cannot write a session log" not in agent_log.read_text()


def test_past_the_unsaved_cap_a_failing_log_says_it_is_no_longer_saved(
    state_dir: str, agent_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acp_agent.sessions import diskwriter

    monkeypatch.setattr(diskwriter, "MAX_PENDING", 4096)
    store = Store(state_dir)
    writer = store.create(Header(id="sess_1", cwd="/w", created_at=now_iso()))
    writer.sync().result()
    with full_disk(store.log_path("sess_1")) as room_again:  # what follows piles up, dropped
        for n in range(100):
            writer.append(Settings(mode="plan", model=f"model-{n:04}-" + "x" * 40))
            writer.sync().result()
        room_again()  # a lost log stays lost (its records would have a gap)
        writer.append(Settings(mode="bypass", model="offline"))
        writer.close()
        store.writer.barrier().result()
    text = agent_log.read_text()
    assert "too much unsaved; no longer saved" in text
    assert not any(isinstance(r, Settings) for r in store.read("sess_1"))
