"""The sessions open on a connection, and the store they live in.

The store (and its index, ``sessionindex``) is built on first use, by the event loop or
the warm-up thread, whichever comes first; :meth:`OpenSessions.ready_store` opens the
index's database in a worker thread so that ``session/new`` never waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Protocol, TypeVar

from ..errors import InvalidParams, SessionNotFound
from .session import Session
from .sessionindex import SessionIndex
from .store import Store


class _HasSessionId(Protocol):
    @property
    def session_id(self) -> str: ...


P = TypeVar("P", bound=_HasSessionId)
R = TypeVar("R")


class OpenSessions(Mapping[str, Session]):
    """The client's own sessions open here (subagents' children live in
    ``engine.subagents``), by id; and the ids of the subagents' sessions the client was
    told about, which other requests may not name (:meth:`guard`)."""

    def __init__(self, state_dir: str, store: Store | None = None) -> None:
        self.state_dir = state_dir
        self._open: dict[str, Session] = {}
        self.restricted: set[str] = set()
        """Every subagent session shown to the client (live, or replayed by a load):
        restricted to ``session/cancel``."""
        self._store = store
        self._shared = store is not None
        self._lock = threading.Lock()

    def __getitem__(self, session_id: str) -> Session:
        return self._open[session_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._open)

    def __len__(self) -> int:
        return len(self._open)

    def require(self, session_id: str) -> Session:
        """The open session ``session_id``; ``-32002`` (``SessionNotFound``) otherwise."""
        session = self._open.get(session_id)
        if session is None:
            raise SessionNotFound(session_id)
        return session

    def guard(self, handler: Callable[[P], Awaitable[R]]) -> Callable[[P], Awaitable[R]]:
        """``handler``, refusing requests that name a subagent's session (-32602)."""

        async def checked(p: P) -> R:
            if p.session_id in self.restricted:
                raise InvalidParams(
                    f"Invalid params: session {p.session_id} is a subagent session; "
                    "it is restricted to session/cancel",
                    {"sessionId": p.session_id},
                )
            return await handler(p)

        return checked

    def add(self, session: Session) -> None:
        self._open[session.id] = session

    def remove(self, session: Session) -> None:
        if self._open.get(session.id) is session:
            del self._open[session.id]

    def is_open(self, session: Session) -> bool:
        """``session`` is still the one open under its id (not closed meanwhile)."""
        return self._open.get(session.id) is session

    @property
    def store(self) -> Store:
        """The sessions on disk, listed through their index."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    self._store = Store(self.state_dir, index=SessionIndex(self.state_dir))
        return self._store

    @property
    def owns_store(self) -> bool:
        """A store was built here (not shared with other connections): close it at exit."""
        return self._store is not None and not self._shared

    def ready_store(self) -> None:
        """The store and its index open (call from a worker thread)."""
        index = self.store.index
        if isinstance(index, SessionIndex):
            index.open()
