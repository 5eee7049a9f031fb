"""What ``acp-agent serve``'s connections share in one process: the configuration, the
store, who holds which session (:class:`~acp_agent.transports.holds.Holds`), the table of
connections with their limits, and the drain at the end.

A connection that ended is remembered (a bounded number of them) with why, so a request
that still names it is answered ``410 Gone`` with the reason (closed by the client, idle,
a slow reader, the server draining) rather than a bare ``404``.
"""

from __future__ import annotations

import asyncio
import collections
import secrets
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import log
from ..config import default_state_dir
from ..server import warm
from ..sessions.sessionindex import SessionIndex
from ..sessions.store import Store
from .holds import Holds
from .peer import Peer

if TYPE_CHECKING:
    from ..config import Config
    from ..rpc.framing import LineSink

REMEMBERED = 1024


@dataclass(frozen=True)
class Limits:
    """The bounds of one ``serve`` process (flags of the same names)."""

    max_connections: int = 256
    max_message_bytes: int = 32 * 1024 * 1024
    idle_timeout: float = 60.0
    """Seconds a Streamable HTTP connection may go without any stream open or request."""
    stall_timeout: float = 60.0
    """Seconds a client may read nothing of what waits for it (``high_water`` bytes)."""
    high_water: int = 1024 * 1024
    max_session_streams: int = 64
    keepalive: float = 15.0
    """Seconds between SSE comments on a quiet stream (proxies cut silent ones)."""


@dataclass
class Settings:
    """How ``serve`` was told to run (see ``command.py``)."""

    token: str | None
    allow_origins: frozenset[str] = frozenset()
    client_fs: bool = False
    limits: Limits = field(default_factory=Limits)


class Full(Exception):
    """No room for another connection."""


class Hub:
    def __init__(self, config: Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.limits = settings.limits
        self.holds = Holds()
        self.peers: dict[str, Peer] = {}
        self.gone: collections.OrderedDict[str, str] = collections.OrderedDict()
        self.draining = False
        self._store: Store | None = None
        self._drained: asyncio.Task[None] | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            state_dir = self.config.state_dir or default_state_dir()
            self._store = Store(state_dir, index=SessionIndex(state_dir))
        return self._store

    def warm(self) -> None:
        """What the first session needs, imported and opened in a worker thread at start
        (each connection's runtime warms nothing of its own: see ``peer.py``)."""
        opened = threading.Event()
        opened.set()
        index = self.store.index
        if isinstance(index, SessionIndex):
            index.open()
        warm(self.config, opened)

    def open(self, sink: LineSink) -> Peer:
        """A new connection's agent, writing to ``sink``. Raises :class:`Full`."""
        if self.draining or len(self.peers) >= self.limits.max_connections:
            raise Full()
        peer = Peer(new_id(), sink, self.config, self.store, self.holds,
                    client_fs=self.settings.client_fs)  # fmt: skip
        self.peers[peer.id] = peer
        log.info("connection opened", connection_id=peer.id, connections=len(self.peers))
        return peer

    def close(self, peer: Peer, reason: str) -> asyncio.Task[None]:
        """End ``peer`` (see :meth:`Peer.close`) and forget it, remembering why."""
        if self.peers.pop(peer.id, None) is not None:
            self.gone[peer.id] = reason
            while len(self.gone) > REMEMBERED:
                self.gone.popitem(last=False)
        return peer.close(reason)

    async def drain(self, grace: float = 5.0) -> None:
        """Stop: no new connection, every turn cancelled and answered, every connection
        ended, every session released and on disk (once: later calls wait for it)."""
        if self._drained is None:
            self._drained = asyncio.ensure_future(self._drain(grace))
        await asyncio.shield(self._drained)

    async def _drain(self, grace: float) -> None:
        self.draining = True
        peers = list(self.peers.values())
        tasks = [self.close(peer, "the server is shutting down") for peer in peers]
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        if self._store is not None:
            await asyncio.to_thread(self._store.writer.close)


def new_id() -> str:
    """A connection id nobody can guess (it is not a credential, but it names a
    connection's streams)."""
    return secrets.token_urlsafe(18)
