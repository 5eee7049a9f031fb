"""What the protocol handlers work with once ``initialize`` is done, each concern an
object of its own: the model providers (:class:`~acp_agent.providers.pool.Models`), the
open sessions and their store (:class:`~acp_agent.sessions.registry.OpenSessions`), the
factory of each turn's world (:class:`~.turns.Turns`), the warm-up and background work.

This module is the late-loaded boundary: ``agent.py`` imports it (and with it every
handler and what they stand on: sessions, the engine, the tools) on the first request
past ``initialize``, and the warm-up thread imports it sooner. Nothing on the way to the
``initialize`` reply imports it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..client import ClientProxy
from ..config import Config, default_state_dir
from ..engine.notices import notify
from ..engine.sandboxing import Sandboxing
from ..mcp import deliver
from ..providers.pool import Models
from ..sessions.registry import OpenSessions
from ..sessions.session import Session
from ..sessions.store import Store
from . import catalog, endpoints, lifecycle, options, prompting, steering
from .background import Background
from .turns import Turns
from .warmup import Warmup

__all__ = [
    "Services",
    "catalog",
    "deliver",
    "endpoints",
    "lifecycle",
    "options",
    "prompting",
    "steering",
]


@dataclass(eq=False)
class Services:
    models: Models
    client: ClientProxy
    warmup: Warmup
    sessions: OpenSessions
    turns: Turns
    background: Background
    sandboxing: Sandboxing
    turn_deadlines: dict[asyncio.Timeout, float]
    """The running turns' ``turn-timeout`` deadlines (see ``reload``)."""

    @classmethod
    def build(
        cls,
        models: Models,
        client: ClientProxy,
        warmup: Warmup,
        store: Store | None = None,
        deadlines: dict[asyncio.Timeout, float] | None = None,
    ) -> Services:
        """``store``: one shared with other connections (left open at shutdown)."""
        config = models.config
        sessions = OpenSessions(config.state_dir or default_state_dir(), store)
        background = Background()
        sandboxing = Sandboxing(config)
        turns = Turns(models, client, sessions, warmup, background, sandboxing)
        return cls(models, client, warmup, sessions, turns, background, sandboxing,
                   {} if deadlines is None else deadlines)  # fmt: skip

    @property
    def config(self) -> Config:
        return self.models.config

    async def notify(
        self,
        session: Session,
        severity: str,
        title: str,
        description: str | None = None,
        *,
        fallback: bool = False,
    ) -> None:
        """A live advisory for ``session``'s user (see ``engine.notices``)."""
        await notify(self.client, session, severity, title, description, fallback=fallback)

    def opened(self, session: Session) -> None:
        """``session`` was opened and its response sent: the warm-up goes on (the SDK's
        import waited for this), and the session's first turn is readied."""
        self.warmup.start()
        self.warmup.opened.set()
        self.background(self.turns.prepare(session))

    def cancel_all(self) -> None:
        for session in self.sessions.values():
            session.cancel()

    async def shutdown(self) -> None:
        self.cancel_all()
        sessions = list(self.sessions.values())
        if self.sessions.owns_store:
            for session in sessions:
                session.close()  # flushed, synced, ownership released (by the disk writer)
        else:  # a shared store: another connection of this process may open these sessions
            # as soon as this returns, so their logs are released by then
            await asyncio.gather(*(session.aclose() for session in sessions))
        hubs = [s.mcp.aclose() for s in sessions if s.mcp is not None]
        if hubs:  # MCP servers are child processes: never leave them behind
            await asyncio.wait_for(asyncio.gather(*hubs, return_exceptions=True), 6.0)
        await self.models.aclose()
        self.sandboxing.close()
        if self.sessions.owns_store:  # every queued write reaches the disk before exit
            await asyncio.to_thread(self.sessions.store.writer.close)
