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
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .. import log
from ..conversation import TextPart, ToolCallPart, ToolResultMessage, UserPart
from ..errors import RemoteError, ToolError
from ..escaping import escaped, escaped_locations
from ..protocol import UNSET
from ..protocol import types as t
from ..tools.base import CallInfo, Tool, ToolContext
from .notices import notify
from .permissions import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    PLAN_COMMAND,
    command_level,
    decide,
    permission_options,
    scope_of,
)
from .projectrules import attachment

if TYPE_CHECKING:
    from ..sessions.session import Session
    from .world import PendingCall, TurnContext

CANCELLED = "Cancelled by the user."


#: Tool kinds that only look: consecutive calls of them run side by side.
LOOKING = frozenset({"read", "search"})


async def run_tools(ctx: TurnContext, calls: list[PendingCall]) -> None:
    """Run one response's tool calls and add their results to history, in call order.

    Consecutive calls that only look (read, search) or are marked ``concurrent``
    (subagents) run side by side; writes and commands run one after another, in order,
    so a read after a write sees it."""
    session = ctx.session
    results: dict[int, ToolResultMessage] = {}
    started: set[int] = set()
    try:
        for group in _groups(ctx, calls):
            started.update(group)
            if len(group) == 1:
                results[group[0]] = await run_tool(ctx, calls[group[0]])
                continue
            tasks = {i: asyncio.create_task(run_tool(ctx, calls[i])) for i in group}
            try:
                await asyncio.wait(tasks.values())
            except BaseException:
                for task in tasks.values():
                    task.cancel()
                await asyncio.wait(tasks.values())  # they report their end before the turn's
                raise
            finally:
                for i, task in tasks.items():
                    if task.done() and not task.cancelled() and task.exception() is None:
                        results[i] = task.result()
            for task in tasks.values():
                task.result()  # an error of one: the turn's (run_tool fails only on cancel)
    except BaseException:
        for index in sorted(results):
            session.add_message(results[index])
        why = ctx.interrupted_by() or CANCELLED
        await abandon(ctx, [c for i, c in enumerate(calls) if i not in started], why)
        close_dangling_calls(session, [c.part for c in calls], why)
        raise
    for index in range(len(calls)):
        session.add_message(results[index])


def _groups(ctx: TurnContext, calls: list[PendingCall]) -> list[list[int]]:
    """Call indices in order, consecutive side-by-side calls grouped."""
    groups: list[list[int]] = []
    together = False
    for i, call in enumerate(calls):
        tool = ctx.tools.get(call.part.name)
        parallel = tool is not None and (tool.concurrent or tool.kind in LOOKING)
        if parallel and together:
            groups[-1].append(i)
        else:
            groups.append([i])
        together = parallel
    return groups


async def abandon(ctx: TurnContext, calls: list[PendingCall], why: str) -> None:
    """Calls that will never run: each gets its result in history and, if the client was
    already shown it (announced while the answer streamed), its final update."""
    close_dangling_calls(ctx.session, [c.part for c in calls], why)
    for call in calls:
        if call.tool_call_id is not None:
            await _stopped(ctx, call.tool_call_id, why)


def tool_context(ctx: TurnContext, call_id: str) -> ToolContext:
    """What a tool sees of the turn, for the call the client knows as ``call_id``."""
    session = ctx.session
    sandbox = None
    if ctx.sandboxing is not None:  # the level the mode gives (a subagent: its root's)
        root = session.root
        approved = ctx.sandboxing.settings.approved
        level = command_level(root.mode, root.sandbox, approved)  # type: ignore[arg-type]
        sandbox = ctx.sandboxing.sandbox(level, session.roots)
    return ToolContext(
        session_id=session.id,
        cwd=session.cwd,
        roots=session.roots,
        client=ctx.client,
        tool_call_id=call_id,
        emit=session.emit,
        env=ctx.env,
        images=ctx.model.supports_images,
        sandbox=sandbox,
        outputs=ctx.outputs,
        login_env=ctx.login_env,
        web=ctx.web,
    )


async def run_tool(ctx: TurnContext, pending: PendingCall) -> ToolResultMessage:
    session, call = ctx.session, pending.part
    call_id = pending.tool_call_id or session.new_tool_call_id()
    shown = pending.tool_call_id is not None  # announced while the answer streamed
    tool = ctx.tools.get(call.name)
    tctx = tool_context(ctx, call_id)
    raw: dict[str, Any] = dict(call.arguments)
    if tool is None:
        await session.emit(_announce(shown, call_id, call.name, call.name, "other", raw, "failed"))
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
            info = as_shown(tool.describe(args, tctx))
        except ToolError as exc:
            problem = f"Invalid arguments for {call.name}: {exc.message}"
        except (KeyError, TypeError, ValueError) as exc:
            problem = f"Invalid arguments for {call.name}: {exc}"
    await session.emit(_announce(shown, call_id, info.title, call.name, tool.kind, raw, "pending",
                                 list(info.locations)))  # fmt: skip
    if problem is not None:
        return await _fail(session, call, call_id, problem)
    try:  # from here on, a cancel still ends the call visibly, before the turn's answer
        preview = await tool.prepare(args, tctx)  # e.g. the diff: seen before approving
        if preview is not None:
            tctx.prepared = preview.state
            if preview.content:
                info = replace(info, content=tuple(preview.content))
                await session.emit(t.ToolCallUpdateSessionUpdate(
                    tool_call_id=call_id, content=list(preview.content)))  # fmt: skip
        refusal = await _permit(ctx, tool, info, call_id, raw, tctx)
        if refusal is not None:
            return await _fail(session, call, call_id, refusal)
        await session.emit(
            t.ToolCallUpdateSessionUpdate(tool_call_id=call_id, status="in_progress")
        )
        if ctx.checkpoint is not None and info.access in ("write", "execute"):
            # the one place every writing call passes, with the paths it declared (as
            # checked): what they were is kept before they change (``checkpoints``); a
            # command's declared path is the whole workspace (``.git`` and ignored
            # folders too): what it changes is found by the snapshot instead
            writes = [tctx.real(p) for p in info.paths] if info.access == "write" else []
            await ctx.checkpoint.before_change(writes)
        out = await tool.run(args, tctx)
    except ToolError as exc:
        return await _fail(session, call, call_id, exc.message)
    except asyncio.CancelledError:
        await _stopped(ctx, call_id)
        raise
    except Exception as exc:
        log.exception("tool failed", tool=call.name)
        return await _fail(session, call, call_id, f"Internal error in {call.name}: {exc}")
    if ctx.nested is not None and not out.is_error and tctx.checked:
        out.text += await _nested_rules(ctx, list(tctx.checked.values()))
    await session.emit(
        t.ToolCallUpdateSessionUpdate(
            tool_call_id=call_id,
            status="failed" if out.is_error else "completed",
            content=out.content or [_text(out.text)],
            raw_output=out.raw_output if out.raw_output is not None else {"output": out.text},
            locations=escaped_locations(out.locations) if out.locations is not None else UNSET,
        )
    )
    parts: list[UserPart] = [TextPart(out.text), *out.images]
    return ToolResultMessage(call.call_id, call.name, parts, is_error=out.is_error)


async def _nested_rules(ctx: TurnContext, paths: list[str]) -> str:
    """The instruction files below the session's directory that this call's paths enter
    for the first time, as text for its result; a file refused is told to the user."""
    assert ctx.nested is not None
    files, refused = await asyncio.to_thread(ctx.nested.for_paths, paths)
    for refusal in refused:
        await notify(ctx.client, ctx.session, "warning", "Instruction file skipped",
                     escaped(f"{refusal.path}: {refusal.reason}."), fallback=True)  # fmt: skip
    return "\n\n" + attachment(files, ctx.session.cwd) if files else ""


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
    web = info.host is not None  # a read outside the roots, "always" per host
    inside = not web and all(
        tctx.inside_roots(p) or (info.access == "read" and tctx.saved_output(p)) for p in real
    )
    mode = session.root.mode  # a subagent follows its parent's current mode
    sandboxed = info.sandbox is not None
    decision = decide(
        mode, info.access, inside, tool.kind, sandboxed=sandboxed, leaving=info.leaving
    )
    planned = mode == "plan" and decision == "ask" and info.access == "execute"
    # a command in plan mode, or one leaving the sandbox, is asked every time: no "always"
    scope = None
    if (inside or web) and not planned and not info.leaving:
        scope = scope_of(tool.spec.name, info, real, session.cwd, tctx.display)
    if decision == "ask" and scope is not None:
        if ctx.rules.path is not None:  # as the file stands now (forgotten elsewhere?)
            await asyncio.to_thread(ctx.rules.refresh)
        decision = ctx.rules.lookup(scope) or "ask"
    if decision == "deny":
        if mode == "plan" and info.leaving:
            return "Refused: the session is in plan mode; nothing runs outside the sandbox."
        if mode == "plan":
            return ("Refused: the session is in plan mode (read-only): nothing may change. "
                    "Deliver the plan with write_plan.")
        return "Refused: the user rejected this kind of call."
    if decision == "allow":
        return None
    options = permission_options(scope)
    title = info.title + (PLAN_COMMAND if planned else "")
    links = [
        r for p, r in zip(info.paths, real, strict=True) if r != p and not tctx.inside_roots(r)
    ]
    if links:  # the question says where links out of the roots lead: what would be touched
        title += " (→ " + escaped(", ".join(links)) + ")"
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
                content=list(info.content) if info.content else UNSET,
            ),
            options,
        )
    except RemoteError as exc:  # an error or a malformed answer: not a yes
        log.warning("permission request failed; the call is not run", error=exc.message)
        return f"Not run: permission could not be asked ({exc.message})."
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


def as_shown(info: CallInfo) -> CallInfo:
    """``info`` as the user is shown it: its title and locations (chosen by the model, or
    named by the project's files) escaped (``escaping``); its paths, which the permission
    policy judges and the tool operates on, unchanged."""
    locations = tuple(escaped_locations(info.locations))
    return replace(info, title=escaped(info.title), locations=locations)


def _announce(shown: bool, call_id: str, title: str, name: str, kind: Any, raw: dict[str, Any],
              status: Any, locations: list[t.ToolCallLocation] | None = None
              ) -> t.SessionUpdate:  # fmt: skip
    """The call, complete: a ``tool_call``, or an update of the one announced early."""
    fields: dict[str, Any] = {"tool_call_id": call_id, "title": title, "name": name,
                              "kind": kind, "status": status, "raw_input": raw}  # fmt: skip
    if locations is not None:
        fields["locations"] = locations
    return t.ToolCallUpdateSessionUpdate(**fields) if shown else t.ToolCall(**fields)


async def _stopped(ctx: TurnContext, call_id: str, why: str | None = None) -> None:
    """The final update of a call the turn's cancellation (or time limit) stopped."""
    why = why or ctx.interrupted_by() or "Cancelled."
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
