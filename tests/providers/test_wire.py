"""SSE framing as the providers read it (``acp_agent.providers._wire``): events split across
HTTP frames, CRLF, comments, multi-line data, bad payloads, a body that is not a stream.
Through the real SDKs against the local server, which writes the bytes given as they are."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from acp_agent.conversation import TextPart, UserMessage
from acp_agent.errors import ProviderStreamError
from acp_agent.providers._anthropic import AnthropicProvider
from acp_agent.providers._openai import OpenAIProvider
from acp_agent.providers.base import Finished, ModelRequest, TextDelta, UsageReport

from ..fakes.llm_server import FakeLLMServer, Frames
from ..limits import WAIT
from . import collect, collect_until_error

REQUEST = ModelRequest(system="", messages=[UserMessage([TextPart("hi")])])


def chunk(content: str | None = None, finish: str | None = None) -> str:
    delta = {} if content is None else {"content": content}
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


@pytest_asyncio.fixture
async def openai(server: FakeLLMServer) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider("m", api_key="k", base_url=server.openai_url, timeout=WAIT)
    yield p
    await p.aclose()


@pytest.mark.asyncio
async def test_events_split_across_frames_with_crlf_comments_and_fields(
    server: FakeLLMServer, openai: OpenAIProvider
) -> None:
    first = f"data: {chunk('Hello')}\r\n\r\n".encode()
    server.enqueue(
        Frames(
            [
                first[:9],  # an event cut mid-payload, then mid-line-ending
                first[9:-3],
                first[-3:],
                b": keep-alive\n\nid: 7\nretry: 1000\n\n",  # carry no data: skipped
                f"event: message\ndata: {chunk(' world')}\n\n".encode(),
                f"data: {chunk(finish='stop')}\n\ndata: [DONE]\n\n".encode(),
            ]
        )
    )
    events = await collect(openai.stream(REQUEST))
    assert events == [TextDelta("Hello"), TextDelta(" world"), Finished("stop")]


@pytest.mark.asyncio
async def test_multi_line_data_is_one_payload(
    server: FakeLLMServer, openai: OpenAIProvider
) -> None:
    head, tail = chunk("x", "stop").split(":", 1)
    server.enqueue(Frames([f"data: {head}:\ndata:{tail}\n\n".encode()]))
    assert await collect(openai.stream(REQUEST)) == [TextDelta("x"), Finished("stop")]


@pytest.mark.asyncio
async def test_invalid_payload_is_a_stream_error(
    server: FakeLLMServer, openai: OpenAIProvider
) -> None:
    server.enqueue(Frames([f"data: {chunk('a')}\n\n".encode(), b"data: {nope\n\n"]))
    events, error = await collect_until_error(openai.stream(REQUEST))
    assert events == [TextDelta("a")]
    assert isinstance(error, ProviderStreamError) and "invalid stream event" in error.message


@pytest.mark.asyncio
async def test_a_body_that_is_not_an_event_stream_is_a_stream_error(
    server: FakeLLMServer, openai: OpenAIProvider
) -> None:
    """A server that ignores ``stream: true`` and answers JSON: an error, not a retry."""
    body = {"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}
    server.enqueue(Frames([json.dumps(body).encode()], content_type="application/json"))
    events, error = await collect_until_error(openai.stream(REQUEST))
    assert events == []
    assert isinstance(error, ProviderStreamError) and not error.retryable
    assert "did not send an event stream" in error.message and "application/json" in error.message


@pytest.mark.asyncio
async def test_anthropic_event_names_pings_and_frames(server: FakeLLMServer) -> None:
    def event(data: dict[str, Any]) -> bytes:
        return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()

    usage = {"input_tokens": 3, "output_tokens": 1}
    stream = b"".join(
        [
            event({"type": "message_start", "message": {"usage": usage}}),
            event({"type": "ping"}),
            event({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
            event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                                                                         "text": "hi"}}),
            event({"type": "content_block_stop", "index": 0}),
            event({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": {"output_tokens": 2}}),
            event({"type": "message_stop"}),
        ]
    )
    server.enqueue(Frames([stream[i : i + 50] for i in range(0, len(stream), 50)]))
    provider = AnthropicProvider("claude-x", api_key="k", base_url=server.url, timeout=WAIT)
    events = await collect(provider.stream(REQUEST))
    await provider.aclose()
    assert events == [
        TextDelta("hi"),
        UsageReport(input_tokens=3, output_tokens=2),
        Finished("stop"),
    ]
