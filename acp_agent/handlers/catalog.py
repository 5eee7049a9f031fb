"""The sessions as the client catalogues them: ``session/list``, ``session/set_title``,
``session/status``, ``session/archive`` and ``session/unarchive``.

What the client decides about a session as a whole is a record in the session's log
(``ClientTitle``, ``Archived``) and a field of its meta file and index entry, all stored
before the response: through the session's own log when it is open here
(:meth:`SessionLog.amend <acp_agent.sessions.sessionlog.SessionLog.amend>`), else with
:meth:`Store.amend <acp_agent.sessions.store.Store.amend>`, which never loads the session. A
session another agent process has open is refused (-32600): that process owns its log.

* A client's title is normalised (:func:`normalized_title`); once set, the agent never
  names the session itself (the flag is kept in the log, so also after a reload).
* ``session/status`` has no side effects: ``"open"`` when the session is in
  ``Services.sessions``, ``"saved"`` when only its log exists; nothing is opened, read,
  written or indexed.
* Archiving an open session first closes it exactly as ``session/close`` does
  (``lifecycle.release``: its running turn ends ``cancelled``). An archived session
  keeps its id and history and may still be loaded, resumed or forked: it stays
  archived (the schema asks clients to unarchive first; refusing would help nobody), and
  a fork of it is not archived. Deleting an archived session deletes it.
* A subagent's session is not the client's to manage: unknown here (-32002), like any id
  that names no stored session.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, cast

from ..errors import InternalError, InvalidParams, InvalidRequest, SessionNotFound
from ..protocol import UNSET
from ..protocol import types as t
from ..sessions.records import Archived, ClientTitle, now_iso
from .lifecycle import release
from .opening import check_path

if TYPE_CHECKING:
    from ..sessions.records import Archived, ClientTitle
    from ..sessions.session import Session
    from ..sessions.store import ArchiveFilter
    from .services import Services


TITLE_LIMIT = 200
"""The longest title kept, in characters (longer ones are cut at a character)."""

#: C0 and C1 control characters: read as whitespace in a title.
_CONTROLS = dict.fromkeys([*range(0x20), *range(0x7F, 0xA0)], " ")


async def list_sessions(sv: Services, p: t.ListSessionsRequest | None) -> t.ListSessionsResponse:
    p = p or t.ListSessionsRequest()
    cwd = p.cwd if isinstance(p.cwd, str) else None
    if cwd is not None:
        check_path(cwd, "cwd", "`cwd` must be an absolute path")
    archived: ArchiveFilter = "exclude"
    if p.archived in ("include", "only"):
        archived = cast("ArchiveFilter", p.archived)
    elif p.archived not in (UNSET, None, "exclude"):  # never read as "exclude"
        raise InvalidParams(
            f"Invalid params: unknown archive filter {p.archived!r}"
            " (exclude, include, only) - at `$.archived`"
        )
    cursor = p.cursor if isinstance(p.cursor, str) else None
    try:
        metas, next_cursor = await asyncio.to_thread(
            sv.sessions.store.page, cwd and os.path.normpath(cwd), cursor, archived=archived
        )
    except ValueError:
        raise InvalidParams("Invalid params: unknown cursor - at `$.cursor`") from None
    return t.ListSessionsResponse(
        sessions=[
            t.SessionInfo(
                session_id=m.id,
                cwd=m.cwd,
                additional_directories=m.additional_directories or UNSET,
                title=m.title or UNSET,
                updated_at=m.updated_at,
                archived=m.archived,
            )
            for m in metas
        ],
        next_cursor=next_cursor or UNSET,
    )


def normalized_title(title: str) -> str:
    """``title`` as stored: control characters and runs of whitespace (newlines too)
    become one space, none at either end, at most :data:`TITLE_LIMIT` characters.
    Nothing left is -32602."""
    text = " ".join(title.translate(_CONTROLS).split())[:TITLE_LIMIT].rstrip()
    if not text:
        raise InvalidParams(
            "Invalid params: the title is empty once whitespace and control characters"
            " are removed - at `$.title`"
        )
    return text


async def set_title(sv: Services, p: t.SetSessionTitleRequest) -> t.SetSessionTitleResponse:
    title, at = normalized_title(p.title), now_iso()
    open_here = sv.sessions.get(p.session_id)
    if open_here is not None and not open_here.read_only:
        # marked before the record is made durable: a turn ending meanwhile must
        # not name the session over the client's title
        open_here.title, open_here.titled_by_client = title, True
    session = await _record(sv, p.session_id, ClientTitle(title=title, at=at))
    if session is not None:
        await sv.client.session_update(
            session.id, t.SessionInfoUpdate(title=title, updated_at=at)
        )  # the log holds it already (as the ClientTitle record)
    return t.SetSessionTitleResponse(title=title)


async def session_status(sv: Services, p: t.SessionStatusRequest) -> t.SessionStatusResponse:
    if p.session_id in sv.sessions:
        return t.SessionStatusResponse(status="open")
    if await asyncio.to_thread(sv.sessions.store.exists, p.session_id):
        return t.SessionStatusResponse(status="saved")
    raise SessionNotFound(p.session_id)


async def archive_session(sv: Services, p: t.ArchiveSessionRequest) -> t.ArchiveSessionResponse:
    session = sv.sessions.get(p.session_id)
    if session is not None and not session.read_only:
        await release(sv, session)  # as session/close: cancelled, answered, freed
    try:
        await _record(sv, p.session_id, Archived(archived=True, at=now_iso()))
    except SessionNotFound:
        if session is None or session.read_only:
            raise  # else a session never stored: closed, nothing to keep
    if session is not None and session.read_only:
        await release(sv, session)  # only a view of a log that was let go meanwhile
    return t.ArchiveSessionResponse()


async def unarchive_session(
    sv: Services, p: t.UnarchiveSessionRequest
) -> t.UnarchiveSessionResponse:
    await _record(sv, p.session_id, Archived(archived=False, at=now_iso()))
    return t.UnarchiveSessionResponse()


async def _record(sv: Services, session_id: str, record: ClientTitle | Archived) -> Session | None:
    """Store ``record`` for good (its log, meta file and index entry); the session, if
    it is open here."""
    session = sv.sessions.get(session_id)
    if session is not None and not session.read_only:
        if session.log is not None:
            session.log.amend(record)
            await session.log.durable()
        return session
    try:
        await asyncio.to_thread(sv.sessions.store.amend, session_id, record)
    except FileNotFoundError:
        raise SessionNotFound(session_id) from None
    except BlockingIOError:
        raise InvalidRequest(
            f"Invalid request: session {session_id} is open in another acp-agent process;"
            " change it there, or once that process closes it",
            {"sessionId": session_id},
        ) from None
    except OSError as exc:
        raise InternalError(f"Cannot store session {session_id}: {exc.strerror}") from None
    return session
