"""Prompt caching through the real SDKs against the billing fake server: where Anthropic's
``cache_control`` breakpoints go, OpenAI's ``prompt_cache_key``, and what the fake bills."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

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
from acp_agent.providers._anthropic import MAX_BREAKPOINTS, AnthropicProvider
from acp_agent.providers._openai import OpenAIProvider
from acp_agent.providers.base import ModelRequest, StreamEvent, UsageReport
from acp_agent.providers.models import cost, model_info

from ..fakes.llm_billing import Billing, canonical, tokens
from ..fakes.llm_server import FakeLLMServer, Finish, Reply, Text, Usage
from ..limits import WAIT
from . import collect

EPHEMERAL = {"type": "ephemeral"}
LONG = "Project rules. " * 400  # ~1,500 tokens: past the 1,024-token minimum
TOOLS = [
    ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}}),
    ToolSpec("run_command", "Run a command.", {"type": "object", "properties": {}}),
]


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer(billing=True) as s:
        yield s


@pytest_asyncio.fixture
async def claude(server: FakeLLMServer) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider("claude-sonnet-4-5", api_key="k", base_url=server.url, timeout=WAIT)
    yield p
    await p.aclose()


def user(text: str) -> UserMessage:
    return UserMessage([TextPart(text)])


def request(*messages: Message, system: str = LONG, **kwargs: Any) -> ModelRequest:
    return ModelRequest(system=system, messages=list(messages), tools=TOOLS,
                        cache_key="sess_1", **kwargs)  # fmt: skip


def breakpoints(body: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Where ``cache_control`` is, as paths into the request body."""
    found: list[tuple[Any, ...]] = []
    for i, tool in enumerate(body.get("tools") or []):
        found += [("tools", i)] if "cache_control" in tool else []
    system = body.get("system")
    for i, block in enumerate(system if isinstance(system, list) else []):
        found += [("system", i)] if "cache_control" in block else []
    for i, message in enumerate(body["messages"]):
        for j, block in enumerate(message["content"]):
            found += [("messages", i, j)] if "cache_control" in block else []
            inner = block.get("content") if block["type"] == "tool_result" else None
            assert not any("cache_control" in b for b in inner or []), "never inside a result"
    return found


def usage_of(events: list[StreamEvent]) -> UsageReport:
    return next(e for e in events if isinstance(e, UsageReport))


async def ask_claude(
    provider: AnthropicProvider, server: FakeLLMServer, req: ModelRequest
) -> tuple[dict[str, Any], UsageReport]:
    server.enqueue(Reply([Text("ok"), Usage(0, 3), Finish("stop")]))
    events = await collect(provider.stream(req))
    body: dict[str, Any] = server.requests[-1].body
    return body, usage_of(events)


# --------------------------------------------------------------------------- Anthropic shape


@pytest.mark.asyncio
async def test_breakpoints_on_tools_system_previous_turn_and_newest_message(
    server: FakeLLMServer, claude: AnthropicProvider
) -> None:
    """Four marks: the last tool, the system prompt (sent as a block), the end of the
    previous user turn and the last block of the newest message."""
    history: list[Message] = [
        user("read a.py"),
        AssistantMessage([TextPart("Reading."), ToolCallPart("t1", "read_file", {"path": "a"})]),
        ToolResultMessage("t1", "read_file", [TextPart("print(1)")]),
        AssistantMessage([TextPart("It prints 1.")]),
        user("and b.py?"),
    ]
    body, _ = await ask_claude(claude, server, request(*history))
    assert breakpoints(body) == [("tools", 1), ("system", 0), ("messages", 2, 0),
                                 ("messages", 4, 0)]  # fmt: skip
    assert body["system"] == [{"type": "text", "text": LONG, "cache_control": EPHEMERAL}]
    assert body["messages"][2]["content"][0]["type"] == "tool_result"
    assert body["messages"][4]["content"][0] == {"type": "text", "text": "and b.py?",
                                                 "cache_control": EPHEMERAL}  # fmt: skip


@pytest.mark.asyncio
async def test_a_single_short_message_is_marked_and_billed_without_cache(
    server: FakeLLMServer, claude: AnthropicProvider
) -> None:
    """No previous turn: two marks. Under the model's minimum nothing is cached (no error)."""
    req = ModelRequest(system="Be brief.", messages=[user("hi")], cache_key="s")
    body, usage = await ask_claude(claude, server, req)
    assert breakpoints(body) == [("system", 0), ("messages", 0, 0)]
    assert usage.cached_read_tokens == usage.cached_write_tokens == 0
    assert usage.input_tokens == server.billing.bills[0].input > 0  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_without_a_cache_key_nothing_is_marked(
    server: FakeLLMServer, claude: AnthropicProvider
) -> None:
    req = ModelRequest(system=LONG, messages=[user("hi")], tools=TOOLS)
    body, usage = await ask_claude(claude, server, req)
    assert breakpoints(body) == [] and body["system"] == LONG
    assert usage.cached_read_tokens == usage.cached_write_tokens == 0


@pytest.mark.asyncio
async def test_thinking_blocks_are_never_marked(
    server: FakeLLMServer, claude: AnthropicProvider
) -> None:
    """A thinking session: the marks fall on the tool result and the prompt; signed and
    redacted thinking go back unmarked (the API would answer 400)."""
    history: list[Message] = [
        user("go"),
        AssistantMessage([ThinkingPart("plan", "sig-1"), ToolCallPart("t1", "read_file", {})]),
        ToolResultMessage("t1", "read_file", [TextPart("data")]),
        AssistantMessage(
            [ThinkingPart("done", "sig-2"), RedactedThinkingPart("opaque"), TextPart("Read.")]
        ),
        user("next"),
    ]
    body, _ = await ask_claude(claude, server, request(*history, thinking="low"))
    assert breakpoints(body) == [("tools", 1), ("system", 0), ("messages", 2, 0),
                                 ("messages", 4, 0)]  # fmt: skip
    # a request ending in thinking (a prefill) marks the last block that may carry a mark
    prefill = AssistantMessage([TextPart("So"), ThinkingPart("hm", "sig-3"),
                                RedactedThinkingPart("x")])  # fmt: skip
    params = claude.request_params(request(user("q"), prefill))
    assert breakpoints(params)[-1] == ("messages", 1, 0)


@pytest.mark.asyncio
async def test_images_and_tool_results_carry_the_mark_on_their_last_block(
    server: FakeLLMServer, claude: AnthropicProvider
) -> None:
    image = ImagePart("aGVsbG8=", "image/png")
    history: list[Message] = [
        UserMessage([TextPart("look"), image]),
        AssistantMessage([ToolCallPart("t1", "screenshot", {})]),
        ToolResultMessage("t1", "screenshot", [TextPart("shot"), image]),
    ]
    body, _ = await ask_claude(claude, server, request(*history))
    assert breakpoints(body) == [("tools", 1), ("system", 0), ("messages", 0, 1),
                                 ("messages", 2, 0)]  # fmt: skip
    assert body["messages"][0]["content"][1]["type"] == "image"
    # a tool result merged with a user prompt (a mode note): the prompt is the last block
    note = user("The mode is now plan.")
    body, _ = await ask_claude(claude, server, request(*history, note))
    assert breakpoints(body)[-1] == ("messages", 2, 1)


def test_never_more_than_four_marks_whatever_the_history(claude: AnthropicProvider) -> None:
    histories: list[list[Message]] = [
        [],
        [user("a")],
        [user("a"), AssistantMessage([TextPart("b")])],
        [user("a"), AssistantMessage([TextPart("b")]), user("c"), user("d")],
        [AssistantMessage([ThinkingPart("t", "s")])],
    ]
    for history in histories:
        for system, tools in (("", []), (LONG, TOOLS)):
            req = ModelRequest(system=system, messages=history, tools=tools, cache_key="k")
            assert len(breakpoints(claude.request_params(req))) <= MAX_BREAKPOINTS


# --------------------------------------------------------------------------- Anthropic billing


@pytest.mark.asyncio
async def test_the_next_request_reads_what_the_last_one_wrote(
    server: FakeLLMServer, claude: AnthropicProvider
) -> None:
    """First request: everything up to the newest block is written. Second: that prefix is
    read and only the new exchange is written; the cost prices each part at its rate."""
    first: list[Message] = [user("read a.py")]
    body1, u1 = await ask_claude(claude, server, request(*first))
    assert u1.cached_read_tokens == 0
    assert u1.cached_write_tokens == u1.input_tokens == _total(body1)
    second = [*first, AssistantMessage([ToolCallPart("t1", "read_file", {"path": "a.py"})]),
              ToolResultMessage("t1", "read_file", [TextPart("x = 1\n" * 300)])]  # fmt: skip
    body2, u2 = await ask_claude(claude, server, request(*second))
    assert u2.cached_read_tokens == u1.cached_write_tokens
    assert u2.cached_read_tokens + u2.cached_write_tokens == u2.input_tokens == _total(body2)
    info = model_info("anthropic", "claude-sonnet-4-5")
    expected = (u2.cached_read_tokens * 0.30 + u2.cached_write_tokens * 3.75 + 3 * 15.0) / 1e6
    assert cost(info, u2) == pytest.approx(expected)


@pytest.mark.asyncio
async def test_a_new_session_reads_the_tools_and_a_changed_prompt_reads_nothing_after_it(
    server: FakeLLMServer, claude: AnthropicProvider
) -> None:
    """Tools are first in the prefix: another session (another system prompt) reads them."""
    big_tools = [ToolSpec(f"tool_{i}", "Does things. " * 60, {"type": "object"}) for i in range(8)]
    one = ModelRequest(system=LONG, messages=[user("a")], tools=big_tools, cache_key="s1")
    _, u1 = await ask_claude(claude, server, one)
    two = ModelRequest(system=LONG + "!", messages=[user("a")], tools=big_tools, cache_key="s2")
    _, u2 = await ask_claude(claude, server, two)
    tools_tokens = sum(tokens(canonical(t)) for t in server.requests[-1].body["tools"])
    assert u1.cached_read_tokens == 0 and u2.cached_read_tokens == tools_tokens


def test_the_fake_looks_back_twenty_blocks_from_a_breakpoint() -> None:
    """Why the previous turn is marked: 30 blocks later, the newest mark alone reads only
    the system prompt; with the previous turn marked too, everything before the new blocks."""
    model = "claude-sonnet-4-5"
    system = [{"type": "text", "text": LONG, "cache_control": EPHEMERAL}]

    def prompt(marked: bool) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "text", "text": "go"}
        return {"role": "user", "content": [{**block, "cache_control": EPHEMERAL} if marked
                                            else block]}  # fmt: skip

    calls = [{"type": "tool_use", "id": f"t{i}", "name": "f", "input": {}} for i in range(15)]
    results: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": f"t{i}"}
                                     for i in range(15)]  # fmt: skip
    results[-1] = {**results[-1], "cache_control": EPHEMERAL}
    exchange = [{"role": "assistant", "content": calls}, {"role": "user", "content": results}]
    for mark_previous in (False, True):
        billing = Billing()
        first = billing.bill("anthropic", {"model": model, "system": system,
                                           "messages": [prompt(True)]})  # fmt: skip
        later = {"model": model, "system": system, "messages": [prompt(mark_previous), *exchange]}
        bill = billing.bill("anthropic", later)
        expected = first.input if mark_previous else tokens(canonical(system[0]))
        assert bill.cached == expected
        assert bill.cache_write == bill.input - expected


@pytest.mark.asyncio
async def test_the_fake_refuses_what_the_api_refuses(server: FakeLLMServer) -> None:
    """More than four marks, a marked empty text, a marked thinking block: HTTP 400."""
    import anthropic

    marked = {"cache_control": EPHEMERAL}
    five = [{"type": "text", "text": f"{i}", **marked} for i in range(5)]
    thinking = {"type": "thinking", "thinking": "t", "signature": "s", **marked}
    cases: list[tuple[list[dict[str, Any]], str]] = [
        ([{"role": "user", "content": five}], "A maximum of 4 blocks with cache_control"),
        ([{"role": "user", "content": [{"type": "text", "text": "", **marked}]}], "empty text"),
        ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [thinking]}],
         "thinking.cache_control: Extra inputs are not permitted"),
    ]  # fmt: skip
    client = anthropic.AsyncAnthropic(api_key="k", base_url=server.url, max_retries=0)
    for messages, why in cases:
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=10,
                messages=messages,  # type: ignore[arg-type]
            )
        assert why in caught.value.message
    await client.close()
    assert server.billing is not None and server.billing.bills == []  # refused: not billed


def _total(body: dict[str, Any]) -> int:
    from ..fakes.llm_billing import anthropic_parts

    return sum(tokens(canonical(p)) for p in anthropic_parts(body)[0])


# --------------------------------------------------------------------------- OpenAI


@pytest.mark.asyncio
async def test_prompt_cache_key_only_on_the_official_endpoint(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The official endpoint (reached here through OPENAI_BASE_URL, which only the SDK
    reads) gets the session's key; a compatible server by base URL never does."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
    official = OpenAIProvider("gpt-4.1", api_key="k")
    compatible = OpenAIProvider("gpt-4.1", api_key="k", base_url=server.openai_url)
    for provider in (official, compatible):
        for key in ("sess_1", None):
            server.enqueue(Reply([Text("ok"), Finish("stop")]))
            req = ModelRequest(system="s", messages=[user("hi")], cache_key=key)
            await collect(provider.stream(req))
        await provider.aclose()
    sent = [r.body.get("prompt_cache_key") for r in server.requests]
    assert sent == ["sess_1", None, None, None]
    assert all("cache_control" not in str(r.body) for r in server.requests)


@pytest.mark.asyncio
async def test_openai_caches_prefixes_in_128_token_steps_per_key(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
    provider = OpenAIProvider("gpt-4.1", api_key="k")
    history: list[Message] = [user("read it")]

    async def ask(key: str) -> UsageReport:
        server.enqueue(Reply([Text("ok"), Usage(0, 2), Finish("stop")]))
        req = ModelRequest(system=LONG, messages=list(history), tools=TOOLS, cache_key=key)
        return usage_of(await collect(provider.stream(req)))

    u1 = await ask("sess_1")
    assert u1.cached_read_tokens == 0 and u1.input_tokens >= 1024
    history += [AssistantMessage([TextPart("Done.")]), user("more")]
    u2 = await ask("sess_1")
    assert u2.cached_read_tokens == u1.input_tokens // 128 * 128
    assert (await ask("sess_2")).cached_read_tokens == 0  # another key, another cache
    info = model_info("openai", "gpt-4.1")
    fresh = u2.input_tokens - u2.cached_read_tokens
    expected = (fresh * 2.0 + u2.cached_read_tokens * 0.5 + 2 * 8.0) / 1e6
    assert cost(info, u2) == pytest.approx(expected)
    await provider.aclose()


@pytest.mark.asyncio
async def test_openai_short_prompts_are_never_cached(server: FakeLLMServer) -> None:
    provider = OpenAIProvider("gpt-4.1", api_key="k", base_url=server.openai_url)
    for _ in range(2):
        server.enqueue(Reply([Text("ok"), Finish("stop")]))
        req = ModelRequest(system="short", messages=[user("hi")], cache_key="k")
        usage = usage_of(await collect(provider.stream(req)))
        assert usage.cached_read_tokens == 0 and 0 < usage.input_tokens < 1024
    await provider.aclose()
