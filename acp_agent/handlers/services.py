"""What the protocol handlers work with once ``initialize`` is done, each concern an
object of its own: the model providers (:class:`~acp_agent.providers.pool.Models`), the
open sessions and their store (:class:`~acp_agent.sessions.registry.OpenSessions`), the
sandbox, the warm-up and background work; and, loaded later, the factory of each turn's
world (:class:`~.turns.Turns`).

Loading late happens at two boundaries, both here:

1. This module: ``agent.py`` imports it (and with it the session handlers and what they
   stand on: the sessions and their store, the sandbox's policy, the slash commands'
   listing) for the first session opened (``handlers.opening``: after its answer) or the
   first other request past ``initialize``; the warm-up thread imports it sooner. Nothing
   on the way to the ``initialize`` reply imports it.
2. :mod:`.turnstage` (the turn engine, the tools, the handlers that run turns), imported
   by :attr:`Services.turns`: by the warm-up thread once a session is open, or by the
   first request that needs a turn's world. ``session/new`` never waits for it.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import IMPORTING
from ..client import ClientProxy
from ..config import Config, default_state_dir
from ..engine.childenv import child_environ
from ..engine.notices import notify
from ..engine.sandboxing import Sandboxing
from ..providers.pool import Models
from ..sessions.registry import OpenSessions
from ..sessions.session import Session
from ..sessions.store import Store
from . import catalog, endpoints, lifecycle, options
from .background import Background
from .warmup import Warmup

if TYPE_CHECKING:
    from . import turnstage
    from .opening import NewSession
    from .turns import Turns

__all__ = [
    "Services",
    "catalog",
    "endpoints",
    "lifecycle",
    "options",
    "turnstage",
]


@dataclass(eq=False)
class Services:
    models: Models
    client: ClientProxy
    warmup: Warmup
    sessions: OpenSessions
    background: Background
    sandboxing: Sandboxing
    turn_deadlines: dict[asyncio.Timeout, float]
    """The running turns' ``turn-timeout`` deadlines (see ``reload``)."""
    _turns: Turns | None = field(default=None, init=False)
    _turns_loading: asyncio.Future[Turns] | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

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
        return cls(models, client, warmup, sessions, Background(), Sandboxing(config),
                   {} if deadlines is None else deadlines)  # fmt: skip

    @property
    def config(self) -> Config:
        return self.models.config

    @property
    def sandboxed(self) -> bool:
        """Commands can be sandboxed here (``False`` until the probe's answer is in)."""
        return self.sandboxing.available

    @functools.cached_property
    def child_env(self) -> dict[str, str]:
        """The environment of commands run for the model (and of what reads the project
        for it): ours without the secrets."""
        return child_environ(self.config)

    @property
    def turns(self) -> Turns:
        """The factory of each turn's world, built on first use: past the second
        late-loaded boundary (:mod:`.turnstage`), which the warm-up usually has
        imported by then."""
        if self._turns is None:
            with IMPORTING, self._lock:  # (one import at a time: acp_agent.IMPORTING)
                if self._turns is None:
                    global turnstage
                    from . import turnstage  # the second late-loaded boundary (module doc)

                    self._turns = turnstage.Turns(
                        self.models, self.client, self.sessions, self.warmup, self.background,
                        self.sandboxing, self.child_env,
                    )  # fmt: skip
        return self._turns

    async def turns_ready(self) -> Turns:
        """:attr:`turns`, its stage imported in a worker thread if need be (the warm-up
        usually has done it: then at once). One worker thread for every caller: they
        go on in the order they came (a thread each would end in any order, and
        ``startedNewTurn`` belongs to the first steer)."""
        if self._turns is None:
            if self._turns_loading is None:
                self._turns_loading = asyncio.ensure_future(asyncio.to_thread(lambda: self.turns))
            await asyncio.shield(self._turns_loading)
        return self.turns

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

    async def open_new(self, new: NewSession) -> None:
        """Open the session a ``session/new`` was answered for (``handlers.opening``)."""
        await lifecycle.open_new(self, new)

    def opened(self, session: Session) -> None:
        """``session`` was opened and its response sent: the warm-up goes on (the SDK's
        import waited for this), and the session's first turn is readied."""
        self.warmup.start()
        self.warmup.opened.set()
        self.background(self._prepare(session))

    async def _prepare(self, session: Session) -> None:
        await self.warmup.warmed(turn=False)  # (it imports the turn stage)
        turns = await self.turns_ready()
        await turns.prepare(session)

    def cancel(self, session_id: str) -> None:
        """``session/cancel``: the session's turns, or a subagent's (it and its
        descendants only); unknown or idle sessions: nothing to do."""
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()
        elif self._turns is not None:  # (no turn ran: no child either)
            self._turns.subagents.cancel(session_id)

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
