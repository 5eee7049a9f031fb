"""The turn engine: one ``session/prompt`` from user message to stop reason.

prompt -> history -> provider stream -> ``session/update``s; tool calls -> permission ->
run -> results back into history -> the next model request, until the model stops
calling tools, a limit is reached, or the turn is cancelled.

Cancellation is the task's own ``CancelledError``: it unwinds through here (closing the
HTTP stream, killing tools, abandoning a permission wait) and every level keeps the
history consistent on the way out (partial answers are kept; every tool call gets a
result). Only the prompt handler turns it into the ``cancelled`` stop reason.
"""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import log
from .client import Client
from .errors import ProviderError, ToolError
from .permissions import REJECT_ALWAYS, REJECT_ONCE, Rules, decide, permission_options
from .protocol import UNSET
from .protocol import types as t
from .providers.base import (
    AssistantMessage,
    AssistantPart,
    Finished,
    ModelProvider,
    ModelRequest,
    RedactedThinking,
    RedactedThinkingPart,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    ThinkingSignature,
    ToolCallPart,
    ToolCallReady,
    ToolResultMessage,
    UsageReport,
    UserMessage,
    UserPart,
)
from .providers.models import ModelInfo, cost
from .session import Session
from .tools.base import ToolContext, Toolset

SYSTEM_PROMPT = """\
You are acp-agent, a coding agent working inside the user's editor through the Agent \
Client Protocol. The workspace root is {cwd}. Use the tools to read, search and change \
files and to run commands; paths may be relative to the workspace root. Keep the user \
informed: publish a plan with update_plan for multi-step work and keep it current. \
Be concise."""


THINKING_LEVELS = ("off", "low", "medium", "high")


@dataclass(frozen=True, slots=True)
class TurnLimits:
    max_turn_requests: int = 50
    max_retries: int = 4
    retry_max_delay: float = 30.0
    idle_timeout: float = 900.0


@dataclass(slots=True)
class StepResult:
    reason: str
    calls: list[ToolCallPart]
    usage: UsageReport | None


def backoff_delay(attempt: int, retry_after: float | None, max_delay: float) -> float:
    """Exponential backoff with full jitter; the server's Retry-After wins when given."""
    if retry_after is not None and retry_after >= 0:
        return min(retry_after, max_delay)
    return random.uniform(0, min(max_delay, 0.5 * 2**attempt))


class TurnEngine:
    def __init__(
        self,
        *,
        client: Client,
        tools_for: Callable[[Session], Toolset],
        provider_for: Callable[[str], ModelProvider],
        model_info_for: Callable[[str], ModelInfo],
        rules_for: Callable[[Session], Rules],
        limits: TurnLimits,
        system_prompt: str | None = None,
        notify: Callable[[Session, str, str, str | None], Awaitable[None]] | None = None,
        before_request: Callable[[Session], Awaitable[None]] | None = None,
    ) -> None:
        self.client = client
        self.tools_for = tools_for
        self.before_request = before_request
        self.provider_for = provider_for
        self.model_info_for = model_info_for
        self.rules_for = rules_for
        self.limits = limits
        self.system_prompt = system_prompt or SYSTEM_PROMPT
        self.notify = notify

    async def run(self, session: Session, user: UserMessage) -> tuple[str, t.Usage | None]:
        """Run one turn; returns the stop reason and the turn's token usage."""
        session.add_message(user)
        totals = t.Usage(total_tokens=0, input_tokens=0, output_tokens=0)
        for _ in range(self.limits.max_turn_requests):
            if self.before_request is not None:
                await self.before_request(session)  # e.g. compaction when the context is full
            step = await self._model_step(session)
            if step.usage is not None:
                _add_usage(totals, step.usage)
            if step.reason == "length":
                _close_dangling_calls(session, step.calls, "The answer hit the token limit.")
                return "max_tokens", totals
            if step.reason == "refusal":
                # the refused prompt and all after it leave the context (spec)
                start = next(i for i, m in enumerate(session.history) if m is user)
                session.truncate_history(start)
                return "refusal", totals
            if not step.calls:
                return "end_turn", totals
            await self._run_tools(session, step.calls)
        return "max_turn_requests", totals

    def with_client(self, client: Client) -> TurnEngine:
        """This engine, reaching the editor through ``client`` (a subagent's view of it)."""
        engine = copy.copy(self)
        engine.client = client
        return engine

    # ------------------------------------------------------------------ model

    def _request(self, session: Session) -> ModelRequest:
        info = self.model_info_for(session.model)
        return ModelRequest(
            system=self.system_prompt.format(cwd=session.cwd),
            messages=list(session.history),
            tools=self.tools_for(session).specs(),
            thinking=session.thinking if session.thinking in THINKING_LEVELS else "off",  # type: ignore[arg-type]
            max_tokens=info.max_output_tokens,
        )

    async def _model_step(self, session: Session) -> StepResult:
        provider = self.provider_for(session.model)
        request = self._request(session)
        attempt = 0
        while True:
            builder = _AssistantBuilder(session)
            try:
                result = await self._stream(provider, request, builder)
            except ProviderError as exc:
                builder.commit()
                if builder.started or not exc.retryable or attempt >= self.limits.max_retries:
                    raise
                delay = backoff_delay(attempt, exc.retry_after, self.limits.retry_max_delay)
                attempt += 1
                log.warning("model request failed; retrying", error=exc.message, delay=delay)
                if self.notify is not None:
                    await self.notify(
                        session,
                        "warning",
                        "Model request failed; retrying",
                        f"{exc.message} — attempt {attempt + 1} in {delay:.1f}s",
                    )
                await asyncio.sleep(delay)
                continue
            except BaseException:
                builder.commit()  # keep what was streamed, even on cancel
                raise
            builder.commit()
            if result.usage is not None:
                await self._report_usage(session, result.usage)
            return result

    async def _stream(
        self, provider: ModelProvider, request: ModelRequest, b: _AssistantBuilder
    ) -> StepResult:
        reason: str | None = None
        usage: UsageReport | None = None
        loop = asyncio.get_running_loop()
        idle = self.limits.idle_timeout
        async with asyncio.timeout(idle) as deadline:
            bumped = loop.time()
            async for ev in provider.stream(request):
                now = loop.time()
                if now - bumped > 1.0:
                    deadline.reschedule(now + idle)
                    bumped = now
                if isinstance(ev, TextDelta):
                    await b.text(ev.text)
                elif isinstance(ev, ThinkingDelta):
                    await b.thinking(ev.text)
                elif isinstance(ev, ToolCallReady):
                    b.tool_call(ev)
                elif isinstance(ev, UsageReport):
                    usage = ev
                elif isinstance(ev, ThinkingSignature):
                    b.sign(ev.signature)
                elif isinstance(ev, RedactedThinking):
                    b.redacted(ev.data)
                elif isinstance(ev, Finished):
                    reason = ev.reason
        if reason is None:
            from .errors import ProviderStreamError

            raise ProviderStreamError("the model stream ended without a finish reason")
        return StepResult(reason, b.calls, usage)

    async def _report_usage(self, session: Session, usage: UsageReport) -> None:
        info = self.model_info_for(session.model)
        session.usage.context_tokens = usage.input_tokens + usage.output_tokens
        session.usage.input_tokens += usage.input_tokens
        session.usage.output_tokens += usage.output_tokens
        step_cost = cost(info, usage)
        if step_cost is not None:
            session.usage.cost = (session.usage.cost or 0.0) + step_cost
        await session.emit(usage_update(session, info))

    # ------------------------------------------------------------------ tools

    async def _run_tools(self, session: Session, calls: list[ToolCallPart]) -> None:
        """Run one response's tool calls and add their results to history, in call order.

        Calls run one after another, except that tools marked ``concurrent`` (subagents)
        run side by side when the response asks for more than one of them."""
        tools = self.tools_for(session)
        together = [i for i, c in enumerate(calls) if getattr(tools.get(c.name), "concurrent", 0)]
        if len(together) < 2:
            for index, call in enumerate(calls):
                try:
                    session.add_message(await self._run_tool(session, call))
                except BaseException:
                    _close_dangling_calls(session, calls[index:], "Cancelled by the user.")
                    raise
            return
        tasks = {i: asyncio.create_task(self._run_tool(session, calls[i])) for i in together}
        results: dict[int, ToolResultMessage] = {}
        try:
            for index, call in enumerate(calls):
                if index not in tasks:  # the others keep their turn, in the turn's own task
                    results[index] = await self._run_tool(session, call)
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
            _close_dangling_calls(session, calls, "Cancelled by the user.")
            raise
        for index in range(len(calls)):
            session.add_message(results[index])

    async def _run_tool(self, session: Session, call: ToolCallPart) -> ToolResultMessage:
        call_id = session.new_tool_call_id()
        tool = self.tools_for(session).get(call.name)
        ctx = ToolContext(
            session_id=session.id,
            cwd=session.cwd,
            roots=session.roots,
            client=self.client,
            tool_call_id=call_id,
            emit=session.emit,
        )
        args: Mapping[str, Any] = call.arguments
        if tool is None:
            await session.emit(
                t.ToolCall(
                    tool_call_id=call_id,
                    title=call.name,
                    name=call.name,
                    kind="other",
                    status="failed",
                    raw_input=dict(args),
                )
            )
            return _result(call, f"Unknown tool {call.name!r}.", error=True)
        try:
            title = tool.title(args, ctx)
            locations = tool.locations(args, ctx)
            access, paths = tool.access(args, ctx)
        except (ToolError, KeyError, TypeError, ValueError) as exc:
            title, locations, access, paths = call.name, [], "none", []
            bad_args: str | None = str(exc)
        else:
            bad_args = None
        await session.emit(
            t.ToolCall(
                tool_call_id=call_id,
                title=title,
                name=call.name,
                kind=tool.kind,
                status="pending",
                raw_input=dict(args),
                locations=locations,
            )
        )
        if bad_args is not None:
            return await self._fail(session, call, call_id, f"Invalid arguments: {bad_args}")

        rules = self.rules_for(session)
        key = tool.permission_key(args)
        mode = session.root.mode  # a subagent follows its parent's current mode
        decision = decide(mode, access, all(ctx.inside_roots(p) for p in paths))
        if decision == "ask":
            decision = rules.lookup(key) or "ask"
        if decision == "deny":
            reason = (
                "Refused: the session is in plan mode (read-only)."
                if mode == "plan"
                else "Refused: the user rejected this kind of call."
            )
            return await self._fail(session, call, call_id, reason)
        if decision == "ask":
            outcome = await self.client.request_permission(
                session.id,
                t.ToolCallUpdate(
                    tool_call_id=call_id,
                    title=title,
                    kind=tool.kind,
                    status="pending",
                    raw_input=dict(args),
                    locations=locations,
                ),
                permission_options(),
            )
            if isinstance(outcome, t.CancelledRequestPermissionOutcome):
                turn = session.current_turn()
                if turn is None:
                    raise asyncio.CancelledError
                turn.cancel()  # the client cancelled the turn: end it as a cancel
                await asyncio.sleep(0)
            option = getattr(outcome, "option_id", REJECT_ONCE)
            rules.remember(key, option)
            if not option.startswith("allow"):
                if option not in (REJECT_ONCE, REJECT_ALWAYS):
                    log.warning("unknown permission option; treating as a rejection", option=option)
                return await self._fail(session, call, call_id, "The user rejected this tool call.")

        await session.emit(
            t.ToolCallUpdateSessionUpdate(tool_call_id=call_id, status="in_progress")
        )
        try:
            out = await tool.run(args, ctx)
        except ToolError as exc:
            return await self._fail(session, call, call_id, exc.message)
        except asyncio.CancelledError:
            await session.emit(
                t.ToolCallUpdateSessionUpdate(
                    tool_call_id=call_id, status="failed", content=[_text_content("Cancelled.")]
                )
            )
            raise
        except Exception as exc:
            log.exception("tool failed", tool=call.name)
            return await self._fail(session, call, call_id, f"Internal error in {call.name}: {exc}")
        await session.emit(
            t.ToolCallUpdateSessionUpdate(
                tool_call_id=call_id,
                status="completed",
                content=out.content or [_text_content(out.text)],
                raw_output=out.raw_output if out.raw_output is not None else {"output": out.text},
                locations=out.locations if out.locations is not None else UNSET,
            )
        )
        return ToolResultMessage(call.call_id, call.name, [TextPart(out.text), *out.images])

    async def _fail(
        self, session: Session, call: ToolCallPart, call_id: str, message: str
    ) -> ToolResultMessage:
        await session.emit(
            t.ToolCallUpdateSessionUpdate(
                tool_call_id=call_id,
                status="failed",
                content=[_text_content(message)],
                raw_output={"error": message},
            )
        )
        return _result(call, message, error=True)


# ---------------------------------------------------------------------- helpers


class _AssistantBuilder:
    """Streams chunks to the client and assembles the assistant message for history."""

    __slots__ = (
        "_buf",
        "_committed",
        "_kind",
        "_message_id",
        "_session",
        "_thought_id",
        "calls",
        "parts",
        "started",
    )

    def __init__(self, session: Session) -> None:
        self._session = session
        self.parts: list[AssistantPart] = []
        self.calls: list[ToolCallPart] = []
        self._kind: str | None = None
        self._buf: list[str] = []
        self._message_id: str | None = None
        self._thought_id: str | None = None
        self.started = False
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
        self.started = True
        self._switch("text")
        self._buf.append(text)
        if self._message_id is None:
            self._message_id = self._session.new_message_id()
        await self._session.emit(
            t.AgentMessageChunk(content=t.TextContent(text=text), message_id=self._message_id)
        )

    async def thinking(self, text: str) -> None:
        self.started = True
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

    def tool_call(self, ev: ToolCallReady) -> None:
        self.started = True
        self._switch(None)
        part = ToolCallPart(ev.call_id, ev.name, ev.arguments)
        self.parts.append(part)
        if ev.error is None:
            self.calls.append(part)
        else:
            self.calls.append(ToolCallPart(ev.call_id, ev.name, {"__invalid__": ev.error}))

    def commit(self) -> None:
        """Append what was assembled to the session history (once)."""
        if self._committed:
            return
        self._committed = True
        self._switch(None)
        if self.parts:
            self._session.add_message(AssistantMessage(self.parts))


def _text_content(text: str) -> t.Content:
    return t.Content(content=t.TextContent(text=text))


def _result(call: ToolCallPart, text: str, *, error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(call.call_id, call.name, [TextPart(text)], is_error=error)


def _close_dangling_calls(session: Session, calls: list[ToolCallPart], why: str) -> None:
    """Give every tool call in history a result (the APIs reject calls without one)."""
    answered = {m.call_id for m in session.history if isinstance(m, ToolResultMessage)}
    for call in calls:
        if call.call_id not in answered:
            session.add_message(_result(call, why, error=True))


def _add_usage(totals: t.Usage, u: UsageReport) -> None:
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


def usage_update(session: Session, info: ModelInfo) -> t.UsageUpdate:
    amount = session.usage.cost
    return t.UsageUpdate(
        used=session.usage.context_tokens,
        size=info.context_window,
        cost=UNSET if amount is None else t.Cost(amount=round(amount, 6), currency="USD"),
    )


def user_parts(blocks: list[Any], *, images: bool) -> list[UserPart]:
    """Turn ACP prompt content into model input parts."""
    parts: list[UserPart] = []
    from .providers.base import ImagePart

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
