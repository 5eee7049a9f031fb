"""An in-memory :class:`~acp_agent.providers.base.ModelProvider` for in-process tests.

Each model request takes the next scripted response: a list of stream events, errors to
raise, and :class:`Gate`\\ s where the stream stops until the test releases it (so a test
can act, e.g. cancel, at an exact point). It records every request and whether each
stream was closed, and refuses what a real API refuses (a history whose tool calls have
no result, a tool result without its call), so a lenient engine cannot pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from acp_agent.conversation import AssistantMessage, ToolCallPart, ToolResultMessage
from acp_agent.errors import ProviderHTTPError
from acp_agent.providers.base import (
    Finished,
    FinishReason,
    ModelRequest,
    StreamEvent,
    TextDelta,
    ToolCallReady,
    UsageReport,
)


@dataclass
class Gate:
    """A point in a stream: ``reached`` is set when the stream gets there; the stream goes
    on once ``release`` is set (never, unless the test sets it)."""

    reached: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


Item = StreamEvent | Gate | BaseException


def text(*pieces: str, reason: FinishReason = "stop", usage: int = 10) -> list[Item]:
    """A plain answer streamed in ``pieces``."""
    return [
        *(TextDelta(p) for p in pieces),
        UsageReport(input_tokens=usage, output_tokens=len(pieces)),
        Finished(reason),
    ]


def calls(*items: tuple[str, dict[str, Any]] | ToolCallReady) -> list[Item]:
    """A response calling tools: ``(name, arguments)`` pairs or ready-made events."""
    out: list[Item] = []
    for i, item in enumerate(items):
        if isinstance(item, ToolCallReady):
            out.append(item)
        else:
            out.append(ToolCallReady(f"tc_{id(out)}_{i}", item[0], item[1]))
    return [*out, UsageReport(input_tokens=20, output_tokens=5), Finished("tool_calls")]


class ScriptedProvider:
    name = "scripted:model"
    endpoint = "memory://scripted"

    def __init__(self, *responses: list[Item]) -> None:
        self.responses = list(responses)
        self.requests: list[ModelRequest] = []
        self.opened = 0
        self.closed = 0

    async def aclose(self) -> None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        check_history(request)
        self.requests.append(request)
        items = self.responses.pop(0) if self.responses else text("(no more script)")
        self.opened += 1
        try:
            for item in items:
                if isinstance(item, Gate):
                    item.reached.set()
                    await item.release.wait()
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item
        finally:
            self.closed += 1


def check_history(request: ModelRequest) -> None:
    """What both vendors reject with a 400: every tool call answered by a result right
    after its assistant message, no result without its call, tools offered when the
    history holds tool blocks."""
    pending: set[str] = set()
    seen_calls: set[str] = set()
    for message in request.messages:
        if isinstance(message, ToolResultMessage):
            if message.call_id not in pending:
                raise ProviderHTTPError(f"tool result {message.call_id} without its call", 400)
            pending.discard(message.call_id)
            continue
        if pending:
            raise ProviderHTTPError(f"tool calls without results: {sorted(pending)}", 400)
        if isinstance(message, AssistantMessage):
            ids = {p.call_id for p in message.parts if isinstance(p, ToolCallPart)}
            pending |= ids
            seen_calls |= ids
    if pending:
        raise ProviderHTTPError(f"tool calls without results: {sorted(pending)}", 400)
    if seen_calls and not request.tools:
        raise ProviderHTTPError("tool blocks in the history but no tools offered", 400)
