"""The turn engine: one ``session/prompt`` from user message to stop reason.

prompt -> history -> provider stream -> ``session/update``s; tool calls -> permission ->
run -> results back into history -> the next model request, until the model stops
calling tools, a limit is reached, or the turn is cancelled.

Everything a turn needs arrives in one :class:`~.world.TurnContext`, built before the
turn starts (``handlers.turns``) and handed down: the session, the editor, the provider
(already behind ``providers.resilient``: retries and timeouts are not the engine's
business), the model's facts, the toolset, the permission rules, the system prompt and
the limits. Before each request the engine makes room itself (:func:`before_request`:
stubs, compaction); tool calls are run by :mod:`.toolcall`.

Cancellation is the task's own ``CancelledError``: it unwinds through here (closing the
HTTP stream, killing tools, abandoning a permission wait) and every level keeps the
history consistent on the way out (partial answers are kept; every tool call gets a
result). Only the prompt handler turns it into the ``cancelled`` stop reason.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..conversation import (
    AssistantMessage,
    AssistantPart,
    ReasoningPart,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserMessage,
)
from ..errors import ProviderContextError, ProviderStreamError
from ..protocol import types as t
from ..providers.base import (
    Finished,
    ReasoningItem,
    RedactedThinking,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallDelta,
    ToolCallReady,
    ToolCallStarted,
    UsageReport,
)
from ..providers.models import ModelInfo
from ..sessions.session import Session
from ..sessions.steers import join
from .compaction import make_room, maybe_compact
from .context import prune
from .instructions import mode_note, reminder
from .skills import skills_note
from .streamargs import LiveCall
from .toolcall import CANCELLED, abandon, run_tools, tool_context
from .world import PendingCall, TurnContext, request_of, window


@dataclass(slots=True)
class StepResult:
    reason: str
    calls: list[PendingCall]
    usage: UsageReport | None


async def before_request(ctx: TurnContext) -> None:
    """Before every model request of a turn (mid-turn too): stub old large results past
    ``prune_at``, compact past ``compact_at``, then add the messages the client sent into
    the turn since the last request (after the tool results: the calls in flight have
    finished; a stream is never cut for them)."""
    session = ctx.session
    prune(session, window(ctx), ctx.limits.prune_at)
    await maybe_compact(ctx)
    if ctx.steers is not None:
        for steer in ctx.steers.take():
            await join(session, steer)


def _steered(ctx: TurnContext) -> bool:
    """Messages were sent into the turn since its last request: the model answers them
    in the same turn (one more request)."""
    return ctx.steers is not None and bool(ctx.steers.pending)


async def run_turn(ctx: TurnContext, user: UserMessage) -> tuple[str, t.Usage]:
    """Run one turn; returns the stop reason and the turn's token usage. Once it returns
    (or raises) the turn takes no more messages from the client: one sent later starts
    the next turn (``handlers/steering``)."""
    try:
        return await _requests(ctx, user)
    finally:
        if ctx.steers is not None:
            ctx.steers.close()  # in the same step as the last check of ``_steered``


async def _requests(ctx: TurnContext, user: UserMessage) -> tuple[str, t.Usage]:
    session = ctx.session
    # what changed since the model was told (the mode, the skills): before the text
    notes = [note for note in (mode_note(session), skills_note(session)) if note is not None]
    if notes:
        user = UserMessage([*(TextPart(reminder(note)) for note in notes), *user.parts])
    session.add_message(user)
    totals = t.Usage(total_tokens=0, input_tokens=0, output_tokens=0)
    made_room = False
    for _ in range(ctx.limits.max_turn_requests):
        await before_request(ctx)
        try:
            step = await model_step(ctx)
        except ProviderContextError as exc:  # make room (once) and ask again
            if made_room or not await make_room(ctx, exc):
                # what cannot fit must not stay: the prompt leaves the context, like a refusal
                start = next((i for i, m in enumerate(session.history) if m is user), None)
                if start is not None:
                    session.truncate_history(start)
                raise ProviderContextError(
                    f"{exc.message}. It still does not fit after compacting: start a new "
                    "session, or /compact with what to keep",
                    exc.status,
                    exc.body,
                ) from exc
            made_room = True
            continue
        made_room = False
        if step.usage is not None:
            add_usage(totals, step.usage)
        if step.reason == "length":
            await abandon(ctx, step.calls, "The answer hit the token limit.")
            return "max_tokens", totals
        if step.reason == "refusal":
            # the refused prompt and all after it leave the context (spec)
            start = next((i for i, m in enumerate(session.history) if m is user), None)
            if start is not None:  # (unless a compaction folded it into a summary)
                session.truncate_history(start)
            return "refusal", totals
        if not step.calls:
            if _steered(ctx):
                continue
            return "end_turn", totals
        await run_tools(ctx, step.calls)
    return "max_turn_requests", totals


async def model_step(ctx: TurnContext) -> StepResult:
    """One model request: stream its answer to the client and into history."""
    session = ctx.session
    builder = _AssistantBuilder(session)
    reason: str | None = None
    usage: UsageReport | None = None
    try:
        async for ev in ctx.provider.stream(request_of(ctx)):
            if isinstance(ev, TextDelta):
                await builder.text(ev.text)
            elif isinstance(ev, ThinkingDelta):
                await builder.thinking(ev.text)
            elif isinstance(ev, ToolCallReady):
                builder.tool_call(ev)
            elif isinstance(ev, ToolCallDelta):
                await builder.tool_delta(ev)
            elif isinstance(ev, ToolCallStarted):
                await builder.tool_started(ev, ctx)
            elif isinstance(ev, UsageReport):
                usage = ev
            elif isinstance(ev, ThinkingSignature):
                builder.sign(ev.signature)
            elif isinstance(ev, RedactedThinking):
                builder.redacted(ev.data)
            elif isinstance(ev, ReasoningItem):
                builder.reasoning(ev)
            elif isinstance(ev, Finished):
                reason = ev.reason
    except asyncio.CancelledError:
        await _close_unrun(ctx, builder, ctx.interrupted_by())
        raise
    except BaseException:
        await _close_unrun(ctx, builder, "The answer broke off before this call could run.")
        raise
    finally:
        builder.commit()  # keep what was streamed, whatever happened
    if reason is None:
        raise ProviderStreamError("the model stream ended without a finish reason")
    if usage is not None:
        await report_usage(session, ctx.model, usage)
    return StepResult(reason, builder.calls, usage)


async def _close_unrun(ctx: TurnContext, builder: _AssistantBuilder, why: str | None) -> None:
    """The answer broke off: its tool calls will never run, yet each needs a result (the
    APIs reject a history with an unanswered call), and each the client was shown needs
    its final update."""
    builder.commit()
    why = why or CANCELLED
    await abandon(ctx, builder.calls, why)
    complete = {c.tool_call_id for c in builder.calls}
    for call_id in builder.announced.values():  # begun, but its arguments never came
        if call_id not in complete:
            await ctx.session.emit(
                t.ToolCallUpdateSessionUpdate(
                    tool_call_id=call_id,
                    status="failed",
                    content=[t.Content(content=t.TextContent(text=why))],
                )
            )


async def report_usage(session: Session, info: ModelInfo, usage: UsageReport) -> None:
    session.usage.context_tokens = usage.input_tokens + usage.output_tokens
    session.usage.add_spent(usage, info)
    window = info.context_window
    if session.window_limit:
        window = min(window, session.window_limit)
    await session.emit(session.usage_update(window))


def add_usage(totals: t.Usage, u: UsageReport) -> None:
    totals.input_tokens += u.input_tokens
    totals.output_tokens += u.output_tokens
    totals.total_tokens += u.input_tokens + u.output_tokens
    if u.thought_tokens:
        totals.thought_tokens = _int(totals.thought_tokens) + u.thought_tokens
    if u.cached_read_tokens:
        totals.cached_read_tokens = _int(totals.cached_read_tokens) + u.cached_read_tokens
    if u.cached_write_tokens:
        totals.cached_write_tokens = _int(totals.cached_write_tokens) + u.cached_write_tokens


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


class _AssistantBuilder:
    """Streams chunks to the client and assembles the assistant message for history."""

    __slots__ = (
        "_buf",
        "_committed",
        "_kind",
        "_live",
        "_message_id",
        "_session",
        "_thought_id",
        "announced",
        "calls",
        "parts",
    )

    def __init__(self, session: Session) -> None:
        self._session = session
        self.parts: list[AssistantPart] = []
        self.calls: list[PendingCall] = []
        self.announced: dict[str, str] = {}
        """The model's call id -> the tool call id the client was shown."""
        self._live: dict[str, LiveCall] = {}
        self._kind: str | None = None
        self._buf: list[str] = []
        self._message_id: str | None = None
        self._thought_id: str | None = None
        self._committed = False

    def _switch(self, kind: str | None) -> None:
        if self._kind == kind:
            return
        if self._buf:
            text = "".join(self._buf)
            self.parts.append(TextPart(text) if self._kind == "text" else ThinkingPart(text))
        self._buf = []
        self._kind = kind

    async def text(self, text: str) -> None:
        self._switch("text")
        self._buf.append(text)
        if self._message_id is None:
            self._message_id = self._session.new_message_id()
        await self._session.emit(
            t.AgentMessageChunk(content=t.TextContent(text=text), message_id=self._message_id)
        )

    async def thinking(self, text: str) -> None:
        self._switch("thinking")
        self._buf.append(text)
        if self._thought_id is None:
            self._thought_id = self._session.new_message_id()
        await self._session.emit(
            t.AgentThoughtChunk(content=t.TextContent(text=text), message_id=self._thought_id)
        )

    def sign(self, signature: str) -> None:
        text = "".join(self._buf) if self._kind == "thinking" else ""
        self._buf = []
        self._kind = None
        self.parts.append(ThinkingPart(text, signature))

    def redacted(self, data: str) -> None:
        self._switch(None)
        self.parts.append(RedactedThinkingPart(data))

    def reasoning(self, ev: ReasoningItem) -> None:
        """An opaque reasoning item, kept in stream order (it precedes the calls it led to)."""
        self._switch(None)
        self.parts.append(ReasoningPart(ev.id, ev.encrypted_content, ev.summary, ev.source))

    async def tool_started(self, ev: ToolCallStarted, ctx: TurnContext) -> None:
        """The model began a call: the client sees it now, pending, while its arguments
        stream (``toolcall.run_tool`` completes the same entry)."""
        if ev.call_id in self.announced:
            return
        call_id = self.announced[ev.call_id] = self._session.new_tool_call_id()
        tool = ctx.tools.get(ev.name)
        if tool is not None:
            self._live[ev.call_id] = LiveCall(call_id, tool, tool_context(ctx, call_id))
        await self._session.emit(
            t.ToolCall(
                tool_call_id=call_id,
                title=ev.name,
                name=ev.name,
                kind=tool.kind if tool is not None else "other",
                status="pending",
            )
        )

    async def tool_delta(self, ev: ToolCallDelta) -> None:
        """More of a started call's arguments: its title as soon as they tell it."""
        live = self._live.get(ev.call_id)
        update = live.feed(ev.arguments) if live is not None else None
        if update is not None:
            await self._session.emit(update)

    def tool_call(self, ev: ToolCallReady) -> None:
        self._live.pop(ev.call_id, None)
        self._switch(None)
        part = ToolCallPart(ev.call_id, ev.name, ev.arguments)
        self.parts.append(part)
        self.calls.append(PendingCall(part, ev.error, self.announced.get(ev.call_id)))

    def commit(self) -> None:
        """Append what was assembled to the session history (once)."""
        if self._committed:
            return
        self._committed = True
        self._switch(None)
        if self.parts:
            self._session.add_message(AssistantMessage(self.parts))
