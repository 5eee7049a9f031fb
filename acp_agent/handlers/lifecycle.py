"""Session lifecycle: ``session/new``, ``load``, ``resume``, ``fork``, ``close`` and
``delete`` (listing, titles, status and archiving are :mod:`.catalog`'s).

Sessions live in ``Runtime.sessions`` while open in this process and in the store for
good: load/resume/fork bring a stored one back (``replay.restore``), close releases it,
delete removes it from the disk. A session whose log another process owns is opened
read-only (replayable, not promptable) until that process lets it go (:func:`take_over`).
After each response the client is told the session's commands, pending notices and
usage (:func:`announce`), and MCP servers start in the background (:func:`attach`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import log
from ..engine.permissions import MODE_IDS
from ..errors import InternalError, InvalidParams, InvalidRequest, SessionNotFound
from ..protocol import UnsetType
from ..protocol import types as t
from .auth import require_key
from .options import config_options, modes

if TYPE_CHECKING:
    from ..engine.instructions import ClientPrompt
    from ..sessions.records import Record
    from ..sessions.replay import State
    from ..sessions.session import Session
    from ..sessions.store import Snapshot
    from ..sessions.transcript import Uses
    from .runtime import Runtime

    Reading = tuple[Snapshot, Uses]
    """A log to replay: its snapshot, and what a first pass over it learned."""

async def new_session(rt: Runtime, p: t.NewSessionRequest) -> t.NewSessionResponse:
    from ..sessions.session import Session, new_session_id

    require_key(rt.config)
    cwd, directories = roots(p.cwd, p.additional_directories)
    prompt = client_prompt(p.system_prompt)
    session = Session(
        id=new_session_id(),
        cwd=cwd,
        emit_fn=rt.client.session_update,
        mode=rt.config.default_mode,
        model=rt.config.model,
        thinking=rt.config.thinking,
        additional_directories=directories,
    )
    await _store_new(rt, session)
    if prompt is not None:
        session.set_client_prompt(prompt)
    await _opened(rt, session, p.mcp_servers)
    return t.NewSessionResponse(
        session_id=session.id, modes=modes(session), config_options=config_options(rt, session)
    )


async def load_session(rt: Runtime, p: t.LoadSessionRequest) -> t.LoadSessionResponse:
    require_key(rt.config)
    cwd, directories = roots(p.cwd, p.additional_directories)
    prompt = client_prompt(p.system_prompt)
    session, reading = await _open(rt, p.session_id, cwd, directories, read=True)
    try:
        if prompt is not None:
            session.set_client_prompt(prompt)
        await _register(rt, session, p.mcp_servers)
        if reading is not None:
            await _replay(rt, session, reading)  # the whole history, then the response
    finally:
        if reading is not None:
            reading[0].close()
    _announce_later(rt, session)
    return t.LoadSessionResponse(modes=modes(session), config_options=config_options(rt, session))


async def _replay(rt: Runtime, session: Session, reading: Reading) -> None:
    """Stream the log's transcript (and its subagents') to the client: read and
    materialized in a worker thread a batch at a time (a second pass over the snapshot),
    the next batch while this one is sent."""
    from ..sessions.records import bulk
    from ..sessions.transcript import Pair, load_batches

    snapshot, uses = reading
    caps = rt.client.capabilities
    batches = load_batches(
        session.id, snapshot.records(), caps, uses.children, live=session.read_only, uses=uses
    )

    def read() -> list[Pair] | None:
        with bulk():
            return next(batches, None)

    loop = asyncio.get_running_loop()
    ahead = loop.run_in_executor(None, read)  # the next batch is read while this one is sent
    try:
        while (batch := await ahead) is not None:
            ahead = loop.run_in_executor(None, read)
            children = {sid for sid, _ in batch if sid != session.id}
            if children:  # shown as subagents: restricted sessions, like live ones
                rt.subagents.shown(children)
            for sid, update in batch:  # subagents' under their ids; already in the log
                await session.emit_fn(sid, update)
    finally:
        if not ahead.done():  # the snapshot is closed next: let the thread finish with it
            await asyncio.wait([ahead])


async def resume_session(rt: Runtime, p: t.ResumeSessionRequest) -> t.ResumeSessionResponse:
    require_key(rt.config)
    cwd, directories = roots(p.cwd, p.additional_directories)
    prompt = client_prompt(p.system_prompt)
    session, _ = await _open(rt, p.session_id, cwd, directories, read=False)
    if prompt is not None:
        session.set_client_prompt(prompt)
    await _opened(rt, session, p.mcp_servers)
    return t.ResumeSessionResponse(
        modes=modes(session), config_options=config_options(rt, session)
    )


async def fork_session(rt: Runtime, p: t.ForkSessionRequest) -> t.ForkSessionResponse:
    from ..sessions.records import Archived, Header, Roots
    from ..sessions.replay import restore
    from ..sessions.session import new_session_id

    require_key(rt.config)
    cwd, directories = roots(p.cwd, p.additional_directories)
    prompt = client_prompt(p.system_prompt)
    source = rt.sessions.get(p.session_id)
    if source is not None:
        source.flush()
    try:
        records = await asyncio.to_thread(rt.store.read, p.session_id)
    except FileNotFoundError:
        raise SessionNotFound(p.session_id) from None
    except OSError as exc:
        raise InternalError(f"Cannot read session {p.session_id}: {exc.strerror}") from None
    body = [r for r in records if not isinstance(r, Header | Roots | Archived)]  # a new one
    session = _restored(rt, new_session_id(), restore(body), cwd, directories)
    await _store_new(rt, session, body, forked_from=p.session_id)
    if prompt is not None:
        session.set_client_prompt(prompt)
    await _opened(rt, session, p.mcp_servers)
    return t.ForkSessionResponse(
        session_id=session.id, modes=modes(session), config_options=config_options(rt, session)
    )


async def close_session(rt: Runtime, p: t.CloseSessionRequest) -> t.CloseSessionResponse:
    await release(rt, rt.session(p.session_id))
    return t.CloseSessionResponse()


async def delete_session(rt: Runtime, p: t.DeleteSessionRequest) -> t.DeleteSessionResponse:
    session = rt.sessions.get(p.session_id)
    if session is not None:
        await release(rt, session)
    await asyncio.to_thread(rt.store.delete, p.session_id)  # unknown ids are fine
    return t.DeleteSessionResponse()


async def release(rt: Runtime, session: Session) -> None:
    """Cancel the session's turns, let them answer, then free it (and its log)."""
    session.cancel()
    tasks = [turn.task for turn in session.turns if turn.task is not None]
    if tasks:
        await asyncio.wait(tasks, timeout=5.0)
    rt.sessions.pop(session.id, None)
    await session.aclose()
    if session.mcp is not None:
        await session.mcp.aclose()
        session.mcp = None


async def take_over(rt: Runtime, session: Session) -> None:
    """Prompting a session loaded read-only: own it now if its owner let it go."""
    from ..sessions.replay import restore

    try:
        opened = await asyncio.to_thread(rt.store.open_reading, session.id, restore)
        writer, state, snapshot = opened
        snapshot.close()
    except OSError:
        writer = None
    if writer is None:
        raise InvalidRequest(
            f"Invalid request: session {session.id} is open in another acp-agent process;"
            " it is read-only here until that process closes it",
            {"sessionId": session.id},
        )
    session.restore(state)  # it may have gone on over there
    session.log, session.read_only = writer, False
    session.set_mode(session.mode)  # keep what this client chose meanwhile


def client_prompt(value: t.SystemPrompt | UnsetType | None) -> ClientPrompt | None:
    """A lifecycle request's ``systemPrompt``, checked before anything is created:
    ``append`` and ``override`` of text blocks; anything else is -32602."""
    from ..engine.instructions import ClientPrompt

    if value is None or isinstance(value, UnsetType):
        return None
    if value.mode not in ("append", "override"):
        raise InvalidParams(
            f"Invalid params: system prompt mode {value.mode!r} is not supported"
            " (append, override) - at `$.systemPrompt.mode`"
        )
    if not value.content:
        raise InvalidParams("Invalid params: an empty system prompt - at `$.systemPrompt.content`")
    texts: list[str] = []
    for i, block in enumerate(value.content):
        if not isinstance(block, t.TextContent):
            raise InvalidParams(
                f"Invalid params: system prompts take text blocks only, got {type(block).__name__}"
                f" - at `$.systemPrompt.content[{i}]`"
            )
        texts.append(block.text)
    return ClientPrompt(value.mode, "\n\n".join(texts).strip())


def roots(cwd: str, directories: list[str] | UnsetType) -> tuple[str, list[str]]:
    """Validate a lifecycle request's roots (before anything is created or loaded)."""
    check_path(cwd, "cwd", "`cwd` must be an absolute path")
    extra = [] if isinstance(directories, UnsetType) else directories
    for i, path in enumerate(extra):
        check_path(
            path,
            f"additionalDirectories[{i}]",
            "additional directories must be absolute paths",
        )
    return os.path.normpath(cwd), [os.path.normpath(path) for path in extra]


def check_path(path: str, field: str, rule: str) -> None:
    """A path from the client that will reach ``os`` calls: absolute, and no NUL byte
    (which every ``os`` call refuses)."""
    if "\0" in path:
        raise InvalidParams(f"Invalid params: a path must not contain NUL bytes - at `$.{field}`")
    if not path or not os.path.isabs(path):
        raise InvalidParams(f"Invalid params: {rule}, got {path!r} - at `$.{field}`")


# ---------------------------------------------------------------------- opening


async def _store_new(
    rt: Runtime, session: Session, body: Sequence[Record] = (), **header: Any
) -> None:
    """Create the session's log: a header, ``body`` (a fork's copy) and the settings."""
    from ..sessions.records import Header, now_iso

    head = Header(
        id=session.id,
        cwd=session.cwd,
        additional_directories=list(session.additional_directories),
        created_at=now_iso(),
        **header,
    )
    records: list[Record] = [*body, session.settings_record()]
    try:
        session.log = await asyncio.to_thread(rt.store.create, head, records)
        session.stored_roots = (head.cwd, head.additional_directories)
    except OSError as exc:  # a taken id (practically never): this session is not stored
        log.warning("cannot store the session; it lives in memory only", error=str(exc))


async def _open(
    rt: Runtime, session_id: str, cwd: str, directories: list[str], *, read: bool
) -> tuple[Session, Reading | None]:
    """The session, in memory (brought back from the store if need be), with the given
    roots; and, if ``read``, its log to replay (the caller closes it)."""
    from ..sessions.replay import scan

    session = rt.sessions.get(session_id)
    if session is not None and not session.read_only:
        if session.busy:
            raise InvalidRequest(f"Invalid request: session {session_id} has a running turn")
        session.cwd, session.additional_directories = cwd, directories
        session.flush()
        reading = None
        if read and session.log:
            try:
                reading = await asyncio.to_thread(_reread, rt, session_id)
            except OSError:
                reading = None
        return session, reading
    try:
        writer, (state, uses), snapshot = await asyncio.to_thread(
            rt.store.open_reading, session_id, scan
        )
    except FileNotFoundError:
        raise SessionNotFound(session_id) from None
    except OSError as exc:
        log.error("cannot read a stored session", session_id=session_id, error=str(exc))
        raise InternalError(f"Cannot read session {session_id}: {exc.strerror}") from None
    if not read:
        snapshot.close()
    session = _restored(rt, session_id, state, cwd, directories)
    session.log, session.read_only = writer, writer is None
    return session, (snapshot, uses) if read else None


def _reread(rt: Runtime, session_id: str) -> Reading:
    """The log of a session open here, to replay (a worker thread: the first pass)."""
    from ..sessions.transcript import Uses

    snapshot = rt.store.take_snapshot(session_id)
    uses = Uses()
    try:
        for _ in uses.tap(snapshot.records()):
            pass
    except BaseException:
        snapshot.close()
        raise
    return snapshot, uses


def _restored(
    rt: Runtime, session_id: str, state: State, cwd: str, directories: list[str]
) -> Session:
    """A session brought back from a log's state (load, resume, fork). A mode or model
    this configuration no longer offers falls back, with a notice."""
    from ..sessions.session import Session

    session = Session(
        id=session_id,
        cwd=cwd,
        emit_fn=rt.client.session_update,
        mode=state.mode if state.mode in MODE_IDS else rt.config.default_mode,
        model=state.model if state.model in rt.models else rt.config.model,
        thinking=state.thinking or rt.config.thinking,
        additional_directories=directories,
    )
    session.restore(state)
    if state.model and state.model != session.model:
        session.pending_notices.append(
            (
                "warning",
                "Model not available",
                f"{state.model} is not configured here; the session continues on {session.model}.",
            )
        )
    return session


async def _opened(
    rt: Runtime, session: Session, servers: Sequence[t.McpServerAny] | UnsetType
) -> None:
    """The session is open: register it, and tell the client the rest once the response
    is out."""
    await _register(rt, session, servers)
    _announce_later(rt, session)


async def _register(
    rt: Runtime, session: Session, servers: Sequence[t.McpServerAny] | UnsetType
) -> None:
    from .commands import load_prompt_commands

    rt.sessions[session.id] = session
    session.prompt_commands = await asyncio.to_thread(load_prompt_commands, session.cwd)
    attach(rt, session, servers)


def _announce_later(rt: Runtime, session: Session) -> None:
    asyncio.get_running_loop().call_soon(announce, rt, session)


def attach(rt: Runtime, session: Session, servers: Sequence[t.McpServerAny] | UnsetType) -> None:
    """Give an opened session (in the background) its MCP servers; ``servers`` is the
    complete list for this connection."""
    if session.mcp is not None:  # load/resume again: the client's list replaces it
        rt.background(session.mcp.aclose())
        session.mcp = None
    if servers:
        from ..mcp import McpHub

        async def problem(severity: str, title: str, description: str | None) -> None:
            await rt.notify(session, severity, title, description, fallback=True)

        async def changed() -> None:
            await send_commands(rt, session)

        async def acp(request: t.MessageMcpRequest) -> t.MessageMcpResponseAny:
            response: t.MessageMcpResponseAny = await rt.client.call(
                "mcp/message", request, t.MessageMcpResponseAny
            )
            return response

        session.mcp = McpHub(
            list(servers), cwd=session.cwd, on_problem=problem, on_change=changed, acp=acp
        )
        session.mcp.start()


def announce(rt: Runtime, session: Session) -> None:
    """After the session/new (load, resume, fork) response: commands, notices, usage;
    the process's warm-up (started by ``initialize``, else now) and the session's."""
    rt.background(_announce(rt, session))
    rt.warm_up(session)


async def _announce(rt: Runtime, session: Session) -> None:
    if session.log is not None:
        session.log.watch(lambda error: rt.background(_saving(rt, session, error)))
    await send_commands(rt, session)
    while session.pending_notices:
        severity, title, description = session.pending_notices.pop(0)
        await rt.notify(session, severity, title, description, fallback=True)
    await session.emit(session.usage_update(rt.model_info_for(session.model).context_window))


async def _saving(rt: Runtime, session: Session, error: OSError | None) -> None:
    """Tell the user, once, that the session is not being saved, and, if so told, when it
    is saved again. The conversation goes on either way."""
    if error is not None and not session.unsaved_told:
        session.unsaved_told = True
        reason = error.strerror or str(error)
        await rt.notify(
            session,
            "warning",
            "This session is not being saved",
            f"{reason}. The conversation goes on; everything is kept and saved as soon as "
            "writing to the state directory works again.",
            fallback=True,
        )
    elif error is None and session.unsaved_told:
        session.unsaved_told = False
        await rt.notify(session, "info", "This session is saved again", fallback=True)


async def send_commands(rt: Runtime, session: Session) -> None:
    from .commands import session_commands

    if rt.sessions.get(session.id) is not session:
        return  # closed meanwhile
    await rt.client.session_update(
        session.id, t.AvailableCommandsUpdate(available_commands=session_commands(session))
    )
