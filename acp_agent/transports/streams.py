"""Streamable HTTP's way out: the agent's messages sorted into SSE streams.

One connection-scoped stream and one per session (RFD, revision 2026-05-04), as the SDK's
``createHttpStream`` opens them: a message whose ``params`` name a ``sessionId`` goes to
that session's stream; a response goes where its request's POST said (its
``Acp-Session-Id``, except ``session/load``'s: the connection's), anything else to the
connection's. A stream without a reader keeps its messages for the next one (the SDK
opens a session's stream when it first sees the session's id, and again after it
dropped); :class:`~acp_agent.transports.lines.Outbox` bounds what they may hold.

Two streams are two TCP connections (through a balancer, two of its buffers), so nothing
orders one against the other, yet a client reads the end of ``session/load`` (its
response, on the connection's stream) as the end of the replay (on the session's): the
response waits until the replay written before it has been handed to the session
stream's socket (:meth:`Router.sent`), when that stream has a reader.

Routing costs one partial decode of each outgoing line (``id``, ``method`` and
``params.sessionId``; msgspec skips the rest).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from ..rpc.envelope import request_key, valid_id
from .lines import Outbox, SlowReader

KEEPALIVE = b":\n\n"


class _Params(msgspec.Struct):
    sessionId: Any = UNSET  # (the wire's name)


class Probe(msgspec.Struct):
    """What routing reads of a message."""

    id: Any = UNSET
    method: Any = UNSET
    params: _Params | UnsetType = UNSET

    @property
    def session_id(self) -> str | None:
        sid = self.params.sessionId if isinstance(self.params, _Params) else None
        return sid if isinstance(sid, str) else None


_probe = msgspec.json.Decoder(Probe)


def probe(line: bytes) -> Probe:
    """The routing facts of a message the agent wrote (always an object)."""
    return _probe.decode(line)


class Mailbox:
    """One SSE stream's messages, and whether a response is reading them."""

    __slots__ = ("ended", "lines", "reader", "sending", "session_id", "wake")

    def __init__(self, session_id: str | None = None) -> None:
        self.session_id = session_id
        self.lines: collections.deque[bytes] = collections.deque()
        self.reader: object | None = None
        self.wake = asyncio.Event()
        self.ended = False
        self.sending = False

    def attach(self, reader: object) -> bool:
        if self.reader is not None:
            return False
        self.reader = reader
        return True

    def detach(self, reader: object) -> None:
        if self.reader is reader:
            self.reader = None


class Router(Outbox):
    """The :class:`~acp_agent.rpc.framing.LineSink` of one Streamable HTTP connection."""

    def __init__(
        self,
        high_water: int,
        stall: float,
        on_stall: Callable[[SlowReader], None],
        max_streams: int,
    ) -> None:
        super().__init__(high_water, stall, on_stall)
        self.connection = Mailbox()
        self.sessions: dict[str, Mailbox] = {}
        self.max_streams = max_streams
        self._responses: dict[tuple[type, Any], tuple[str | None, str | None]] = {}
        """Where the response to each client request goes (a session id, or None), and
        the session whose stream it follows (``session/load``'s)."""
        self._held: dict[str, list[bytes]] = {}
        """Connection-stream lines waiting for a session stream to be written out."""
        self.asked: dict[tuple[type, Any], str | None] = {}
        """The session each of the agent's requests to the client came on."""
        self._initialize: tuple[tuple[type, Any], asyncio.Future[bytes]] | None = None
        self._took = asyncio.Event()
        self.touched = asyncio.get_running_loop().time()

    def touch(self) -> None:
        """The client did something (a request, a stream opened or closed)."""
        self.touched = asyncio.get_running_loop().time()

    def reading(self) -> bool:
        """Whether any stream of the connection has a reader."""
        return self.connection.reader is not None or any(
            box.reader is not None for box in self.sessions.values()
        )

    # ------------------------------------------------------------------ the client's side

    def expect(self, request_id: Any, session_id: str | None, after: str | None = None) -> None:
        """A client request is on its way in: its response goes to ``session_id``'s
        stream (``None``: the connection's), after what ``after``'s stream holds."""
        self._responses[request_key(request_id)] = (session_id, after)

    def initialize(self, request_id: Any) -> asyncio.Future[bytes]:
        """The response to ``initialize``, which its POST answers itself."""
        future = asyncio.get_running_loop().create_future()
        self._initialize = (request_key(request_id), future)
        return future

    def mailbox(self, session_id: str | None) -> Mailbox | None:
        """A stream's mailbox, made if need be; ``None`` when the connection has as many
        as it may."""
        if session_id is None:
            return self.connection
        box = self.sessions.get(session_id)
        if box is None:
            if len(self.sessions) >= self.max_streams:
                return None
            box = self.sessions[session_id] = Mailbox(session_id)
            box.ended = self.closed
        return box

    # ------------------------------------------------------------------ the agent's side

    def write_line(self, line: bytes) -> None:
        if self.closed:
            return
        p = probe(line)
        if p.method is UNSET:  # a response (or an error about an unreadable message)
            key = request_key(p.id) if valid_id(p.id) else None
            if self._initialize is not None and key == self._initialize[0]:
                future = self._initialize[1]
                self._initialize = None
                if not future.done():
                    future.set_result(line)
                return
            route = None if key is None else self._responses.pop(key, None)
            session_id, after = route or (None, None)
            behind = self.sessions.get(after) if after is not None else None
            if behind is not None and behind.reader is not None and (
                behind.lines or behind.sending
            ):
                self._held.setdefault(behind.session_id or "", []).append(line)
                self.added(len(line))
                return
        else:
            session_id = p.session_id
            if p.id is not UNSET and valid_id(p.id):
                self.asked[request_key(p.id)] = session_id
        box = self.mailbox(session_id) or self.connection
        box.lines.append(line)
        self.added(len(line))
        box.wake.set()

    def sent(self, box: Mailbox, left: bool = False) -> None:
        """What ``box`` held was written to its socket (or its reader ``left``): what
        waited for that goes to the connection's stream."""
        if (box.lines and not left) or box.session_id is None:
            return
        held = self._held.pop(box.session_id, None)
        if held:
            self.connection.lines.extend(held)
            self.connection.wake.set()

    async def aclose(self, timeout: float = 1.0) -> None:
        """No more messages: each stream sends what it holds (for at most ``timeout``
        seconds) and ends."""
        for held in self._held.values():
            self.connection.lines.extend(held)
        self._held.clear()
        self.release()
        boxes = [self.connection, *self.sessions.values()]
        for box in boxes:
            box.ended = True
            box.wake.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while any(box.lines and box.reader is not None for box in boxes):
            self._took.clear()
            try:
                await asyncio.wait_for(self._took.wait(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                break

    def take(self, box: Mailbox) -> bytes:
        """What ``box`` holds as SSE events (one ``data:`` line each), taken."""
        lines = box.lines
        size = 0
        parts = []
        while lines:
            line = lines.popleft()
            size += len(line)
            parts.append(b"data: " + line + b"\n")  # the line ends with its own \n
        self.taken(size)
        self._took.set()
        return b"".join(parts)
