"""Which connection holds which open session: the one thing ``acp-agent serve``'s
connections share about sessions (everything else of a session is its connection's own
``Services``, and the store they all write through).

A session is held by the connection that has it open (``session/new``, ``load``,
``resume``, ``fork``) until that connection closes it, deletes it, archives it or goes
away. Another connection naming it is refused with :func:`held_elsewhere` until then, so
one conversation never has two writers or two editors streaming into it; it may still
list it, ask its status or fork it (which read its log and change nothing). Once
released, any connection reattaches it with ``session/load`` or ``session/resume``; one
that comes while the holder is going away (its turns being cancelled, its sessions
flushed) waits for that rather than be refused (:meth:`Holds.claim_when_free`).
"""

from __future__ import annotations

import asyncio
import contextlib

from ..errors import InvalidRequest


def held_elsewhere(session_id: str) -> InvalidRequest:
    """The refusal a connection gets for a session another connection holds."""
    return InvalidRequest(
        f"Invalid request: session {session_id} is open on another connection to this agent;"
        " it can be loaded or resumed here once that connection closes it or goes away",
        {"sessionId": session_id},
    )


class Holds:
    """Session id -> the id of the connection holding it, for one process."""

    def __init__(self) -> None:
        self._holder: dict[str, str] = {}
        self._leaving: dict[str, asyncio.Event] = {}

    def holder(self, session_id: str) -> str | None:
        return self._holder.get(session_id)

    def check(self, session_id: str, connection_id: str) -> None:
        """Raise :func:`held_elsewhere` unless ``session_id`` is free or held by
        ``connection_id``."""
        holder = self._holder.get(session_id)
        if holder is not None and holder != connection_id:
            raise held_elsewhere(session_id)

    def claim(self, session_id: str, connection_id: str) -> None:
        """Hold ``session_id`` for ``connection_id`` (checked first: see :meth:`check`)."""
        self.check(session_id, connection_id)
        self._holder[session_id] = connection_id

    async def claim_when_free(self, session_id: str, connection_id: str, wait: float) -> None:
        """:meth:`claim`, after the holder's release if it is going away (for at most
        ``wait`` seconds)."""
        holder = self._holder.get(session_id)
        gone = self._leaving.get(holder) if holder is not None else None
        if gone is not None and holder != connection_id:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gone.wait(), wait)
        self.claim(session_id, connection_id)

    def leaving(self, connection_id: str) -> None:
        """``connection_id`` is going away: its sessions are released soon."""
        self._leaving.setdefault(connection_id, asyncio.Event())

    def is_leaving(self, connection_id: str) -> bool:
        return connection_id in self._leaving

    def settle(self, session_id: str, connection_id: str, is_open: bool) -> None:
        """After a request of ``connection_id`` about ``session_id``: it holds the session
        exactly when the session is open on it (``is_open``)."""
        if is_open:
            self._holder.setdefault(session_id, connection_id)
        elif self._holder.get(session_id) == connection_id:
            del self._holder[session_id]

    def release_all(self, connection_id: str) -> list[str]:
        """Release every session ``connection_id`` holds (it went away); their ids."""
        mine = [sid for sid, holder in self._holder.items() if holder == connection_id]
        for session_id in mine:
            del self._holder[session_id]
        gone = self._leaving.pop(connection_id, None)
        if gone is not None:
            gone.set()
        return mine
