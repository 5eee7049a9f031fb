"""The OpenAI SDK's ``async_maybe_transform`` walks every message and tool of a request
(41 ms for 301 messages here): the providers send their bodies as they are, through the
SDK (``as_sent``), and what the server receives is exactly the body they built."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from acp_agent.conversation import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from acp_agent.providers._openai import OpenAIProvider
from acp_agent.providers._responses import ResponsesProvider
from acp_agent.providers.base import ModelRequest

from ..fakes.llm_server import FakeLLMServer, Finish, Reply, Text, Usage
from ..limits import WAIT
from . import collect

HISTORY: list[Message] = [
    UserMessage([TextPart("read it")]),
    AssistantMessage([ToolCallPart("c1", "read_file", {"path": "a.py"})]),
    ToolResultMessage("c1", "read_file", [TextPart("print(1)\n")], False),
    UserMessage([TextPart("and now?")]),
]
TOOLS = [ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {
    "path": {"type": "string"}}, "required": ["path"]})]  # fmt: skip


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


@pytest.mark.parametrize(
    ("module", "make"),
    [
        (
            "openai.resources.chat.completions.completions",
            lambda url: OpenAIProvider("gpt-4.1", api_key="k", base_url=url, timeout=WAIT),
        ),
        (
            "openai.resources.responses.responses",
            lambda url: ResponsesProvider("gpt-5", api_key="k", base_url=url, timeout=WAIT),
        ),
    ],
    ids=["chat", "responses"],
)
async def test_the_body_goes_as_built_past_the_transform(
    server: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    module: str,
    make: Callable[[str], OpenAIProvider | ResponsesProvider],
) -> None:
    import importlib

    resource = importlib.import_module(module)
    walked: list[dict[str, Any]] = []
    transform = resource.async_maybe_transform

    async def spy(data: Any, expected: Any) -> Any:
        walked.append(dict(data))
        return await transform(data, expected)

    monkeypatch.setattr(resource, "async_maybe_transform", spy)
    provider = make(server.openai_url)
    try:
        server.enqueue(Reply([Text("ok"), Finish("stop"), Usage(5, 1)]))
        request = ModelRequest(system="Be brief.", messages=HISTORY, tools=TOOLS)
        await collect(provider.stream(request))
        built = provider.request_params(request)
    finally:
        await provider.aclose()
    assert server.requests[0].body == built  # nothing lost, nothing renamed
    (seen,) = walked  # the SDK still builds the request: only stand-ins pass its walk
    carried = {
        k for k in ("messages", "input", "tools") if isinstance(seen.get(k), list) and seen[k]
    }
    assert carried == set()
