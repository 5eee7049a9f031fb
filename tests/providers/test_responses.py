"""ResponsesProvider (OpenAI reasoning models, ``/v1/responses``) through the real ``openai``
SDK against the local scripted server, which refuses what api.openai.com refuses
(``tests.fakes.llm_responses``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from acp_agent.conversation import (
    AssistantMessage,
    ImagePart,
    Message,
    ReasoningPart,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from acp_agent.errors import ProviderHTTPError, ProviderStreamError
from acp_agent.providers._responses import ResponsesProvider
from acp_agent.providers.base import (
    Finished,
    ModelRequest,
    ReasoningItem,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallReady,
    ToolCallStarted,
    UsageReport,
)

from ..fakes.llm_server import (
    FakeLLMServer,
    Finish,
    HttpError,
    Raw,
    Reasoning,
    Refusal,
    Reply,
    Text,
    Thinking,
    ToolCall,
    Usage,
)
from ..limits import WAIT
from . import cancel_after_first_event, collect, collect_until_error, imports_sdk, streamed

READ = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {}})


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


@pytest_asyncio.fixture
async def provider(server: FakeLLMServer) -> AsyncIterator[ResponsesProvider]:
    p = ResponsesProvider("gpt-5", api_key="test-key", base_url=server.openai_url, timeout=WAIT)
    yield p
    await p.aclose()


def ask(*messages: Message, **kwargs: Any) -> ModelRequest:
    history = list(messages) or [UserMessage([TextPart("hi")])]
    return ModelRequest(system="Be brief.", messages=history, **kwargs)


def reasoning_of(events: list[StreamEvent]) -> list[ReasoningItem]:
    return [e for e in events if isinstance(e, ReasoningItem)]


def without_usage(events: list[StreamEvent]) -> list[StreamEvent]:
    """(The Responses API always reports usage; the fake's is zero unless scripted.)"""
    return [e for e in events if not isinstance(e, UsageReport)]


async def test_text_then_usage_then_finished(
    server: FakeLLMServer, provider: ResponsesProvider
) -> None:
    """Text deltas stream; usage (cached and reasoning tokens included) comes before the end;
    the request is a stateless Responses request asking for encrypted reasoning."""
    server.enqueue(
        Reply([Text("Hel"), Text("lo"), Usage(120, 30, cached=80, reasoning=12), Finish("stop")])
    )
    events = await collect(provider.stream(ask(max_tokens=2000)))
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        UsageReport(input_tokens=120, output_tokens=30, cached_read_tokens=80, thought_tokens=12),
        Finished("stop"),
    ]
    request = server.requests[0]
    assert request.path == "/v1/responses"
    assert request.headers["authorization"] == "Bearer test-key"
    body = request.body
    assert (body["model"], body["stream"], body["store"]) == ("gpt-5", True, False)
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    ]
    assert body["max_output_tokens"] == 2000
    assert "reasoning" not in body and "tools" not in body and "messages" not in body


async def test_reasoning_summaries_are_thoughts_and_items_come_whole(
    server: FakeLLMServer, provider: ResponsesProvider
) -> None:
    """Summary deltas stream as thoughts (parts and items apart by a blank line); each
    reasoning item comes out once done, with its encrypted content, summary and source;
    the thinking level is the reasoning effort, with summaries asked for."""
    server.enqueue(
        Reply(
            [
                Reasoning(("Plan it.", "Then do it.")),
                Thinking("More"),
                Thinking(" thought."),
                Text("Done."),
                Finish("stop"),
            ]
        )
    )
    events = await collect(provider.stream(ask(thinking="high")))
    thoughts = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    assert thoughts == "Plan it.\n\nThen do it.\n\nMore thought."
    first, second = reasoning_of(events)
    assert first.summary == ["Plan it.", "Then do it."] and second.summary == ["More thought."]
    assert first.source == "openai:gpt-5" and first.encrypted_content.startswith("gAAAA")
    assert first.id != second.id
    assert without_usage(events)[-2:] == [TextDelta("Done."), Finished("stop")]
    assert server.requests[0].body["reasoning"] == {"effort": "high", "summary": "auto"}


async def test_function_calls_are_assembled_from_streamed_arguments(
    server: FakeLLMServer, provider: ResponsesProvider
) -> None:
    """Each call is announced when its item opens and complete when it is done; a
    response with calls finishes ``tool_calls``; tools go in the Responses shape."""
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
    events, arguments = streamed(await collect(provider.stream(ask(tools=[READ]))))
    assert arguments == {"call_1": '{"path": "src/main.py", "line": 3}', "call_2": '{"path": "."}'}
    assert without_usage(events) == [
        TextDelta("Reading."),
        ToolCallStarted("call_1", "read_file"),
        ToolCallReady("call_1", "read_file", {"path": "src/main.py", "line": 3}),
        ToolCallStarted("call_2", "list_dir"),
        ToolCallReady("call_2", "list_dir", {"path": "."}),
        Finished("tool_calls"),
    ]
    assert server.requests[0].body["tools"] == [
        {
            "type": "function",
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        }
    ]


async def test_bad_arguments_are_reported_not_raised(
    server: FakeLLMServer, provider: ResponsesProvider
) -> None:
    server.enqueue(
        Reply([ToolCall("c1", "f", '{"path": '), ToolCall("c2", "g", ""), Finish("tool_calls")])
    )
    ready = [e for e in await collect(provider.stream(ask())) if isinstance(e, ToolCallReady)]
    assert [(r.call_id, r.arguments) for r in ready] == [("c1", {}), ("c2", {})]
    assert ready[0].error is not None and "JSON" in ready[0].error and ready[1].error is None


def history_after(events: list[StreamEvent], result: str = "contents") -> list[Message]:
    """The history the turn engine keeps from ``events``: thoughts, reasoning items, text and
    calls in stream order, then a result for each call."""
    parts: list[Any] = []
    for e in events:
        if isinstance(e, ThinkingDelta):
            parts.append(ThinkingPart(e.text))
        elif isinstance(e, ReasoningItem):
            parts.append(ReasoningPart(e.id, e.encrypted_content, e.summary, e.source))
        elif isinstance(e, TextDelta):
            parts.append(TextPart(e.text))
        elif isinstance(e, ToolCallReady):
            parts.append(ToolCallPart(e.call_id, e.name, e.arguments))
    results = [
        ToolResultMessage(p.call_id, p.name, [TextPart(result)])
        for p in parts
        if isinstance(p, ToolCallPart)
    ]
    return [UserMessage([TextPart("read a.txt")]), AssistantMessage(parts), *results]


async def test_reasoning_items_go_back_with_the_calls_and_their_outputs(
    server: FakeLLMServer, provider: ResponsesProvider
) -> None:
    """The next request carries each reasoning item (encrypted content and summary, no id)
    before the call it led to, then the call's output; the server verifies the content."""
    server.enqueue(
        Reply(
            [
                Reasoning(("I need the file.",)),
                ToolCall("call_a", "read_file", '{"path": "a.txt"}'),
                Usage(50, 20, reasoning=15),
                Finish("tool_calls"),
            ]
        ),
        Reply([Text("It says hi."), Finish("stop")]),
    )
    first = await collect(provider.stream(ask(tools=[READ], thinking="low")))
    (item,) = reasoning_of(first)
    history = history_after(first)
    assert [e for e in await collect(provider.stream(ask(*history, tools=[READ])))][-1] == (
        Finished("stop")
    )
    assert server.requests[1].body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "read a.txt"}],
        },
        {
            "type": "reasoning",
            "encrypted_content": item.encrypted_content,
            "summary": [{"type": "summary_text", "text": "I need the file."}],
        },
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "read_file",
            "arguments": '{"path":"a.txt"}',
        },
        {"type": "function_call_output", "call_id": "call_a", "output": "contents"},
    ]


async def test_the_server_refuses_reasoning_it_cannot_verify(
    server: FakeLLMServer, provider: ResponsesProvider
) -> None:
    """A reasoning item whose encrypted content was not issued is a 400, not retried."""
    forged = ReasoningPart("rs_x", "gAAAAforged", [], "openai:gpt-5")
    history: list[Message] = [
        UserMessage([TextPart("q")]),
        AssistantMessage([forged, ToolCallPart("c1", "read_file", {})]),
        ToolResultMessage("c1", "read_file", [TextPart("r")]),
    ]
    server.enqueue(Reply([Text("unused"), Finish("stop")]))
    _, error = await collect_until_error(provider.stream(ask(*history, tools=[READ])))
    assert isinstance(error, ProviderHTTPError) and error.status == 400 and not error.retryable
    assert "could not be verified" in error.message


def test_reasoning_is_sent_only_to_its_model_and_only_before_an_output() -> None:
    """Another model's reasoning items, a reasoning item with no message or call after it
    (an answer cut short), Anthropic thinking: none of them is sent."""
    provider = ResponsesProvider("gpt-5", api_key="k")
    mine = ReasoningPart("rs_1", "enc-1", ["s"], "openai:gpt-5")
    theirs = ReasoningPart("rs_2", "enc-2", [], "openai:o3")
    last = ReasoningPart("rs_3", "enc-3", [], "openai:gpt-5")
    history: list[Message] = [
        UserMessage([TextPart("q")]),
        AssistantMessage(
            [
                ThinkingPart("signed", "sig"),
                RedactedThinkingPart("r"),
                theirs,
                mine,
                TextPart("Hello "),
                TextPart("there."),
                last,
            ]
        ),
    ]
    items = provider.request_params(ask(*history))["input"][1:]
    assert items == [
        {
            "type": "reasoning",
            "encrypted_content": "enc-1",
            "summary": [{"type": "summary_text", "text": "s"}],
        },
        {"type": "message", "role": "assistant", "content": "Hello there."},
    ]


async def test_history_with_calls_and_no_tools_declares_them_uncallable(
    server: FakeLLMServer, provider: ResponsesProvider
) -> None:
    """A summary request (compaction) offers no tools over a history with calls: the calls'
    functions are declared and ``tool_choice`` is ``none``, which the API takes."""
    history: list[Message] = [
        UserMessage([TextPart("q")]),
        AssistantMessage([ToolCallPart("c1", "read_file", {"path": "a"})]),
        ToolResultMessage("c1", "read_file", [TextPart("r")]),
        UserMessage([TextPart("Summarise.")]),
    ]
    server.enqueue(Reply([Text("Summary."), Finish("stop")]))
    assert (await collect(provider.stream(ask(*history))))[-1] == Finished("stop")
    body = server.requests[0].body
    assert [t["name"] for t in body["tools"]] == ["read_file"] and body["tool_choice"] == "none"


async def test_images_in_prompts_and_tool_results(
    server: FakeLLMServer, provider: ResponsesProvider
) -> None:
    history: list[Message] = [
        UserMessage([TextPart("look"), ImagePart("aGVsbG8=", "image/png")]),
        AssistantMessage([ToolCallPart("c1", "screenshot", {})]),
        ToolResultMessage(
            "c1", "screenshot", [TextPart("shot"), ImagePart("cGljdA==", "image/jpeg")]
        ),
    ]
    server.enqueue(Reply([Text("ok"), Finish("stop")]))
    await collect(provider.stream(ask(*history, tools=[READ])))
    items = server.requests[0].body["input"]
    assert items[0]["content"][1] == {
        "type": "input_image",
        "image_url": "data:image/png;base64,aGVsbG8=",
        "detail": "auto",
    }
    assert items[2]["output"] == [
        {"type": "input_text", "text": "shot"},
        {"type": "input_image", "image_url": "data:image/jpeg;base64,cGljdA==", "detail": "auto"},
    ]


@pytest.mark.parametrize(
    ("steps", "reason"),
    [
        ([Text("trunc"), Finish("length")], "length"),
        ([Text("no"), Finish("content_filter")], "refusal"),
        ([Refusal("I can't help with that."), Finish("stop")], "refusal"),
        ([ToolCall("c", "f", "{}"), Finish("length")], "length"),
    ],
)
async def test_finish_reasons(
    server: FakeLLMServer, provider: ResponsesProvider, steps: list[Any], reason: str
) -> None:
    """An incomplete answer is ``length`` (out of tokens) or ``refusal`` (content filter);
    a refusal part is a refusal."""
    server.enqueue(Reply(steps))
    events = await collect(provider.stream(ask()))
    assert events[-1] == Finished(reason)  # type: ignore[arg-type]


def test_effort_max_tokens_and_encrypted_reasoning_only_where_they_apply() -> None:
    """``include`` only for reasoning models (others refuse it); no reasoning parameter
    when thinking is off; ``max_output_tokens`` never below the API's minimum of 16."""
    o3 = ResponsesProvider("o3", api_key="k").request_params(ask(max_tokens=5))
    assert o3["max_output_tokens"] == 16 and o3["include"] == ["reasoning.encrypted_content"]
    assert "reasoning" not in o3
    plain = ResponsesProvider("gpt-4.1", api_key="k").request_params(ask())
    assert "include" not in plain and "reasoning" not in plain and "max_output_tokens" not in plain


async def test_a_rate_limit_is_retryable_with_its_wait(
    server: FakeLLMServer, provider: ResponsesProvider
) -> None:
    server.enqueue(HttpError(429, {"error": {"message": "slow down"}}, {"retry-after": "3"}))
    _, error = await collect_until_error(provider.stream(ask()))
    assert isinstance(error, ProviderHTTPError)
    assert (error.status, error.retry_after, error.retryable) == (429, 3.0, True)


@pytest.mark.parametrize(
    ("step", "status", "retryable"),
    [
        (Finish("rate_limit_exceeded"), 429, True),
        (Finish("server_error"), 500, True),
        (Finish("invalid_prompt"), 400, False),
        (
            Raw({"type": "error", "code": "server_error", "message": "boom", "param": None}),
            500,
            True,
        ),
    ],
)
async def test_failures_in_the_stream_name_their_code(
    server: FakeLLMServer, provider: ResponsesProvider, step: Any, status: int, retryable: bool
) -> None:
    """``response.failed`` and ``error`` events before any output are HTTP errors with the
    status their code implies; the message names the endpoint and the code."""
    server.enqueue(Reply([step]))
    events, error = await collect_until_error(provider.stream(ask()))
    assert events == []
    assert isinstance(error, ProviderHTTPError)
    assert (error.status, error.retryable) == (status, retryable)
    assert server.openai_url in error.message and "the stream reported" in error.message


async def test_a_failure_after_output_is_a_broken_stream(
    server: FakeLLMServer, provider: ResponsesProvider
) -> None:
    server.enqueue(Reply([Text("partial"), Finish("server_error")]))
    events, error = await collect_until_error(provider.stream(ask()))
    assert events == [TextDelta("partial")]
    assert isinstance(error, ProviderStreamError)


async def test_a_stream_without_its_completion_is_broken(
    server: FakeLLMServer, provider: ResponsesProvider
) -> None:
    server.enqueue(Reply([Text("a"), ToolCall("c1", "f", "{}")]))
    events, error = await collect_until_error(provider.stream(ask()))
    assert events[0] == TextDelta("a")
    assert isinstance(error, ProviderStreamError) and "before the response was complete" in str(
        error
    )


async def test_cancelling_the_consumer_closes_the_connection(
    server: FakeLLMServer, provider: ResponsesProvider
) -> None:
    server.enqueue(
        Reply([Text("a"), Text("b")], hang_after=5)
    )  # created, in progress, item, part, "a"
    seen = await cancel_after_first_event(provider.stream(ask()), server)
    assert seen == [TextDelta("a")]


def test_importing_the_provider_does_not_import_the_sdk() -> None:
    assert not imports_sdk("acp_agent.providers._responses", "openai")
