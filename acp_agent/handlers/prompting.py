"""``session/prompt``: from the client's content blocks to a stop reason.

A prompt is checked, queued behind the session's running turn (first come, first
served), recorded, offered to the slash commands, then run by the turn engine in a
:class:`~acp_agent.engine.world.TurnContext` ``turns.Turns`` builds. ``session/cancel`` (or
``$/cancel_request``) cancels the running turn and every queued one; each answers
``cancelled``, never an error. Provider failures become JSON-RPC errors here, and only
here, with the provider's message (the endpoint, the cause).

A limit reloaded meanwhile (``reload``) bounds the running turn too, from its start.
A turn is bounded by ``limits.turn-timeout`` (from the moment it starts running, not
while it waits in the queue): past it the turn unwinds like a cancel (tool calls get
their final update, history keeps a result for every call) and the prompt answers a
JSON-RPC error naming the limit; the user did not cancel, so it is not ``cancelled``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .. import log
from ..conversation import ImagePart, TextPart, UserMessage, UserPart
from ..engine.turn import run_turn
from ..errors import (
    AcpError,
    AuthRequired,
    InternalError,
    InvalidParams,
    InvalidRequest,
    ProviderAuthError,
    ProviderError,
)
from ..protocol import types as t
from ..sessions.replay import prompt_text
from ..sessions.session import make_title
from ..sessions.steers import chunks, settle
from .builtins import dispatch, refresh_skills
from .commands import TAKING_BACK, parse_invocation
from .lifecycle import take_over

if TYPE_CHECKING:
    from ..sessions.session import Session, Turn
    from .services import Services

TURN_TIMEOUT = "limits.turn-timeout"


async def prompt(sv: Services, p: t.PromptRequest) -> t.PromptResponse:
    session = sv.sessions.require(p.session_id)
    check(p.prompt, images=sv.models.model_info_for(session.model).supports_images)
    if session.read_only:
        await take_over(sv, session)
    taking_back = _taking_back(p.prompt)
    if taking_back and session.busy:
        raise InvalidRequest(
            f"Invalid request: a turn is running in session {session.id}; /{taking_back} "
            "takes back finished turns only: wait for it to end, or cancel it first",
            {"sessionId": session.id},
        )
    return await run_prompt(sv, session, session.begin_turn(), p.prompt)


async def run_prompt(
    sv: Services, session: Session, turn: Turn, blocks: list[t.ContentBlock] | None
) -> t.PromptResponse:
    """Run the registered ``turn`` once the session's turns before it are done.
    ``blocks`` ``None``: a turn a steer started, whose prompt is its first steer."""
    try:
        async with session.lock:
            if turn.cancel_requested:
                await settle(session, turn.steers)
                return t.PromptResponse(stop_reason="cancelled")
            with log.bound(session_id=session.id):
                return await _run(sv, session, turn, blocks)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if turn.cancel_requested and task is not None:
            task.uncancel()
            settle_unrun(sv, session, turn)  # cancelled while queued
            return t.PromptResponse(stop_reason="cancelled")
        raise
    except ProviderAuthError as exc:
        raise AuthRequired(f"Authentication required: {exc.message}") from None
    except ProviderError as exc:
        log.warning("model request failed", error=exc.message)
        raise InternalError(f"Model request failed: {exc.message}") from None
    except AcpError:
        raise
    except Exception as exc:  # a bug: the log has the traceback, the client the cause
        log.exception("turn failed")
        raise InternalError(f"Internal error: {type(exc).__name__}: {exc}") from None
    finally:
        session.end_turn(turn)


def settle_unrun(sv: Services, session: Session, turn: Turn) -> None:
    """``turn`` ends without having run: the messages sent into it are kept as not acted
    upon, in their place: after the turn running now (soon, not waited for)."""
    turn.steers.close()
    if not turn.steers.pending:
        return

    async def in_place() -> None:
        async with session.lock:
            await settle(session, turn.steers)

    sv.background(in_place())


def cancel_prompt(sv: Services, p: t.PromptRequest, task: asyncio.Task[None]) -> None:
    """``$/cancel_request`` naming one prompt: that prompt's turn (running or queued)
    answers ``cancelled``; the session's other prompts go on (``session/cancel`` is the
    one that cancels them all)."""
    session = sv.sessions.get(p.session_id)
    if session is not None:
        session.cancel_task(task)


async def _run(
    sv: Services, session: Session, turn: Turn, blocks: list[t.ContentBlock] | None
) -> t.PromptResponse:
    info = sv.models.model_info_for(session.model)
    if blocks is None:  # the steer that started the turn is its prompt, shown as it starts
        first, *rest = turn.steers.take()
        turn.steers.pending.extend(rest)
        blocks = first.blocks
        turn_id = session.record_prompt(blocks, prompt_text(blocks), first.message_id)
        await session.replay(chunks(first))
    else:
        turn_id = session.record_prompt(blocks, prompt_text(blocks))
    sv.turns.checkpoints.begin(session, turn_id)
    stop = "error"
    deadline = asyncio.timeout(sv.config.limits.turn_timeout)

    def interrupted_by() -> str | None:
        if deadline.expired():
            limit = sv.config.limits.turn_timeout  # (it may have been reloaded)
            return f"Stopped: the turn ran out of time ({TURN_TIMEOUT} = {limit:g} s)."
        return None

    try:
        async with deadline:
            sv.turn_deadlines[deadline] = asyncio.get_running_loop().time()
            await refresh_skills(sv, session)
            command = await dispatch(sv, session, blocks)
            if isinstance(command, t.PromptResponse):
                stop = command.stop_reason
                return command
            if session.mcp is not None:
                await session.mcp.wait_ready(sv.config.limits.mcp_start_timeout)
            user = UserMessage(user_parts(command, images=info.supports_images))
            ctx = await sv.turns.context(session)
            ctx.interrupted_by = interrupted_by
            ctx.steers = turn.steers
            stop, usage = await run_turn(ctx, user)
            named = session.titled_by_client or session.title is not None
            if stop == "end_turn" and not named and session.first_prompt:
                await session.set_title(make_title(session.first_prompt))
            return t.PromptResponse(stop_reason=stop, usage=usage)  # type: ignore[arg-type]
    except asyncio.CancelledError:
        stop = "cancelled"
        raise
    except TimeoutError:
        if not deadline.expired():
            raise
        limit = sv.config.limits.turn_timeout
        log.warning("turn timed out", limit=limit)
        raise InternalError(
            f"The turn ran longer than {TURN_TIMEOUT} ({limit:g} s) and was stopped;"
            " what it did so far is kept"
        ) from None
    finally:
        sv.turn_deadlines.pop(deadline, None)
        await settle(session, turn.steers)  # what did not join is kept, not acted upon
        await _checkpoint(sv, session)
        await session.record_turn_end(stop)


async def _checkpoint(sv: Services, session: Session) -> None:
    """What the turn changed in the workspace, recorded before its end; checkpoints
    dropped to keep within the cap are told."""
    try:
        dropped = await sv.turns.checkpoints.finish(session)
    except OSError as exc:  # the state directory refuses: the turn's answer stands
        log.warning("cannot record the turn's checkpoint", error=str(exc))
        return
    if dropped:
        cap = sv.config.checkpoints.max_size
        await sv.notify(session, "warning", "Older turns can no longer be undone",
                        f"The session's checkpoints passed checkpoints.max-size ({cap:,} bytes):"
                        f" the oldest {len(dropped)} turn(s) were let go.",
                        fallback=True)  # fmt: skip


def _taking_back(blocks: list[t.ContentBlock]) -> str | None:
    """``undo`` or ``rewind`` when the prompt is that command."""
    first = blocks[0] if blocks else None
    if isinstance(first, t.TextContent):
        invocation = parse_invocation(first.text.strip())
        if invocation is not None and invocation[0] in TAKING_BACK:
            return invocation[0]
    return None


def check(blocks: list[t.ContentBlock], *, images: bool) -> None:
    for i, block in enumerate(blocks):
        if isinstance(block, t.AudioContent):
            raise InvalidParams(
                f"Invalid params: audio prompts are not supported - at `$.prompt[{i}]`"
            )
        if isinstance(block, t.ImageContent) and not images:
            raise InvalidParams(
                f"Invalid params: the model does not accept images - at `$.prompt[{i}]`"
            )


def user_parts(blocks: list[Any], *, images: bool) -> list[UserPart]:
    """ACP prompt content as model input parts."""
    parts: list[UserPart] = []
    for block in blocks:
        if isinstance(block, t.TextContent):
            parts.append(TextPart(block.text))
        elif isinstance(block, t.ImageContent):
            if images:
                parts.append(ImagePart(block.data, block.mime_type))
            else:
                parts.append(
                    TextPart(
                        f"[an image ({block.mime_type}) was attached; this model cannot see images]"
                    )
                )
        elif isinstance(block, t.ResourceLink):
            parts.append(TextPart(f"[@{block.name}]({block.uri})"))
        elif isinstance(block, t.EmbeddedResource):
            res = block.resource
            text = getattr(res, "text", None)
            mime = getattr(res, "mime_type", None)
            if isinstance(text, str):
                parts.append(TextPart(f'<context uri="{res.uri}">\n{text}\n</context>'))
            elif images and isinstance(mime, str) and mime.startswith("image/"):
                parts.append(ImagePart(str(getattr(res, "blob", "")), mime))
            else:
                size = len(str(getattr(res, "blob", ""))) * 3 // 4
                kind = mime or "unknown type"
                parts.append(TextPart(f"[binary resource {res.uri} ({kind}, {size} bytes)]"))
        elif isinstance(block, t.AudioContent):
            parts.append(TextPart(f"[audio ({block.mime_type}) attached]"))
    return parts
