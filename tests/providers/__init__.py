"""Helpers shared by the provider tests (the real SDKs against ``tests.fakes.llm_server``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from acp_agent.conversation import TextPart, UserMessage
from acp_agent.errors import ProviderError
from acp_agent.providers.base import (
    ModelRequest,
    StreamEvent,
    ToolCallDelta,
    ToolCallReady,
    ToolCallStarted,
)

from ..fakes.llm_server import FakeLLMServer
from ..limits import WAIT
from ..timeouts import LoopClock

ROOT = Path(__file__).resolve().parents[2]


def hello() -> ModelRequest:
    """The smallest request: a system prompt and one user message."""
    return ModelRequest(system="s", messages=[UserMessage([TextPart("hi")])])


async def collect(stream: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in stream]


def streamed(events: list[StreamEvent]) -> tuple[list[StreamEvent], dict[str, str]]:
    """The events without :class:`ToolCallDelta`, and each call's argument text as its
    deltas spelled it. A delta outside its call (before it started, after it was ready)
    fails the test."""
    others: list[StreamEvent] = []
    texts: dict[str, str] = {}
    open_calls: set[str] = set()
    for event in events:
        if isinstance(event, ToolCallDelta):
            assert event.call_id in open_calls, f"{event} outside its call"
            texts[event.call_id] = texts.get(event.call_id, "") + event.arguments
            continue
        if isinstance(event, ToolCallStarted):
            open_calls.add(event.call_id)
        elif isinstance(event, ToolCallReady):
            open_calls.discard(event.call_id)
        others.append(event)
    return others, texts


async def collect_until_error(
    stream: AsyncIterator[StreamEvent],
) -> tuple[list[StreamEvent], ProviderError]:
    """The events that arrived before the stream failed, and the error it failed with."""
    events: list[StreamEvent] = []
    try:
        async for event in stream:
            events.append(event)
    except ProviderError as exc:
        return events, exc
    raise AssertionError(f"the stream did not fail; events: {events}")


async def until_it_stalls(
    stream: AsyncIterator[StreamEvent], clock: LoopClock, before: int
) -> tuple[list[StreamEvent], ProviderError]:
    """:func:`collect_until_error` for a stream that stalls after ``before`` events: once
    they have arrived, the test's clock moves on a minute at a time while the stream
    waits, so a read timeout of a minute expires then, and only then, however fast or
    slow this machine is."""
    events = [await anext(stream) for _ in range(before)]
    rest = asyncio.ensure_future(collect_until_error(stream))
    while not rest.done():
        clock.advance(60.0)
        await asyncio.sleep(0.01)  # on that clock: the timers now due run first
    more, error = rest.result()
    return [*events, *more], error


async def cancel_after_first_event(
    stream: AsyncIterator[StreamEvent], server: FakeLLMServer
) -> list[StreamEvent]:
    """Consume in a task, cancel it after the first event; the server must see the client go."""
    seen: list[StreamEvent] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for event in stream:
            seen.append(event)
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), WAIT)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the cancelled stream did not raise CancelledError")
    await asyncio.wait_for(server.requests[-1].disconnected.wait(), WAIT)
    return seen


def imports_sdk(module: str, sdk: str) -> bool:
    """Whether importing ``module`` in a fresh interpreter loads ``sdk``."""
    code = f"import sys, {module}; print({sdk!r} in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout.strip() == "True"
