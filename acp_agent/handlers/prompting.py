"""``session/prompt``: from the client's content blocks to a stop reason.

A prompt is checked, queued behind the session's running turn (first come, first
served), recorded, offered to the slash commands, then run by the turn engine in a
:class:`~acp_agent.engine.turn.TurnContext` the runtime builds. ``session/cancel`` (or
``$/cancel_request``) cancels the running turn and every queued one; each answers
``cancelled``, never an error. Provider failures become JSON-RPC errors here, and only
here, with the provider's message (the endpoint, the cause).

A turn is bounded by ``limits.turn-timeout`` (from the moment it starts running, not
while it waits in the queue): past it the turn unwinds like a cancel (tool calls get
their final update, history keeps a result for every call) and the prompt answers a
JSON-RPC error naming the limit; the user did not cancel, so it is not ``cancelled``.
A limit reloaded meanwhile (``reload``) bounds the running turn too, from its start.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .. import log
from ..conversation import ImagePart, TextPart, UserMessage, UserPart
from ..errors import (
    AcpError,
    AuthRequired,
    InternalError,
    InvalidParams,
    ProviderAuthError,
    ProviderError,
)
from ..protocol import types as t

if TYPE_CHECKING:
    from ..sessions.session import Session
    from .runtime import Runtime

TURN_TIMEOUT = "limits.turn-timeout"


async def prompt(rt: Runtime, p: t.PromptRequest) -> t.PromptResponse:
    session = rt.session(p.session_id)
    _check(p.prompt, images=rt.model_info_for(session.model).supports_images)
    if session.read_only:
        from .lifecycle import take_over

        await take_over(rt, session)
    turn = session.begin_turn()
    try:
        async with session.lock:
            if turn.cancel_requested:
                return t.PromptResponse(stop_reason="cancelled")
            with log.bound(session_id=session.id):
                return await _run(rt, session, p.prompt)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if turn.cancel_requested and task is not None:
            task.uncancel()
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


def cancel_prompt(rt: Runtime, p: t.PromptRequest, task: asyncio.Task[None]) -> None:
    """``$/cancel_request`` naming one prompt: that prompt's turn (running or queued)
    answers ``cancelled``; the session's other prompts go on (``session/cancel`` is the
    one that cancels them all)."""
    session = rt.sessions.get(p.session_id)
    if session is not None:
        session.cancel_task(task)


async def _run(rt: Runtime, session: Session, blocks: list[t.ContentBlock]) -> t.PromptResponse:
    from ..engine.turn import run_turn
    from ..sessions.replay import prompt_text
    from ..sessions.session import make_title
    from .commands import dispatch

    info = rt.model_info_for(session.model)
    session.record_prompt(blocks, prompt_text(blocks))
    stop = "error"
    deadline = asyncio.timeout(rt.config.limits.turn_timeout)

    def interrupted_by() -> str | None:
        if deadline.expired():
            limit = rt.config.limits.turn_timeout
            return f"Stopped: the turn ran out of time ({TURN_TIMEOUT} = {limit:g} s)."
        return None

    try:
        async with deadline:
            rt.turn_deadlines[deadline] = asyncio.get_running_loop().time()
            command = await dispatch(rt, session, blocks)
            if isinstance(command, t.PromptResponse):
                stop = command.stop_reason
                return command
            if session.mcp is not None:
                await session.mcp.wait_ready(rt.config.limits.mcp_start_timeout)
            user = UserMessage(user_parts(command, images=info.supports_images))
            ctx = await rt.turn_context(session)
            ctx.interrupted_by = interrupted_by
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
        limit = rt.config.limits.turn_timeout
        log.warning("turn timed out", limit=limit)
        raise InternalError(
            f"The turn ran longer than {TURN_TIMEOUT} ({limit:g} s) and was stopped;"
            " what it did so far is kept"
        ) from None
    finally:
        rt.turn_deadlines.pop(deadline, None)
        await session.record_turn_end(stop)


def _check(blocks: list[t.ContentBlock], *, images: bool) -> None:
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
