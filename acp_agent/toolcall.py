"""Running one model response's tool calls: parse -> describe -> ``tool_call`` ->
permission (mode, remembered answers, the user) -> run -> ``tool_call_update`` -> the
result in history.

Every call the model made gets exactly one result in history, whatever happens
(unknown tool, invalid arguments, a refusal, a failure, a cancel): the model APIs reject
a history with an unanswered call. Failures are results the model reads, never errors
of the turn.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from . import log
from .conversation import TextPart, ToolCallPart, ToolResultMessage
from .errors import RemoteError, ToolError
from .permissions import ALLOW_ALWAYS, ALLOW_ONCE, decide, permission_options, scope_of
from .protocol import UNSET
from .protocol import types as t
from .tools.base import CallInfo, Tool, ToolContext

if TYPE_CHECKING:
    from .session import Session
    from .turn import PendingCall, TurnContext

CANCELLED = "Cancelled by the user."


async def run_tools(ctx: TurnContext, calls: list[PendingCall]) -> None:
    """Run one response's tool calls and add their results to history, in call order.

    Calls run one after another, except that tools marked ``concurrent`` (subagents)
    run side by side when the response asks for more than one of them."""
    session = ctx.session
    parts = [c.part for c in calls]
    together = [
        i for i, c in enumerate(calls) if (tool := ctx.tools.get(c.part.name)) and tool.concurrent
    ]
    if len(together) < 2:
        for index, call in enumerate(calls):
            try:
                session.add_message(await run_tool(ctx, call))
            except BaseException:
                close_dangling_calls(session, parts[index:], ctx.interrupted_by() or CANCELLED)
                raise
        return
    tasks = {i: asyncio.create_task(run_tool(ctx, calls[i])) for i in together}
    results: dict[int, ToolResultMessage] = {}
    try:
        for index, call in enumerate(calls):
            if index not in tasks:  # the others keep their turn, in the turn's own task
                results[index] = await run_tool(ctx, call)
        await asyncio.wait(tasks.values())
        for index, task in tasks.items():
            results[index] = task.result()
    except BaseException:
        for task in tasks.values():
            task.cancel()
        await asyncio.wait(tasks.values())  # they report their end before the turn's
        for index, task in tasks.items():
            if not task.cancelled() and task.exception() is None:
                results[index] = task.result()
        for index in sorted(results):
            session.add_message(results[index])
        close_dangling_calls(session, parts, ctx.interrupted_by() or CANCELLED)
        raise
    for index in range(len(calls)):
        session.add_message(results[index])


async def run_tool(ctx: TurnContext, pending: PendingCall) -> ToolResultMessage:
    session, call = ctx.session, pending.part
    call_id = session.new_tool_call_id()
    tool = ctx.tools.get(call.name)
    tctx = ToolContext(
        session_id=session.id,
        cwd=session.cwd,
        roots=session.roots,
        client=ctx.client,
        tool_call_id=call_id,
        emit=session.emit,
        env=ctx.env,
        images=ctx.model.supports_images,
    )
    raw: dict[str, Any] = dict(call.arguments)
    if tool is None:
        await session.emit(
            t.ToolCall(
                tool_call_id=call_id,
                title=call.name,
                name=call.name,
                kind="other",
                status="failed",
                raw_input=raw,
            )
        )
        valid = ", ".join(ctx.tools.names())
        return _result(call, f"Unknown tool {call.name!r}. The tools are: {valid}.", error=True)
    problem: str | None = None
    info = CallInfo(call.name)
    args: Any = None
    if pending.error is not None:
        problem = f"Invalid arguments for {call.name}: {pending.error}. Send one JSON object."
    else:
        try:
            args = tool.parse(raw)
            info = tool.describe(args, tctx)
        except ToolError as exc:
            problem = f"Invalid arguments for {call.name}: {exc.message}"
        except (KeyError, TypeError, ValueError) as exc:
            problem = f"Invalid arguments for {call.name}: {exc}"
    locations = list(info.locations)
    await session.emit(
        t.ToolCall(
            tool_call_id=call_id,
            title=info.title,
            name=call.name,
            kind=tool.kind,
            status="pending",
            raw_input=raw,
            locations=locations,
        )
    )
    if problem is not None:
        return await _fail(session, call, call_id, problem)
    try:  # from here on, a cancel still ends the call visibly, before the turn's answer
        refusal = await _permit(ctx, tool, info, call_id, raw, tctx)
        if refusal is not None:
            return await _fail(session, call, call_id, refusal)
        await session.emit(
            t.ToolCallUpdateSessionUpdate(tool_call_id=call_id, status="in_progress")
        )
        out = await tool.run(args, tctx)
    except ToolError as exc:
        return await _fail(session, call, call_id, exc.message)
    except asyncio.CancelledError:
        await _stopped(ctx, call_id)
        raise
    except Exception as exc:
        log.exception("tool failed", tool=call.name)
        return await _fail(session, call, call_id, f"Internal error in {call.name}: {exc}")
    await session.emit(
        t.ToolCallUpdateSessionUpdate(
            tool_call_id=call_id,
            status="completed",
            content=out.content or [_text(out.text)],
            raw_output=out.raw_output if out.raw_output is not None else {"output": out.text},
            locations=out.locations if out.locations is not None else UNSET,
        )
    )
    return ToolResultMessage(call.call_id, call.name, [TextPart(out.text), *out.images])


async def _permit(
    ctx: TurnContext,
    tool: Tool,
    info: CallInfo,
    call_id: str,
    raw: dict[str, Any],
    tctx: ToolContext,
) -> str | None:
    """``None`` when the call may run, else why it may not (the model reads it).

    Each path is resolved once, here; the tool then works on what was checked
    (``ToolContext.checked``)."""
    session = ctx.session
    real = [tctx.check(p) for p in info.paths]
    inside = all(tctx.inside_roots(p) for p in real)
    mode = session.root.mode  # a subagent follows its parent's current mode
    decision = decide(mode, info.access, inside)
    scope = scope_of(tool.spec.name, info, real, session.cwd, tctx.display) if inside else None
    if decision == "ask" and scope is not None:
        decision = ctx.rules.lookup(scope) or "ask"
    if decision == "deny":
        if mode == "plan":
            return "Refused: the session is in plan mode (read-only)."
        return "Refused: the user rejected this kind of call."
    if decision == "allow":
        return None
    options = permission_options(scope)
    title = info.title
    links = [
        r for p, r in zip(info.paths, real, strict=True) if r != p and not tctx.inside_roots(r)
    ]
    if links:  # the question says where links out of the roots lead: what would be touched
        title += " (→ " + ", ".join(links) + ")"
    try:
        outcome = await ctx.client.request_permission(
            session.id,
            t.ToolCallUpdate(
                tool_call_id=call_id,
                title=title,
                kind=tool.kind,
                status="pending",
                raw_input=raw,
                locations=list(info.locations),
            ),
            options,
        )
    except RemoteError as exc:  # an error or a malformed answer: not a yes
        log.warning("permission request failed; the call is not run", error=exc.message)
        return f"Not run: the editor could not ask the user for permission ({exc.message})."
    if isinstance(outcome, t.CancelledRequestPermissionOutcome):
        turn = session.current_turn()
        if turn is None:
            raise asyncio.CancelledError
        turn.cancel()  # the client cancelled the turn: end it as a cancel
        await asyncio.sleep(0)
        raise asyncio.CancelledError
    option = outcome.option_id
    if option not in {o.option_id for o in options}:
        log.warning("the editor chose an option that was not offered", option=option)
        return f"Not run: the editor answered with an option that was not offered ({option!r})."
    if scope is not None:
        ctx.rules.remember(scope, option)
    if option in (ALLOW_ONCE, ALLOW_ALWAYS):
        return None
    return "The user rejected this tool call."


async def _stopped(ctx: TurnContext, call_id: str) -> None:
    """The final update of a call the turn's cancellation (or time limit) stopped."""
    why = ctx.interrupted_by() or "Cancelled."
    update = t.ToolCallUpdateSessionUpdate(
        tool_call_id=call_id, status="failed", content=[_text(why)], raw_output={"error": why}
    )
    await ctx.session.emit(update)


async def _fail(
    session: Session, call: ToolCallPart, call_id: str, message: str
) -> ToolResultMessage:
    await session.emit(
        t.ToolCallUpdateSessionUpdate(
            tool_call_id=call_id,
            status="failed",
            content=[_text(message)],
            raw_output={"error": message},
        )
    )
    return _result(call, message, error=True)


def _text(text: str) -> t.Content:
    return t.Content(content=t.TextContent(text=text))


def _result(call: ToolCallPart, text: str, *, error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(call.call_id, call.name, [TextPart(text)], is_error=error)


def close_dangling_calls(session: Session, calls: list[ToolCallPart], why: str) -> None:
    """Give every tool call in history a result (the APIs reject calls without one)."""
    answered = {m.call_id for m in session.history if isinstance(m, ToolResultMessage)}
    for call in calls:
        if call.call_id not in answered:
            session.add_message(_result(call, why, error=True))
