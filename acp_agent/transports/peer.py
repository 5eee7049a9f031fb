"""One ACP connection of ``acp-agent serve``: the agent stdio runs, on lines the network
brings.

Each connection has its own :class:`~acp_agent.rpc.connection.Connection` and
:class:`~acp_agent.handlers.agent.Agent` (its ``Services``: its ``initialize``, capabilities,
configuration as ``providers/set`` leaves it, open sessions and providers), and shares
with the process's other connections the store (one writer thread, one index) and the
:class:`~acp_agent.transports.holds.Holds` (who has which session open). Its routes are
the agent's, wrapped (:func:`guard`) to:

* refuse a session another connection holds (``holds.held_elsewhere``), claim one on
  ``session/load`` and ``session/resume`` before anything is read, and record who holds
  what once each request is answered;
* refuse a ``cwd`` (or additional directory) that is not a directory on this machine
  (-32602): in ``serve`` the workspace is the server's file system;
* unless ``--client-fs``, hide the client's ``fs``, ``terminal`` and terminal login from
  the agent: they are the client machine's, so tools run here.

When the connection goes away, it ends as stdio ends at end of input (:meth:`Peer.close`):
running turns are cancelled and answered, sessions flushed and released; they stay in
the store for another connection to load.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from .. import log
from ..client import ClientProxy
from ..errors import InvalidParams
from ..handlers.agent import Agent
from ..protocol import UNSET
from ..protocol import types as t
from ..rpc.connection import Connection, Route
from ..rpc.framing import LineSink, Oversized
from ..server import COALESCE_ENV, ChunkMerger
from .lines import Inbox

if TYPE_CHECKING:
    from ..config import Config
    from ..sessions.store import Store
    from .holds import Holds

OPENS = frozenset(("session/new", "session/load", "session/resume", "session/fork"))
"""Requests whose ``cwd`` must be a directory here."""
CLAIMS = frozenset(("session/load", "session/resume"))
"""Requests that take the session they name (claimed before the handler reads it)."""
LOOKS = frozenset(("session/fork", "session/status"))
"""Requests that may name a session another connection holds: they change nothing of it."""
HANDOVER = 10.0
"""Seconds a claim waits for a departing connection to release the session."""


class Peer:
    """The agent of one network connection."""

    def __init__(
        self,
        connection_id: str,
        sink: LineSink,
        config: Config,
        store: Store,
        holds: Holds,
        *,
        client_fs: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        self.id = connection_id
        self.inbox = Inbox()
        self.sink = sink
        self.holds = holds
        self.connection = Connection(self.inbox, sink)
        environ = os.environ if env is None else env
        if environ.get(COALESCE_ENV, "") not in ("", "0"):
            self.connection.coalesce["session/update"] = ChunkMerger()
        self.agent = Agent(config, ClientProxy(self.connection), store=store)
        self.connection.routes.update(guard(self, self.agent.routes(), client_fs))
        self.reason: str | None = None
        self.closed = asyncio.Event()
        self._closing: asyncio.Task[None] | None = None
        self._serving = asyncio.ensure_future(self.connection.serve())

    def feed(self, line: bytes | Oversized) -> None:
        """One message from the client."""
        self.inbox.put(line)

    def close(self, reason: str) -> asyncio.Task[None]:
        """End the connection (once; later calls return the same task): turns cancelled
        and answered while the transport can still carry it, sessions released."""
        if self._closing is None:
            self.reason = reason
            self.holds.leaving(self.id)  # a claim of its sessions waits for their release
            self._closing = asyncio.ensure_future(self._close())
        return self._closing

    async def _close(self) -> None:
        log.info("connection closing", connection_id=self.id, reason=self.reason)
        self.inbox.end()
        try:
            self.agent.cancel_all()  # as at stdin's end: every turn ends now
            await self.connection.close()
            await self.agent.shutdown()
        finally:
            released = self.holds.release_all(self.id)
            await self.sink.aclose()
            await asyncio.wait([self._serving], timeout=1.0)
            self.closed.set()
            log.info("connection closed", connection_id=self.id, released=released)


def guard(peer: Peer, routes: dict[str, Route[Any]], client_fs: bool) -> dict[str, Route[Any]]:
    """``routes`` with ``serve``'s rules around them (see the module's docstring)."""
    out: dict[str, Route[Any]] = {}
    for method, route in routes.items():
        if route.notification:
            out[method] = route
        elif method == "initialize":
            out[method] = Route(route.params_type, _initialize(route.handler, client_fs))
        else:
            handler = _guarded(peer, method, route.handler)
            out[method] = Route(route.params_type, handler, on_cancel=route.on_cancel)
    return out


def _initialize(
    handler: Callable[[t.InitializeRequest], Awaitable[Any]], client_fs: bool
) -> Callable[[t.InitializeRequest], Awaitable[Any]]:
    async def initialize(p: t.InitializeRequest) -> Any:
        caps = p.client_capabilities
        if not client_fs and isinstance(caps, t.ClientCapabilities):
            local = msgspec.structs.replace(caps, fs=UNSET, terminal=UNSET, auth=UNSET)
            p = msgspec.structs.replace(p, client_capabilities=local)
        return await handler(p)

    return initialize


def _guarded(
    peer: Peer, method: str, handler: Callable[[Any], Awaitable[Any]]
) -> Callable[[Any], Awaitable[Any]]:
    holds = peer.holds
    is_open = peer.agent.has_open
    claims = method in CLAIMS
    held = method not in LOOKS

    async def call(p: Any) -> Any:
        if not peer.agent.initialized:
            return await handler(p)  # it refuses: not initialized
        if method in OPENS:
            _check_dirs(p)
        sid = getattr(p, "session_id", None)
        if not isinstance(sid, str) or not held:
            result = await handler(p)
        else:
            if claims:
                await holds.claim_when_free(sid, peer.id, HANDOVER)
            else:
                holds.check(sid, peer.id)
            try:
                result = await handler(p)
            finally:
                holds.settle(sid, peer.id, is_open(sid))
        opened = getattr(result, "session_id", None)  # session/new, fork
        if isinstance(opened, str):
            holds.settle(opened, peer.id, is_open(opened))
        return result

    return call


def _check_dirs(p: Any) -> None:
    """The session's roots must be directories on this machine."""
    extra = getattr(p, "additional_directories", UNSET)
    paths = [("cwd", p.cwd)] + [
        (f"additionalDirectories[{i}]", d) for i, d in enumerate(extra or ())
    ]
    for field, path in paths:
        checkable = isinstance(path, str) and os.path.isabs(path) and "\0" not in path
        if checkable and not os.path.isdir(path):
            raise InvalidParams(
                f"Invalid params: {path!r} is not a directory on the agent's machine"
                " (`acp-agent serve` works on the server's files) - at `$." + field + "`"
            )
