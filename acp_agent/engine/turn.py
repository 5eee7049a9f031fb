"""The turn engine: one ``session/prompt`` from user message to stop reason.

prompt -> history -> provider stream -> ``session/update``s; tool calls -> permission ->
run -> results back into history -> the next model request, until the model stops
calling tools, a limit is reached, or the turn is cancelled.

Everything a turn needs arrives in one :class:`TurnContext`, built by the session side
(``runtime.Runtime.turn_context``): the session, the editor (:class:`Client`), the
provider (already behind ``providers.resilient``: retries and timeouts are not the
engine's business), the model's facts, the toolset, the permission rules, the system
prompt and two hooks. Tool calls are run by :mod:`.toolcall`.

Cancellation is the task's own ``CancelledError``: it unwinds through here (closing the
HTTP stream, killing tools, abandoning a permission wait) and every level keeps the
history consistent on the way out (partial answers are kept; every tool call gets a
result). Only the prompt handler turns it into the ``cancelled`` stop reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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
    ModelProvider,
    ModelRequest,
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
from .context import context_estimate
from .permissions import offered
from .streamargs import LiveCall

if TYPE_CHECKING:
    from ..client import Client
    from ..sessions.session import Session
    from ..tools.base import Toolset
    from .permissions import Rules

THINKING_LEVELS = ("off", "low", "medium", "high")
#: The least an answer is given, however full the context (then the window decides).
MIN_ANSWER_TOKENS = 1_024

Notify = Callable[[str, str, "str | None"], Awaitable[None]]
"""``(severity, title, description)``: an advisory for the user (see ``Runtime.notify``)."""


def _by_the_user() -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class TurnLimits:
    max_turn_requests: int = 50
    prompt_cache: bool = True
    """Ask the provider to cache the prompt's prefix (keyed by the session's id)."""


@dataclass(slots=True)
class TurnContext:
    """One turn's world. Subagents get their own (their session, their view of the
    editor), built by the same factory."""

    session: Session
    client: Client
    provider: ModelProvider
    model: ModelInfo
    tools: Toolset
    rules: Rules
    system: str
    limits: TurnLimits = field(default_factory=TurnLimits)
    notify: Notify | None = None
    before_request: Callable[[], Awaitable[None]] | None = None
    """Runs before every model request (compaction when the context is full)."""
    env: Mapping[str, str] | None = None
    """The environment of the commands tools start (the agent's, without its secrets)."""
    make_room: Callable[[ProviderContextError], Awaitable[bool]] | None = None
    """The request did not fit the window: compact, or drop the oldest messages;
    ``False`` when nothing could be done (see ``compaction.make_room``)."""
    interrupted_by: Callable[[], str | None] = _by_the_user
    """While the turn unwinds from a cancellation: why, when it was not the user (the turn
    ran out of time), for the tool calls and the history it leaves behind."""


@dataclass(slots=True)
class PendingCall:
    """A tool call the model made; ``error`` when its arguments were not valid JSON;
    ``tool_call_id`` when the client was shown it while the answer streamed."""

    part: ToolCallPart
    error: str | None = None
    tool_call_id: str | None = None


@dataclass(slots=True)
class StepResult:
    reason: str
    calls: list[PendingCall]
    usage: UsageReport | None


async def run_turn(ctx: TurnContext, user: UserMessage) -> tuple[str, t.Usage]:
    """Run one turn; returns the stop reason and the turn's token usage."""
    from .toolcall import abandon, run_tools

    session = ctx.session
    session.add_message(user)
    totals = t.Usage(total_tokens=0, input_tokens=0, output_tokens=0)
    made_room = False
    for _ in range(ctx.limits.max_turn_requests):
        if ctx.before_request is not None:
            await ctx.before_request()
        try:
            step = await model_step(ctx)
        except ProviderContextError as exc:  # make room (once) and ask again
            if made_room or ctx.make_room is None or not await ctx.make_room(exc):
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
            return "end_turn", totals
        await run_tools(ctx, step.calls)
    return "max_turn_requests", totals


def request_of(ctx: TurnContext) -> ModelRequest:
    session = ctx.session
    thinking = session.thinking if session.thinking in THINKING_LEVELS else "off"
    if not ctx.model.supports_thinking:
        thinking = "off"  # never sent to a model that rejects it
    mode = session.root.mode
    # the answer's room counts against the window too: never ask for more than is left
    window = ctx.model.context_window
    if session.window_limit:  # learned during this turn, maybe
        window = min(window, session.window_limit)
    room = window - context_estimate(session) * 6 // 5 - 256  # the estimate is rough
    return ModelRequest(
        system=ctx.system,
        messages=list(session.history),
        tools=[t.spec for t in ctx.tools.tools() if offered(mode, t.kind, t.spec.name)],
        thinking=thinking,  # type: ignore[arg-type]
        max_tokens=max(MIN_ANSWER_TOKENS, min(ctx.model.max_output_tokens, room)),
        cache_key=session.id if ctx.limits.prompt_cache else None,
    )


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
    from .toolcall import CANCELLED, abandon

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
        from .toolcall import tool_context

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
