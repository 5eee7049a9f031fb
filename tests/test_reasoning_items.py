"""Reasoning items (OpenAI Responses) in the engine and on disk: kept in history in stream
order, sent with the next request, persisted and read back as they were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from acp_agent.conversation import AssistantMessage, ReasoningPart, ThinkingPart, ToolCallPart
from acp_agent.protocol import types as t
from acp_agent.providers.base import (
    Finished,
    ReasoningItem,
    ThinkingDelta,
    ToolCallReady,
    UsageReport,
)
from acp_agent.records import AddMessage, encode, parse

from .engine_world import World
from .fakes.provider import text

ITEM = ReasoningItem("rs_1", "gAAAA-sealed", ["Need the file."], "openai:gpt-5")


async def test_the_turn_keeps_reasoning_items_in_stream_order(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    answer: list[Any] = [
        ThinkingDelta("Need the file."),
        ITEM,
        ToolCallReady("call_1", "read_file", {"path": "a.txt"}),
        UsageReport(input_tokens=10, output_tokens=5),
        Finished("tool_calls"),
    ]  # fmt: skip
    world = World(tmp_path, answer, text("alpha it is"))
    assert (await world.turn())[0] == "end_turn"
    assistant = world.session.history[1]
    assert assistant == AssistantMessage([
        ThinkingPart("Need the file."),
        ReasoningPart("rs_1", "gAAAA-sealed", ["Need the file."], "openai:gpt-5"),
        ToolCallPart("call_1", "read_file", {"path": "a.txt"}),
    ])  # fmt: skip
    assert world.provider.requests[1].messages[1] == assistant  # sent with the next request
    thoughts = world.emitted(t.AgentThoughtChunk)
    assert [c.content.text for c in thoughts] == ["Need the file."]  # the item itself is not shown


def test_reasoning_parts_are_stored_as_they_are() -> None:
    message = AssistantMessage([
        ReasoningPart("rs_1", "gAAAA-sealed", ["a", "b"], "openai:gpt-5"),
        ToolCallPart("c", "f", {}),
    ])  # fmt: skip
    (record,) = parse(encode(AddMessage(message=message)))
    assert isinstance(record, AddMessage) and record.message == message
    raw = msgspec.json.decode(encode(AddMessage(message=message)))
    assert raw["message"]["parts"][0]["kind"] == "reasoning"
