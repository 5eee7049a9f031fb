"""The SDKs' ``async_maybe_transform`` walks every message and tool of a request (41 ms
for 301 messages here) and their JSON encoding is the standard library's: the providers
send their bodies encoded already, through the SDK's ``post`` (``_sdk.Posted``), and what
the server receives is exactly the body they built."""

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
from acp_agent.providers._anthropic import AnthropicProvider
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
            "openai._base_client",
            lambda url: OpenAIProvider("gpt-4.1", api_key="k", base_url=url, timeout=WAIT),
        ),
        (
            "openai._base_client",
            lambda url: ResponsesProvider("gpt-5", api_key="k", base_url=url, timeout=WAIT),
        ),
        (
            "anthropic._base_client",
            lambda url: AnthropicProvider("claude-sonnet-4-5", api_key="k", base_url=url,
                                          timeout=WAIT),
        ),
    ],
    ids=["chat", "responses", "messages"],
)
async def test_the_body_goes_as_built_past_the_sdk_encoding(
    server: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    module: str,
    make: Callable[[str], OpenAIProvider | ResponsesProvider | AnthropicProvider],
) -> None:
    import importlib

    client = importlib.import_module(module)
    walked: list[Any] = []
    dumps = client.openapi_dumps

    def spy(data: Any) -> Any:
        walked.append(data)
        return dumps(data)

    monkeypatch.setattr(client, "openapi_dumps", spy)
    provider = make(server.url if "anthropic" in module else server.openai_url)
    try:
        server.enqueue(Reply([Text("ok"), Finish("stop"), Usage(5, 1)]))
        request = ModelRequest(system="Be brief.", messages=HISTORY, tools=TOOLS,
                               cache_key="s1")  # fmt: skip
        await collect(provider.stream(request))
        built = provider.request_params(request)
    finally:
        await provider.aclose()
    assert server.requests[0].body == built  # nothing lost, nothing renamed
    assert walked == []  # the SDK neither walks nor encodes the body (nor its stand-ins)
