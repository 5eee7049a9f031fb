"""AnthropicProvider through the real ``anthropic`` SDK against the local scripted server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from acp_agent.config import Config
from acp_agent.conversation import (
    AssistantMessage,
    ImagePart,
    Message,
    RedactedThinkingPart,
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
from acp_agent.providers import make_provider
from acp_agent.providers._anthropic import AnthropicProvider
from acp_agent.providers.base import (
    Finished,
    ModelRequest,
    RedactedThinking,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
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
    Redacted,
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

OVERLOADED = Raw({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ANTHROPIC_CUSTOM_HEADERS", raising=False)


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


@pytest_asyncio.fixture
async def provider(server: FakeLLMServer) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(
        "claude-sonnet-4-5", api_key="test-key", base_url=server.url, timeout=WAIT
    )
    yield p
    await p.aclose()


def ask(*messages: Message, **kwargs: Any) -> ModelRequest:
    history = list(messages) or [UserMessage([TextPart("hi")])]
    return ModelRequest(system="Be brief.", messages=history, **kwargs)


@pytest.mark.asyncio
async def test_text_streams_then_one_usage_report_then_finished(
    server: FakeLLMServer, provider: AnthropicProvider
) -> None:
    """Text deltas stream; usage from message_start and message_delta is reported once, with
    input counting cache reads and writes."""
    server.enqueue(Reply([Text("Hel"), Text("lo"), Usage(100, 20, cached=30, cache_write=10),
                          Finish("stop")]))  # fmt: skip
    events = await collect(provider.stream(ask()))
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        UsageReport(
            input_tokens=100, output_tokens=20, cached_read_tokens=30, cached_write_tokens=10
        ),
        Finished("stop"),
    ]
    request = server.requests[0]
    assert request.path == "/v1/messages"
    assert request.body["system"] == "Be brief."
    assert request.body["max_tokens"] == 8192 and request.body["stream"] is True
    assert request.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]
    assert "thinking" not in request.body


@pytest.mark.asyncio
async def test_thinking_with_signature_and_redacted_blocks(
    server: FakeLLMServer, provider: AnthropicProvider
) -> None:
    """thinking_delta -> ThinkingDelta, signature_delta -> ThinkingSignature at block end,
    redacted_thinking -> RedactedThinking; the request carries a thinking budget."""
    server.enqueue(
        Reply(
            [
                Thinking("Let me "),
                Thinking("see.", signature="sig-1"),
                Redacted("opaque"),
                Text("Answer."),
                Finish("stop"),
            ]
        )
    )
    events = await collect(provider.stream(ask(thinking="medium")))
    assert events[:5] == [
        ThinkingDelta("Let me "),
        ThinkingDelta("see."),
        ThinkingSignature("sig-1"),
        RedactedThinking("opaque"),
        TextDelta("Answer."),
    ]
    assert events[-1] == Finished("stop")
    body = server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 16384  # raised to fit the budget and an answer


def test_thinking_budget_is_clamped_below_max_tokens() -> None:
    p = AnthropicProvider("claude-sonnet-4-5", api_key="k")
    high = p.request_params(ask(thinking="high", max_tokens=4000))
    assert (high["max_tokens"], high["thinking"]["budget_tokens"]) == (4000, 2976)
    tiny = p.request_params(ask(thinking="low", max_tokens=1500))
    assert (tiny["max_tokens"], tiny["thinking"]["budget_tokens"]) == (2048, 1024)
    opus = AnthropicProvider("claude-opus-4-1", api_key="k").request_params(ask(thinking="high"))
    assert (opus["max_tokens"], opus["thinking"]["budget_tokens"]) == (32000, 24576)


@pytest.mark.asyncio
async def test_parallel_tool_calls_are_assembled_from_json_fragments(
    server: FakeLLMServer, provider: AnthropicProvider
) -> None:
    server.enqueue(
        Reply(
            [
                Text("Reading."),
                ToolCall("toolu_1", "read_file", '{"path": "src/main.py", "line": 3}', pieces=5),
                ToolCall("toolu_2", "list_dir", '{"path": "."}', pieces=4),
                Finish("tool_calls"),
            ]
        )
    )
    tools = [ToolSpec("read_file", "Read a file", {"type": "object"})]
    events, arguments = streamed(await collect(provider.stream(ask(tools=tools))))
    assert arguments == {"toolu_1": '{"path": "src/main.py", "line": 3}',
                         "toolu_2": '{"path": "."}'}
    assert events[:5] == [
        TextDelta("Reading."),
        ToolCallStarted("toolu_1", "read_file"),
        ToolCallReady("toolu_1", "read_file", {"path": "src/main.py", "line": 3}),
        ToolCallStarted("toolu_2", "list_dir"),
        ToolCallReady("toolu_2", "list_dir", {"path": "."}),
    ]
    assert events[-1] == Finished("tool_calls")
    assert server.requests[0].body["tools"] == [
        {"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}}
    ]


@pytest.mark.asyncio
async def test_bad_tool_json_is_reported_not_raised(
    server: FakeLLMServer, provider: AnthropicProvider
) -> None:
    server.enqueue(Reply([ToolCall("t1", "f", '{"a": [1,'), ToolCall("t2", "g", ""),
                          Finish("tool_calls")]))  # fmt: skip
    ready = [e for e in await collect(provider.stream(ask())) if isinstance(e, ToolCallReady)]
    assert ready[0].arguments == {} and ready[0].error and "JSON" in ready[0].error
    assert ready[1] == ToolCallReady("t2", "g", {})


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("reason", "expected"),
    [("length", "length"), ("refusal", "refusal"), ("pause_turn", "stop"),
     ("stop_sequence", "stop")],
)  # fmt: skip
async def test_stop_reasons(
    server: FakeLLMServer, provider: AnthropicProvider, reason: str, expected: str
) -> None:
    server.enqueue(Reply([Text("x"), Finish(reason)]))
    events = await collect(provider.stream(ask()))
    assert events[-1] == Finished(expected)  # type: ignore[arg-type]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("status", "headers", "retry_after"),
    [(429, {"retry-after": "4"}, 4.0), (500, {}, None), (529, {}, None)],
)
async def test_http_errors_are_retryable(
    server: FakeLLMServer,
    provider: AnthropicProvider,
    status: int,
    headers: dict[str, str],
    retry_after: float | None,
) -> None:
    body = {"type": "error", "error": {"type": "api_error", "message": "nope"}}
    server.enqueue(HttpError(status, body, headers))
    _, error = await collect_until_error(provider.stream(ask()))
    assert isinstance(error, ProviderHTTPError)
    assert (error.status, error.retry_after, error.retryable) == (status, retry_after, True)
    assert len(server.requests) == 1  # the SDK does not retry


@pytest.mark.asyncio
async def test_401_is_an_auth_error(server: FakeLLMServer, provider: AnthropicProvider) -> None:
    body = {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}
    server.enqueue(HttpError(401, body))
    _, error = await collect_until_error(provider.stream(ask()))
    assert isinstance(error, ProviderAuthError) and error.status == 401


@pytest.mark.asyncio
async def test_missing_key_fails_at_first_stream_naming_the_variable() -> None:
    provider = AnthropicProvider("claude-sonnet-4-5")
    _, error = await collect_until_error(provider.stream(ask()))
    assert isinstance(error, ProviderAuthError)
    assert "ANTHROPIC_API_KEY" in error.message


@pytest.mark.asyncio
async def test_environment_supplies_key_and_base_url(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registry resolves the family's variables (providers never read the environment)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    provider = make_provider(Config(model="anthropic:claude-3-5-haiku-latest"))
    server.enqueue(Reply([Text("ok"), Finish("stop")]))
    assert (await collect(provider.stream(ask())))[0] == TextDelta("ok")
    await provider.aclose()
    headers = server.requests[0].headers
    assert "env-key" in (headers.get("x-api-key", "") + headers.get("authorization", ""))


@pytest.mark.asyncio
async def test_error_event_before_output_is_a_retryable_http_error(
    server: FakeLLMServer, provider: AnthropicProvider
) -> None:
    """An ``overloaded_error`` SSE event with nothing yielded yet can be retried as a 529."""
    server.enqueue(Reply([OVERLOADED]))
    events, error = await collect_until_error(provider.stream(ask()))
    assert events == []
    assert isinstance(error, ProviderHTTPError)
    assert (error.status, error.retryable) == (529, True)


@pytest.mark.asyncio
async def test_error_event_after_output_is_a_stream_error(
    server: FakeLLMServer, provider: AnthropicProvider
) -> None:
    server.enqueue(Reply([Text("partial"), OVERLOADED]))
    events, error = await collect_until_error(provider.stream(ask()))
    assert events == [TextDelta("partial")]
    assert isinstance(error, ProviderStreamError)


@pytest.mark.asyncio
async def test_disconnect_mid_stream_yields_what_arrived_then_stream_error(
    server: FakeLLMServer, provider: AnthropicProvider
) -> None:
    # events: message_start, ping, block_start, delta "a", delta "b" | cut | ...
    server.enqueue(Reply([Text("a"), Text("b"), Text("c"), Finish("stop")], disconnect_after=5))
    events, error = await collect_until_error(provider.stream(ask()))
    assert events == [TextDelta("a"), TextDelta("b")]
    assert isinstance(error, ProviderStreamError)


@pytest.mark.asyncio
async def test_stream_without_stop_reason_is_a_stream_error(
    server: FakeLLMServer, provider: AnthropicProvider
) -> None:
    server.enqueue(Reply([Text("a")]))
    events, error = await collect_until_error(provider.stream(ask()))
    assert events == [TextDelta("a")]
    assert isinstance(error, ProviderStreamError)


@pytest.mark.asyncio
@pytest.mark.parametrize("response", [Hang(), Reply([Text("a"), Text("b")], hang_after=3)])
async def test_silent_server_times_out_as_connection_error(
    server: FakeLLMServer, response: Hang | Reply
) -> None:
    """No answer (or no content before the server stops) fails within the read timeout."""
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="k", base_url=server.url, timeout=0.3)
    server.enqueue(response)
    _, error = await collect_until_error(provider.stream(ask()))  # pytest-timeout guards a hang
    await provider.aclose()
    assert isinstance(error, ProviderConnectionError) and error.retryable
    assert "The request to " in error.message and server.url in error.message
    assert "no data for 0.3 s" in error.message


@pytest.mark.asyncio
async def test_stall_after_output_is_a_stream_error(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = LoopClock(monkeypatch)
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="k", base_url=server.url,
                                 timeout=60.0)  # fmt: skip
    server.enqueue(Reply([Text("a"), Text("b")], hang_after=4))
    events, error = await until_it_stalls(provider.stream(ask()), clock, before=1)
    await provider.aclose()
    assert events == [TextDelta("a")]
    assert isinstance(error, ProviderStreamError)
    assert error.message.endswith("broke off: no data for 60 s ([anthropic] timeout)")
    assert server.url in error.message


@pytest.mark.asyncio
async def test_cancelling_the_consumer_closes_the_connection(
    server: FakeLLMServer, provider: AnthropicProvider
) -> None:
    server.enqueue(Reply([Text("a"), Text("b")], hang_after=4))
    seen = await cancel_after_first_event(provider.stream(ask()), server)
    assert seen == [TextDelta("a")]


@pytest.mark.asyncio
async def test_history_conversion(server: FakeLLMServer, provider: AnthropicProvider) -> None:
    """Signed thinking and redacted thinking go back verbatim, unsigned thinking is dropped,
    consecutive tool results and a user message after them merge into one user turn
    (results first), images are base64 sources."""
    image = ImagePart("aGVsbG8=", "image/png")
    history: list[Message] = [
        UserMessage([TextPart("Look:"), image]),
        AssistantMessage(
            [
                ThinkingPart("signed thought", signature="sig-A"),
                ThinkingPart("unsigned thought"),
                RedactedThinkingPart("opaque"),
                TextPart("Checking."),
                ToolCallPart("t1", "read_file", {"path": "a.txt"}),
                ToolCallPart("t2", "screenshot", {}),
            ]
        ),
        ToolResultMessage("t1", "read_file", [TextPart("no such file")], is_error=True),
        ToolResultMessage("t2", "screenshot", [TextPart("shot"), image]),
        UserMessage([TextPart("Go on.")]),
    ]
    server.enqueue(Reply([Text("ok"), Finish("stop")]))
    empty = {"type": "object", "properties": {}}
    tools = [ToolSpec(n, n, empty) for n in ("read_file", "screenshot")]
    await collect(provider.stream(ask(*history, tools=tools)))
    source = {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="}
    assert server.requests[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Look:"},
                                     {"type": "image", "source": source}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "signed thought", "signature": "sig-A"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.txt"}},
                {"type": "tool_use", "id": "t2", "name": "screenshot", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                 "content": [{"type": "text", "text": "no such file"}]},
                {"type": "tool_result", "tool_use_id": "t2", "is_error": False,
                 "content": [{"type": "text", "text": "shot"},
                             {"type": "image", "source": source}]},
                {"type": "text", "text": "Go on."},  # roles alternate: one user turn
            ],
        },
    ]  # fmt: skip


def test_importing_the_provider_does_not_import_the_sdk() -> None:
    assert not imports_sdk("acp_agent.providers._anthropic", "anthropic")
