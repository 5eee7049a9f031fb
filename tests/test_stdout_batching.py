"""The agent's stdout writer (``rpc/framing.PipeWriter``): lines written in one turn of the
event loop leave in one ``write``, in order; a large batch does not wait; nothing is lost
on close."""

from __future__ import annotations

import asyncio
import os
from typing import Any, cast

import pytest

from acp_agent.rpc import framing
from acp_agent.rpc.framing import LineReader, PipeWriter


class _Pipe:
    """A real pipe whose reader end is read back by a :class:`LineReader`."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.read_fd = read_fd
        self.file = os.fdopen(write_fd, "wb", buffering=0)

    async def reader(self) -> LineReader:
        reader = LineReader()
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(lambda: reader, os.fdopen(self.read_fd, "rb", buffering=0))
        return reader


async def test_lines_of_one_loop_turn_leave_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[bytes] = []
    real_write = os.write

    def spy(fd: int, data: Any) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(cast(Any, framing).os, "write", spy)
    pipe = _Pipe()
    writer = PipeWriter(pipe.file)
    reader = await pipe.reader()
    for i in range(100):
        writer.write_line(b'{"n":%d}\n' % i)
    assert writes == []  # not yet: the loop has not turned
    await asyncio.sleep(0)
    assert len(writes) == 1
    writer.write_line(b'{"n":100}\n')
    await asyncio.sleep(0)
    assert len(writes) == 2
    got = [await reader.readline() for _ in range(101)]
    assert got == [b'{"n":%d}' % i for i in range(101)]
    writer.write_line(b'{"last":1}\n')
    await writer.aclose()  # written before the pipe closes, loop turn or not
    assert await reader.readline() == b'{"last":1}'
    assert await reader.readline() is None


async def test_a_large_batch_goes_out_before_the_loop_turns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stream that never waits (a replay) is written as it goes, not held whole."""
    sizes: list[int] = []
    real_write = os.write

    def spy(fd: int, data: Any) -> int:
        sizes.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(cast(Any, framing).os, "write", spy)
    pipe = _Pipe()
    writer = PipeWriter(pipe.file)
    reader = await pipe.reader()
    line = b'{"text":"' + b"x" * 1000 + b'"}\n'
    count = 3 * framing._BATCH // len(line)
    for _ in range(count):
        writer.write_line(line)
    assert sizes and sizes[0] <= framing._BATCH + len(line)  # before the loop turned
    closing = asyncio.create_task(writer.aclose())
    got = [await reader.readline() for _ in range(count)]
    await closing
    assert got == [line[:-1]] * count
    assert await reader.readline() is None
