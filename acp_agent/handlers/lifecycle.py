"""Session lifecycle: ``session/new``, ``load``, ``resume``, ``fork``, ``close`` and
``delete`` (listing, titles, status and archiving are :mod:`.catalog`'s).

Sessions live in ``Services.sessions`` (:class:`~acp_agent.sessions.registry.OpenSessions`)
while open in this process and in the store for good: load/resume/fork bring a stored
one back (``replay.restore``), close releases it, delete removes it from the disk. A
session whose log another process owns is opened read-only (replayable, not promptable)
until that process lets it go (:func:`take_over`).
After each response the client is told the session's commands, pending notices and
usage (:func:`announce`), and MCP servers start in the background (:func:`attach`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, get_args

from .. import log
from ..config import SandboxLevel
from ..engine.childenv import child_environ
from ..engine.modes import MODE_IDS
from ..engine.sandboxing import explicit
from ..errors import InternalError, InvalidRequest, SessionNotFound
from ..escaping import escaped
from ..protocol import UnsetType
from ..protocol import types as t
from ..sessions.ids import new_session_id, valid_id
from ..sessions.records import Archived, Checkpoint, Header, Roots, Undone, bulk, now_iso
from ..sessions.replay import restore, scan
from ..sessions.session import Session
from ..sessions.transcript import Pair, Uses, load_batches
from .auth import require_key
from .commands import find_skills, load_prompt_commands, session_commands, skill_notice
from .opening import client_prompt, roots
from .options import config_options, mode_ids, mode_refusal, modes

if TYPE_CHECKING:
    from .. import mcp
    from ..engine.projectfiles import Refused
    from ..sessions.records import Record
    from ..sessions.replay import State
    from ..sessions.store import Snapshot
    from .opening import NewSession
    from .services import Services

    Reading = tuple[Snapshot, Uses]
    """A log to replay: its snapshot, and what a first pass over it learned."""


async def open_new(sv: Services, new: NewSession) -> None:
    """Open the session ``session/new`` has answered for (``handlers.opening``): its log
    created, its command files and skills found, its MCP servers started, then the
    client told the rest (commands, notices, usage)."""
    await sv.sandboxing.ready()  # (found: the answer waited for it)
    settings = new.settings
    session = Session(
        id=new.session_id,
        cwd=new.cwd,
        emit_fn=sv.client.session_update,
        mode=settings.mode,
        model=settings.model,
        thinking=settings.thinking,
        additional_directories=list(new.directories),
        sandbox=settings.sandbox,
    )
    await _store_new(sv, session)
    if new.prompt is not None:
        session.set_client_prompt(new.prompt)
    await _opened(sv, session, new.servers)


async def load_session(sv: Services, p: t.LoadSessionRequest) -> t.LoadSessionResponse:
    require_key(sv.config)
    await sv.sandboxing.ready()  # whether auto and the sandbox option are offered
    cwd, directories = roots(p.cwd, p.additional_directories)
    prompt = client_prompt(p.system_prompt)
    session, reading = await _open(sv, p.session_id, cwd, directories, read=True)
    try:
        if prompt is not None:
            session.set_client_prompt(prompt)
        await _register(sv, session, p.mcp_servers)
        if reading is not None:
            await _replay(sv, session, reading)  # the whole history, then the response
    finally:
        if reading is not None:
            reading[0].close()
    _announce_later(sv, session)
    options = config_options(sv, session)
    return t.LoadSessionResponse(modes=modes(sv, session), config_options=options)


async def _replay(sv: Services, session: Session, reading: Reading) -> None:
    """Stream the log's transcript (and its subagents') to the client: read and
    materialized in a worker thread a batch at a time (a second pass over the snapshot),
    the next batch while this one is sent."""
    snapshot, uses = reading
    caps = sv.client.capabilities
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
                sv.sessions.restricted.update(children)
            for sid, update in batch:  # subagents' under their ids; already in the log
                await session.emit_fn(sid, update)
    finally:
        if not ahead.done():  # the snapshot is closed next: let the thread finish with it
            await asyncio.wait([ahead])


async def resume_session(sv: Services, p: t.ResumeSessionRequest) -> t.ResumeSessionResponse:
    require_key(sv.config)
    await sv.sandboxing.ready()  # whether auto and the sandbox option are offered
    cwd, directories = roots(p.cwd, p.additional_directories)
    prompt = client_prompt(p.system_prompt)
    session, _ = await _open(sv, p.session_id, cwd, directories, read=False)
    if prompt is not None:
        session.set_client_prompt(prompt)
    await _opened(sv, session, p.mcp_servers)
    return t.ResumeSessionResponse(
        modes=modes(sv, session), config_options=config_options(sv, session)
    )


async def fork_session(sv: Services, p: t.ForkSessionRequest) -> t.ForkSessionResponse:
    require_key(sv.config)
    await sv.sandboxing.ready()  # whether auto and the sandbox option are offered
    cwd, directories = roots(p.cwd, p.additional_directories)
    prompt = client_prompt(p.system_prompt)
    source = sv.sessions.get(p.session_id)
    if source is not None:
        source.flush()
    try:
        records = await asyncio.to_thread(sv.sessions.store.read, p.session_id)
    except FileNotFoundError:
        raise SessionNotFound(p.session_id) from None
    except OSError as exc:
        raise InternalError(f"Cannot read session {p.session_id}: {exc.strerror}") from None
    # a new session: its own header and roots; no checkpoints (their files are the source's)
    mine = Header | Roots | Archived | Checkpoint | Undone
    body = [r for r in records if not isinstance(r, mine)]
    session = _restored(sv, new_session_id(), restore(body), cwd, directories)
    await _store_new(sv, session, body, forked_from=p.session_id)
    if prompt is not None:
        session.set_client_prompt(prompt)
    await _opened(sv, session, p.mcp_servers)
    return t.ForkSessionResponse(
        session_id=session.id, modes=modes(sv, session), config_options=config_options(sv, session)
    )


async def close_session(sv: Services, p: t.CloseSessionRequest) -> t.CloseSessionResponse:
    await release(sv, sv.sessions.require(p.session_id))
    return t.CloseSessionResponse()


async def delete_session(sv: Services, p: t.DeleteSessionRequest) -> t.DeleteSessionResponse:
    session = sv.sessions.get(p.session_id)
    if session is not None:
        await release(sv, session)
    await asyncio.to_thread(sv.sessions.store.delete, p.session_id)  # unknown ids are fine
    if valid_id(p.session_id):
        turns = await sv.turns_ready()
        await turns.checkpoints.delete(p.session_id)  # what /undo kept goes with it
    return t.DeleteSessionResponse()


async def release(sv: Services, session: Session) -> None:
    """Cancel the session's turns, let them answer, then free it (and its log)."""
    session.cancel()
    tasks = [turn.task for turn in session.turns if turn.task is not None]
    if tasks:
        await asyncio.wait(tasks, timeout=5.0)
    sv.sessions.remove(session)
    await session.aclose()
    if session.mcp is not None:
        await session.mcp.aclose()
        session.mcp = None


async def take_over(sv: Services, session: Session) -> None:
    """Prompting a session loaded read-only: own it now if its owner let it go."""
    try:
        opened = await asyncio.to_thread(sv.sessions.store.open_reading, session.id, restore)
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


# ---------------------------------------------------------------------- opening


async def _store_new(
    sv: Services, session: Session, body: Sequence[Record] = (), **header: Any
) -> None:
    """Create the session's log: a header, ``body`` (a fork's copy) and the settings."""
    head = Header(
        id=session.id,
        cwd=session.cwd,
        additional_directories=list(session.additional_directories),
        created_at=now_iso(),
        **header,
    )
    records: list[Record] = [*body, session.settings_record()]
    try:
        session.log = await asyncio.to_thread(sv.sessions.store.create, head, records)
        session.stored_roots = (head.cwd, head.additional_directories)
    except OSError as exc:  # a taken id (practically never): this session is not stored
        log.warning("cannot store the session; it lives in memory only", error=str(exc))


async def _open(
    sv: Services, session_id: str, cwd: str, directories: list[str], *, read: bool
) -> tuple[Session, Reading | None]:
    """The session, in memory (brought back from the store if need be), with the given
    roots; and, if ``read``, its log to replay (the caller closes it)."""
    session = sv.sessions.get(session_id)
    if session is not None and not session.read_only:
        if session.busy:
            raise InvalidRequest(f"Invalid request: session {session_id} has a running turn")
        session.cwd, session.additional_directories = cwd, directories
        session.flush()
        reading = None
        if read and session.log:
            try:
                reading = await asyncio.to_thread(_reread, sv, session_id)
            except OSError:
                reading = None
        return session, reading
    try:
        writer, (state, uses), snapshot = await asyncio.to_thread(
            sv.sessions.store.open_reading, session_id, scan
        )
    except FileNotFoundError:
        raise SessionNotFound(session_id) from None
    except OSError as exc:
        log.error("cannot read a stored session", session_id=session_id, error=str(exc))
        raise InternalError(f"Cannot read session {session_id}: {exc.strerror}") from None
    if not read:
        snapshot.close()
    session = _restored(sv, session_id, state, cwd, directories)
    session.log, session.read_only = writer, writer is None
    return session, (snapshot, uses) if read else None


def _reread(sv: Services, session_id: str) -> Reading:
    """The log of a session open here, to replay (a worker thread: the first pass)."""
    snapshot = sv.sessions.store.take_snapshot(session_id)
    uses = Uses()
    try:
        for _ in uses.tap(snapshot.records()):
            pass
    except BaseException:
        snapshot.close()
        raise
    return snapshot, uses


def _restored(
    sv: Services, session_id: str, state: State, cwd: str, directories: list[str]
) -> Session:
    """A session brought back from a log's state (load, resume, fork). A mode or model
    this configuration no longer offers falls back, with a notice."""
    offered = mode_ids(sv)
    session = Session(
        id=session_id,
        cwd=cwd,
        emit_fn=sv.client.session_update,
        mode=state.mode if state.mode in offered else sv.config.default_mode,
        model=state.model if state.model in sv.models.choices else sv.config.model,
        thinking=state.thinking or sv.config.thinking,
        additional_directories=directories,
        sandbox=state.sandbox or "",  # checked below
    )
    if session.sandbox not in get_args(SandboxLevel):
        session.sandbox = sv.config.sandbox.level
    session.restore(state)
    if state.mode in MODE_IDS and state.mode not in offered:
        session.pending_notices.append(
            ("warning", "Mode not available",
             f"{mode_refusal(sv, state.mode)}; the session continues in {session.mode}.")
        )  # fmt: skip
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
    sv: Services, session: Session, servers: Sequence[t.McpServerAny] | UnsetType
) -> None:
    """The session is open: register it, and tell the client the rest once the response
    is out."""
    await _register(sv, session, servers)
    _announce_later(sv, session)


async def _register(
    sv: Services, session: Session, servers: Sequence[t.McpServerAny] | UnsetType
) -> None:
    sv.sessions.add(session)
    refused: list[Refused] = []
    env = sv.child_env

    def find() -> list[Refused]:
        session.prompt_commands = load_prompt_commands(
            session.cwd, env, roots=session.roots, refused=refused
        )
        return find_skills(session, env)

    broken = await asyncio.to_thread(find)
    why = sv.sandboxing.why_not()
    if why is not None and explicit(sv.config.sandbox) and not sv.sandboxing.told:
        sv.sandboxing.told = True  # configured, but impossible here: said once
        session.pending_notices.append(
            ("warning", "Commands are not sandboxed",
             f"{why}. The auto mode is not offered; commands ask before they run.")
        )  # fmt: skip
    for refusal in refused:  # told once the client has the session
        why = escaped(f"{refusal.path}: {refusal.reason}.")
        session.pending_notices.append(("warning", "Command file skipped", why))
    session.pending_notices.extend(skill_notice(refusal) for refusal in broken)
    attach(sv, session, servers)


def _announce_later(sv: Services, session: Session) -> None:
    asyncio.get_running_loop().call_soon(announce, sv, session)


_mcp_loaded = False
"""A session here was given MCP servers: the MCP layer is loaded (:func:`attach`)."""


def deliver_mcp(note: t.MessageMcpNotification) -> None:
    """An ``mcp/message`` notification, to the MCP server connection of ours it is about
    (none unless a session was given servers)."""
    if _mcp_loaded:
        mcp.deliver(note)


def attach(sv: Services, session: Session, servers: Sequence[t.McpServerAny] | UnsetType) -> None:
    """Give an opened session (in the background) its MCP servers; ``servers`` is the
    complete list for this connection."""
    global mcp, _mcp_loaded
    if session.mcp is not None:  # load/resume again: the client's list replaces it
        sv.background(session.mcp.aclose())
        session.mcp = None
    if servers:
        from .. import mcp  # the MCP layer (8 ms): loaded for a session given servers only

        _mcp_loaded = True

        async def problem(severity: str, title: str, description: str | None) -> None:
            await sv.notify(session, severity, title, description, fallback=True)

        async def changed() -> None:
            await send_commands(sv, session)

        async def acp(request: t.MessageMcpRequest) -> t.MessageMcpResponseAny:
            response: t.MessageMcpResponseAny = await sv.client.call(
                "mcp/message", request, t.MessageMcpResponseAny
            )
            return response

        session.mcp = mcp.McpHub(
            list(servers), cwd=session.cwd, on_problem=problem, on_change=changed, acp=acp,
            environ=functools.partial(child_environ, sv.config),  # no secrets (childenv)
        )
        session.mcp.start()


def announce(sv: Services, session: Session) -> None:
    """After the session/new (load, resume, fork) response: commands, notices, usage;
    the process's warm-up (started by ``initialize``, else now) and the session's."""
    sv.background(_announce(sv, session))
    sv.opened(session)


async def _announce(sv: Services, session: Session) -> None:
    if session.log is not None:
        session.log.watch(lambda error: sv.background(_saving(sv, session, error)))
    await send_commands(sv, session)
    while session.pending_notices:
        severity, title, description = session.pending_notices.pop(0)
        await sv.notify(session, severity, title, description, fallback=True)
    await session.emit(session.usage_update(sv.models.model_info_for(session.model).context_window))


async def _saving(sv: Services, session: Session, error: OSError | None) -> None:
    """Tell the user, once, that the session is not being saved, and, if so told, when it
    is saved again. The conversation goes on either way."""
    if error is not None and not session.unsaved_told:
        session.unsaved_told = True
        reason = error.strerror or str(error)
        await sv.notify(
            session,
            "warning",
            "This session is not being saved",
            f"{reason}. The conversation goes on; everything is kept and saved as soon as "
            "writing to the state directory works again.",
            fallback=True,
        )
    elif error is None and session.unsaved_told:
        session.unsaved_told = False
        await sv.notify(session, "info", "This session is saved again", fallback=True)


async def send_commands(sv: Services, session: Session) -> None:
    if sv.sessions.get(session.id) is not session:
        return  # closed meanwhile
    await sv.client.session_update(
        session.id, t.AvailableCommandsUpdate(available_commands=session_commands(session))
    )
