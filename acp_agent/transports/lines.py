"""The lines between a network connection and the agent's :class:`~acp_agent.rpc.connection.
Connection`: an :class:`Inbox` it reads (each POST body or WebSocket text frame is one
message) and the sinks it writes, with back-pressure and a bound on slow readers.

:class:`Outbox` is what both sinks share: it counts the bytes written and not yet taken by
the network side; past ``high_water`` a writer's ``drain()`` waits, and one that waits
``stall`` seconds without the reader taking anything closes the connection (``on_stall``):
a client that stopped reading cannot make the agent buffer without end. :class:`FrameSink`
hands each message to a WebSocket pump (one text frame each); :class:`Router` (in
``http.py``) sorts them into SSE streams.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable

from ..rpc.framing import Oversized


class Inbox:
    """A :class:`~acp_agent.rpc.framing.LineSource` fed by the transport."""

    def __init__(self) -> None:
        self._lines: collections.deque[bytes | Oversized | None] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    def put(self, line: bytes | Oversized | None) -> None:
        """One message (``None``: no more)."""
        self._lines.append(line)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def end(self) -> None:
        self.put(None)

    async def readline(self) -> bytes | Oversized | None:
        while not self._lines:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        line = self._lines.popleft()
        if line is None:
            self._lines.appendleft(None)  # end stays the end
        return line


class SlowReader(Exception):
    """The client read nothing of what waited for it for ``stall`` seconds."""


class Outbox:
    """Bytes written and not yet taken, with a writer's ``drain()`` bounded in time."""

    def __init__(
        self, high_water: int, stall: float, on_stall: Callable[[SlowReader], None]
    ) -> None:
        self.high_water = high_water
        self.stall = stall
        self.on_stall = on_stall
        self.pending = 0
        self._room = asyncio.Event()
        self._room.set()
        self.closed = False

    def added(self, size: int) -> None:
        self.pending += size
        if self.pending > self.high_water:
            self._room.clear()

    def taken(self, size: int) -> None:
        self.pending -= size
        if self.pending <= self.high_water // 2:
            self._room.set()

    async def drain(self) -> None:
        if self._room.is_set() or self.closed:
            return
        try:
            await asyncio.wait_for(self._room.wait(), self.stall)
        except TimeoutError:
            if not self.closed:
                self._room.set()  # nobody waits on a closed connection
                self.on_stall(
                    SlowReader(
                        f"the client read none of the {self.pending} bytes waiting for it"
                        f" in {self.stall:g} s"
                    )
                )

    def release(self) -> None:
        """Nothing more is written: writers waiting for room go on."""
        self.closed = True
        self._room.set()


class FrameSink(Outbox):
    """Each line as one WebSocket text frame, sent by :meth:`pump` in order."""

    def __init__(
        self,
        send: Callable[[str], Awaitable[None]],
        high_water: int,
        stall: float,
        on_stall: Callable[[SlowReader], None],
    ) -> None:
        super().__init__(high_water, stall, on_stall)
        self._send = send
        self._queue: collections.deque[bytes] = collections.deque()
        self._wake = asyncio.Event()
        self._done = asyncio.Event()

    def write_line(self, line: bytes) -> None:
        if self.closed:
            return
        self._queue.append(line)
        self.added(len(line))
        self._wake.set()

    async def pump(self) -> None:
        """Send what is written until :meth:`aclose` (or the socket fails: the rest is
        dropped, the connection is going away)."""
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._queue:
                    line = self._queue.popleft()
                    self.taken(len(line))
                    await self._send(line[:-1].decode())
                if self.closed:
                    return
        finally:
            self._queue.clear()
            self._done.set()

    async def aclose(self, timeout: float = 1.0) -> None:
        """Send what is queued (for at most ``timeout`` seconds), then stop."""
        self.release()
        self._wake.set()
        try:
            await asyncio.wait_for(self._done.wait(), timeout)
        except TimeoutError:
            self._queue.clear()
