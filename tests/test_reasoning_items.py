"""Reasoning items (OpenAI Responses) in the engine and on disk: kept in history in stream
order, sent with the next request, persisted and read back as they were; and a whole turn
with tools through the agent, the real SDK and the fake Responses API, which verifies what
comes back (including after the agent restarts)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from acp_agent.conversation import AssistantMessage, ReasoningPart, ThinkingPart, ToolCallPart
from acp_agent.protocol import types as t
from acp_agent.providers.base import (
    Finished,
    ReasoningItem,
    ThinkingDelta,
    ToolCallReady,
    UsageReport,
)
from acp_agent.sessions.records import AddMessage, encode, parse

from .engine_world import World
from .fakes.llm_server import FakeLLMServer, Finish, Reasoning, Reply, Text, ToolCall, Usage
from .fakes.provider import text
from .harness import AgentProcess
from .schema_check import SchemaChecker

ITEM = ReasoningItem("rs_1", "gAAAA-sealed", ["Need the file."], "openai:gpt-5")


async def test_the_turn_keeps_reasoning_items_in_stream_order(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    answer: list[Any] = [
        ThinkingDelta("Need the file."),
        ITEM,
        ToolCallReady("call_1", "read_file", {"path": "a.txt"}),
        UsageReport(input_tokens=10, output_tokens=5),
        Finished("tool_calls"),
    ]
    world = World(tmp_path, answer, text("alpha it is"))
    assert (await world.turn())[0] == "end_turn"
    assistant = world.session.history[1]
    assert assistant == AssistantMessage(
        [
            ThinkingPart("Need the file."),
            ReasoningPart("rs_1", "gAAAA-sealed", ["Need the file."], "openai:gpt-5"),
            ToolCallPart("call_1", "read_file", {"path": "a.txt"}),
        ]
    )
    assert world.provider.requests[1].messages[1] == assistant  # sent with the next request
    thoughts = world.emitted(t.AgentThoughtChunk)
    assert [c.content.text for c in thoughts] == ["Need the file."]  # the item itself is not shown


def test_reasoning_parts_are_stored_as_they_are() -> None:
    message = AssistantMessage(
        [
            ReasoningPart("rs_1", "gAAAA-sealed", ["a", "b"], "openai:gpt-5"),
            ToolCallPart("c", "f", {}),
        ]
    )
    (record,) = parse(encode(AddMessage(message=message)))
    assert isinstance(record, AddMessage) and record.message == message
    raw = msgspec.json.decode(encode(AddMessage(message=message)))
    assert raw["message"]["parts"][0]["kind"] == "reasoning"


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def reasoning_agent(
    checker: SchemaChecker, state_dir: str, server: FakeLLMServer, config: Path
) -> AgentProcess:
    return AgentProcess(
        checker,
        "--state-dir",
        state_dir,
        "--model",
        "openai:gpt-5",
        "--base-url",
        server.openai_url,
        "--mode",
        "bypass",
        "--config",
        str(config),
        env={"OPENAI_API_KEY": "test-key"},
    )


async def test_a_turn_with_tools_through_the_responses_api(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer, tmp_path: Path
) -> None:
    """Summaries stream as thoughts; the call runs; its request carries the reasoning item
    back before the call and its output; a later prompt, even from a restarted agent that
    read the session from disk, sends the earlier items again, and the server takes them."""
    config = tmp_path / "c.toml"
    config.write_text('thinking = "medium"\n[openai]\napi = "responses"\n')
    read = json.dumps({"path": "hello.txt"})
    server.enqueue(
        Reply(
            [
                Reasoning(("I should read it.",)),
                Text("Let me look. "),
                ToolCall("call_a", "read_file", read, pieces=4),
                Usage(120, 30, cached=20, reasoning=9),
                Finish("tool_calls"),
            ]
        ),
        Reply(
            [
                Reasoning(("It says hello.",)),
                Text("It says hello world."),
                Usage(200, 10),
                Finish("stop"),
            ]
        ),
        Reply([Text("Still hello."), Finish("stop")]),
    )
    async with reasoning_agent(checker, state_dir, server, config) as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        result = await agent.prompt(sid, "what is in hello.txt?")
        assert result["stopReason"] == "end_turn"
        assert result["usage"]["thoughtTokens"] == 9 and result["usage"]["cachedReadTokens"] == 20
        thoughts = "".join(
            u["content"]["text"] for u in agent.updates_of(sid, "agent_thought_chunk")
        )
        assert thoughts == "I should read it.It says hello."
        assert agent.updates_of(sid, "tool_call_update")[-1]["status"] == "completed"
    first, second = server.requests[0].body, server.requests[1].body
    assert first["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    kinds = [i.get("type") for i in second["input"]]
    assert kinds == ["message", "reasoning", "message", "function_call", "function_call_output"]
    assert second["input"][1]["summary"] == [{"type": "summary_text", "text": "I should read it."}]
    assert "hello" in second["input"][4]["output"]

    async with reasoning_agent(checker, state_dir, server, config) as agent:
        await agent.initialize()
        await agent.request("session/load", {"sessionId": sid, "cwd": workspace, "mcpServers": []})
        assert (await agent.prompt(sid, "and now?"))["stopReason"] == "end_turn"
    third = server.requests[2].body["input"]
    assert [i.get("type") for i in third] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
        "reasoning",
        "message",
        "message",
    ]
    assert len(server.requests) == 3  # every request was taken: none refused by the fake
