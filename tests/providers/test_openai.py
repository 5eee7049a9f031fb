"""OpenAIProvider through the real ``openai`` SDK against the local scripted server."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
import pytest_asyncio

from acp_agent.config import from_mapping
from acp_agent.conversation import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from acp_agent.errors import (
    ProviderAuthError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderStreamError,
)
from acp_agent.providers import _sdk, make_provider
from acp_agent.providers._openai import OpenAIProvider
from acp_agent.providers._sdk import parse_retry_after
from acp_agent.providers.base import (
    Finished,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallReady,
    ToolCallStarted,
    UsageReport,
)

from ..fakes.llm_server import (
    FakeLLMServer,
    Finish,
    Hang,
    HttpError,
    Raw,
    Refusal,
    Reply,
    Text,
    Thinking,
    ToolCall,
    Usage,
)
from ..limits import WAIT
from ..timeouts import LoopClock
from . import (
    cancel_after_first_event,
    collect,
    collect_until_error,
    imports_sdk,
    streamed,
    until_it_stalls,
)


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_CUSTOM_HEADERS"):
        monkeypatch.delenv(name, raising=False)


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


@pytest_asyncio.fixture
async def provider(server: FakeLLMServer) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider("gpt-4.1", api_key="test-key", base_url=server.openai_url, timeout=WAIT)
    yield p
    await p.aclose()


def ask(*messages: Message, **kwargs: Any) -> ModelRequest:
    history = list(messages) or [UserMessage([TextPart("hi")])]
    return ModelRequest(system="Be brief.", messages=history, **kwargs)


@pytest.mark.asyncio
async def test_text_streams_then_usage_then_finished(
    server: FakeLLMServer, provider: OpenAIProvider
) -> None:
    """Content deltas become TextDelta; the usage chunk comes out before Finished."""
    server.enqueue(Reply([Text("Hel"), Text("lo"), Finish("stop"), Usage(12, 2)]))
    events = await collect(provider.stream(ask()))
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        UsageReport(input_tokens=12, output_tokens=2),
        Finished("stop"),
    ]
    body = server.requests[0].body
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].headers["authorization"] == "Bearer test-key"
    assert body["model"] == "gpt-4.1"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert "tools" not in body and "reasoning_effort" not in body


@pytest.mark.asyncio
async def test_reasoning_fields_become_thinking(
    server: FakeLLMServer, provider: OpenAIProvider
) -> None:
    """``reasoning_content`` (vLLM/DeepSeek) and ``reasoning`` (Ollama/OpenRouter) are thoughts."""
    steps = [Thinking("a", field="reasoning_content"), Thinking("b", field="reasoning")]
    server.enqueue(Reply([*steps, Text("c"), Finish("stop")]))
    events = await collect(provider.stream(ask()))
    assert events == [ThinkingDelta("a"), ThinkingDelta("b"), TextDelta("c"), Finished("stop")]


@pytest.mark.asyncio
async def test_parallel_tool_calls_are_assembled_from_fragments(
    server: FakeLLMServer, provider: OpenAIProvider
) -> None:
    """Two calls' arguments split over many chunks come out as two complete calls."""
    server.enqueue(
        Reply(
            [
                Text("Reading."),
                ToolCall("call_1", "read_file", '{"path": "src/main.py", "line": 3}', pieces=5),
                ToolCall("call_2", "list_dir", '{"path": "."}', pieces=4),
                Finish("tool_calls"),
            ]
        )
    )
    tools = [ToolSpec("read_file", "Read a file", {"type": "object", "properties": {}})]
    events, arguments = streamed(await collect(provider.stream(ask(tools=tools))))
    assert arguments == {"call_1": '{"path": "src/main.py", "line": 3}', "call_2": '{"path": "."}'}
    assert events == [
        TextDelta("Reading."),
        ToolCallStarted("call_1", "read_file"),
        ToolCallStarted("call_2", "list_dir"),
        ToolCallReady("call_1", "read_file", {"path": "src/main.py", "line": 3}),
        ToolCallReady("call_2", "list_dir", {"path": "."}),
        Finished("tool_calls"),
    ]
    assert server.requests[0].body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]


def _fragment(index: int, args: str, call_id: str | None = None, name: str = "") -> Raw:
    call: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if call_id:
        call.update(id=call_id, type="function", function={"name": name, "arguments": args})
    delta = {"tool_calls": [call]}
    return Raw({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})  # fmt: skip


@pytest.mark.asyncio
async def test_interleaved_fragments_are_keyed_by_index(
    server: FakeLLMServer, provider: OpenAIProvider
) -> None:
    """Fragments of two calls arriving interleaved are joined per ``index``; a server that
    finishes tool calls with ``stop`` still reports ``tool_calls``."""
    server.enqueue(
        Reply(
            [
                _fragment(0, '{"a"', "id_a", "fa"),
                _fragment(1, '{"b": ', "id_b", "fb"),
                _fragment(0, ": 1}"),
                _fragment(1, "2}"),
                Finish("stop"),
            ]
        )
    )
    events, arguments = streamed(await collect(provider.stream(ask())))
    assert arguments == {"id_a": '{"a": 1}', "id_b": '{"b": 2}'}  # each call's own pieces
    assert events[2:] == [
        ToolCallReady("id_a", "fa", {"a": 1}),
        ToolCallReady("id_b", "fb", {"b": 2}),
        Finished("tool_calls"),
    ]


@pytest.mark.asyncio
async def test_bad_tool_arguments_are_reported_not_raised(
    server: FakeLLMServer, provider: OpenAIProvider
) -> None:
    """Non-JSON or non-object argument text sets ``error``; an empty string means ``{}``."""
    server.enqueue(
        Reply(
            [
                ToolCall("c1", "f", '{"path": '),
                ToolCall("c2", "g", "[1, 2]"),
                ToolCall("c3", "h", ""),
                Finish("tool_calls"),
            ]
        )
    )
    ready = [e for e in await collect(provider.stream(ask())) if isinstance(e, ToolCallReady)]
    assert [(r.call_id, r.arguments, r.error is None) for r in ready] == [
        ("c1", {}, False),
        ("c2", {}, False),
        ("c3", {}, True),
    ]
    assert ready[0].error and "JSON" in ready[0].error


@pytest.mark.asyncio
async def test_usage_maps_cached_and_reasoning_tokens(
    server: FakeLLMServer, provider: OpenAIProvider
) -> None:
    """prompt_tokens (cached included), cached_tokens and reasoning_tokens are carried over."""
    server.enqueue(Reply([Text("x"), Finish("stop"), Usage(100, 40, cached=60, reasoning=25)]))
    events = await collect(provider.stream(ask()))
    assert events[-2] == UsageReport(
        input_tokens=100, output_tokens=40, cached_read_tokens=60, thought_tokens=25
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("steps", "reason"),
    [
        ([Text("trunc"), Finish("length")], "length"),
        ([Text("no"), Finish("content_filter")], "refusal"),
        ([Refusal("I can't help with that."), Finish("stop")], "refusal"),
    ],
)
async def test_finish_reasons(
    server: FakeLLMServer, provider: OpenAIProvider, steps: list[Any], reason: str
) -> None:
    """length stays length; content_filter and a refusal delta end as ``refusal``."""
    server.enqueue(Reply(steps))
    events = await collect(provider.stream(ask()))
    assert events[-1] == Finished(reason)  # type: ignore[arg-type]
    assert isinstance(events[0], TextDelta) and events[0].text


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("headers", "retry_after"), [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "1500"}, 1.5)]
)
async def test_429_is_retryable_with_retry_after(
    server: FakeLLMServer, provider: OpenAIProvider, headers: dict[str, str], retry_after: float
) -> None:
    """A rate limit becomes ProviderHTTPError(429) with the server's wait, and no SDK retry."""
    server.enqueue(HttpError(429, {"error": {"message": "slow down"}}, headers))
    _, error = await collect_until_error(provider.stream(ask()))
    assert isinstance(error, ProviderHTTPError)
    assert (error.status, error.retry_after, error.retryable) == (429, retry_after, True)
    assert "slow down" in error.body
    assert len(server.requests) == 1


@pytest.mark.asyncio
async def test_500_is_retryable(server: FakeLLMServer, provider: OpenAIProvider) -> None:
    server.enqueue(HttpError(500, {"error": {"message": "boom"}}))
    _, error = await collect_until_error(provider.stream(ask()))
    assert isinstance(error, ProviderHTTPError)
    assert (error.status, error.retryable, error.retry_after) == (500, True, None)


@pytest.mark.asyncio
async def test_401_is_an_auth_error(server: FakeLLMServer, provider: OpenAIProvider) -> None:
    server.enqueue(HttpError(401, {"error": {"message": "bad key"}}))
    _, error = await collect_until_error(provider.stream(ask()))
    assert isinstance(error, ProviderAuthError) and error.status == 401


@pytest.mark.asyncio
async def test_missing_key_fails_at_first_stream_naming_the_variable() -> None:
    """Without a key or a base URL, construction works and the first request fails."""
    provider = OpenAIProvider("gpt-4.1")
    _, error = await collect_until_error(provider.stream(ask()))
    assert isinstance(error, ProviderAuthError)
    assert "OPENAI_API_KEY" in error.message


@pytest.mark.asyncio
async def test_base_url_without_key_sends_a_placeholder(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local servers need no key: OPENAI_BASE_URL alone works, with ``max_tokens``."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
    config = from_mapping({"model": "openai:llama3.2", "openai": {"headers": {"X-Title": "acp"}}})
    provider = make_provider(config)
    server.enqueue(Reply([Text("ok"), Finish("stop")]))
    await collect(provider.stream(ask(max_tokens=300, thinking="high")))
    await provider.aclose()
    request = server.requests[0]
    assert request.headers["authorization"] == "Bearer no-key"
    assert request.headers["x-title"] == "acp"
    assert request.body["max_tokens"] == 300
    assert "max_completion_tokens" not in request.body
    assert "reasoning_effort" not in request.body  # never sent to compatible servers


def test_official_endpoint_uses_max_completion_tokens_and_reasoning_effort() -> None:
    """Built without network: the official endpoint's parameter names and effort rule."""
    o3 = OpenAIProvider("o3", api_key="k").request_params(ask(max_tokens=50, thinking="low"))
    assert o3["max_completion_tokens"] == 50 and "max_tokens" not in o3
    assert o3["reasoning_effort"] == "low"
    gpt5 = OpenAIProvider("gpt-5-mini", api_key="k").request_params(ask(thinking="medium"))
    assert gpt5["reasoning_effort"] == "medium"
    for model in ("gpt-4.1", "gpt-5-chat-latest"):
        params = OpenAIProvider(model, api_key="k").request_params(ask(thinking="high"))
        assert "reasoning_effort" not in params
    off = OpenAIProvider("o3", api_key="k").request_params(ask())
    assert "reasoning_effort" not in off


@pytest.mark.asyncio
async def test_disconnect_mid_stream_yields_what_arrived_then_stream_error(
    server: FakeLLMServer, provider: OpenAIProvider
) -> None:
    server.enqueue(Reply([Text("a"), Text("b"), Text("c"), Finish("stop")], disconnect_after=2))
    events, error = await collect_until_error(provider.stream(ask()))
    assert events == [TextDelta("a"), TextDelta("b")]
    assert isinstance(error, ProviderStreamError)


@pytest.mark.asyncio
async def test_stream_without_finish_reason_is_a_stream_error(
    server: FakeLLMServer, provider: OpenAIProvider
) -> None:
    server.enqueue(Reply([Text("a"), ToolCall("c1", "f", "{}")]))
    events, error = await collect_until_error(provider.stream(ask()))
    events, arguments = streamed(events)
    assert events == [TextDelta("a"), ToolCallStarted("c1", "f")]  # no half-known call
    assert arguments == {"c1": "{}"}
    assert isinstance(error, ProviderStreamError)


@pytest.mark.asyncio
@pytest.mark.parametrize("response", [Hang(), Reply([Text("a")], hang_after=0)])
async def test_silent_server_times_out_as_connection_error(
    server: FakeLLMServer, response: Hang | Reply
) -> None:
    """No answer (or headers and then nothing) fails within the configured read timeout."""
    provider = OpenAIProvider("m", api_key="k", base_url=server.openai_url, timeout=0.3)
    server.enqueue(response)
    _, error = await collect_until_error(provider.stream(ask()))  # pytest-timeout guards a hang
    await provider.aclose()
    assert isinstance(error, ProviderConnectionError) and error.retryable
    assert "The request to " in error.message and server.openai_url in error.message
    assert "no data for 0.3 s" in error.message


@pytest.mark.asyncio
async def test_stall_after_output_is_a_stream_error(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = LoopClock(monkeypatch)
    provider = OpenAIProvider("m", api_key="k", base_url=server.openai_url, timeout=60.0)
    server.enqueue(Reply([Text("a"), Text("b")], hang_after=1))
    events, error = await until_it_stalls(provider.stream(ask()), clock, before=1)
    await provider.aclose()
    assert events == [TextDelta("a")]
    assert isinstance(error, ProviderStreamError)
    assert error.message.endswith("broke off: no data for 60 s ([openai] timeout)")
    assert server.openai_url in error.message


@pytest.mark.asyncio
async def test_cancelling_the_consumer_closes_the_connection(
    server: FakeLLMServer, provider: OpenAIProvider
) -> None:
    server.enqueue(Reply([Text("a"), Text("b")], hang_after=1))
    seen = await cancel_after_first_event(provider.stream(ask()), server)
    assert seen == [TextDelta("a")]


@pytest.mark.asyncio
async def test_history_conversion(server: FakeLLMServer, provider: OpenAIProvider) -> None:
    """Images become data URIs; thinking is not sent back; tool results are ``tool`` messages
    and their images follow in one user message after the run of tool messages."""
    history: list[Message] = [
        UserMessage([TextPart("What is in this picture?"), ImagePart("aGVsbG8=", "image/png")]),
        AssistantMessage(
            [
                ThinkingPart("private thoughts", signature=None),
                TextPart("Let me look."),
                ToolCallPart("c1", "read_file", {"path": "a.txt"}),
                ToolCallPart("c2", "screenshot", {}),
            ]
        ),
        ToolResultMessage("c1", "read_file", [TextPart("contents")]),
        ToolResultMessage(
            "c2", "screenshot", [TextPart("shot"), ImagePart("cGljdA==", "image/jpeg")]
        ),
        UserMessage([TextPart("and now?")]),
    ]
    server.enqueue(Reply([Text("ok"), Finish("stop")]))
    await collect(provider.stream(ask(*history)))
    assert server.requests[0].body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path":"a.txt"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "screenshot", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "contents"},
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": "shot\n[1 image(s) attached in the next user message]",
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Images returned by tool call c2 (screenshot):"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,cGljdA=="}},
            ],
        },
        {"role": "user", "content": "and now?"},
    ]


def test_retry_after_accepts_an_http_date(monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()  # and it stays now: however long this machine takes in between
    monkeypatch.setattr(_sdk, "time", SimpleNamespace(time=lambda: now))
    later = int(now) + 30  # an HTTP date has whole seconds
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(later))
    assert parse_retry_after({"retry-after": date}) == pytest.approx(later - now)
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_importing_the_provider_does_not_import_the_sdk() -> None:
    """The SDK costs about a second; ``initialize`` must not pay for it."""
    assert not imports_sdk("acp_agent.providers._openai", "openai")
