"""Line framing on real pipes: the writer's whole-lines promise at close, whatever the
peer's speed."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading

import pytest

from acp_agent.rpc.framing import PipeWriter

from .limits import WAIT

BIG = 8 * 1024 * 1024  # far more than a pipe holds (64 KiB) or one loop turn can flush


class Peer(threading.Thread):
    """Reads the pipe to its end in a thread (a slow or busy peer is the same to it)."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.data = bytearray()

    def run(self) -> None:
        while chunk := os.read(self.fd, 65536):
            self.data += chunk

    def result(self) -> bytes:
        self.join(WAIT)
        assert not self.is_alive(), "the peer never saw the end of the pipe"
        return bytes(self.data)


async def test_a_line_cut_at_close_is_finished_and_the_rest_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """However busy the machine (here: every clock reading is an hour after the last),
    the peer gets the whole of the line it had the start of, and nothing after it."""
    r, w = os.pipe()
    out = os.fdopen(w, "wb", buffering=0)
    writer = PipeWriter(out)
    first = b'{"n":1,"text":"' + b"x" * BIG + b'"}\n'
    writer.write_line(first)  # the pipe takes its first 64 KiB: the line is cut
    writer.write_line(b'{"n":2}\n')
    peer = Peer(r)
    peer.start()
    loop = asyncio.get_running_loop()
    hours = itertools.count(loop.time(), 3600.0)
    monkeypatch.setattr(loop, "time", lambda: next(hours))
    await writer.aclose(timeout=0)  # no time to flush: only the cut line is completed
    monkeypatch.undo()
    out.close()
    assert peer.result() == first
    os.close(r)


async def test_the_cut_line_is_given_up_when_the_peer_closes() -> None:
    r, w = os.pipe()
    out = os.fdopen(w, "wb", buffering=0)
    writer = PipeWriter(out)
    writer.write_line(b"y" * BIG + b"\n")
    os.close(r)  # the peer is gone (EPIPE): closing must not block
    await writer.aclose(timeout=0)
    out.close()


async def test_whole_lines_pass_untouched() -> None:
    r, w = os.pipe()
    out = os.fdopen(w, "wb", buffering=0)
    writer = PipeWriter(out)
    peer = Peer(r)
    peer.start()
    lines = [b'{"n":%d}\n' % i for i in range(1000)]
    for line in lines:
        writer.write_line(line)
        await writer.drain()
    await writer.aclose(timeout=WAIT)
    out.close()
    assert peer.result() == b"".join(lines)
    os.close(r)
