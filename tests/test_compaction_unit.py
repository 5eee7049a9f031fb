"""The pure parts of compaction: the cut, the summary request, the new history."""

from __future__ import annotations

from acp_agent.compaction import compacted_history, split_point, summary_request
from acp_agent.conversation import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)


def _turn(n: int, with_tool: bool = False) -> list[Message]:
    out: list[Message] = [UserMessage([TextPart(f"q{n}")])]
    if with_tool:
        out += [AssistantMessage([ToolCallPart(f"c{n}", "read_file", {"path": "a"})]),
                ToolResultMessage(f"c{n}", "read_file", [TextPart("content")])]
    out.append(AssistantMessage([TextPart(f"a{n}")]))
    return out


def test_the_cut_keeps_whole_exchanges() -> None:
    history = _turn(1, True) + _turn(2, True) + _turn(3)
    cut = split_point(history, 1)
    assert isinstance(history[cut], UserMessage) and history[cut].parts[0] == TextPart("q3")
    assert split_point(history, 5) == 0  # too short to compact
    assert split_point(history, 0) == len(history)


def test_summary_request_drops_unanswered_calls_and_offers_no_tools() -> None:
    history = [
        *_turn(1, True),
        UserMessage([TextPart("q2")]),
        AssistantMessage([TextPart("let me"), ToolCallPart("x", "grep", {})]),
    ]
    request = summary_request(history, "the API design", 1000)
    assert request.tools == [] and request.max_tokens == 1000
    last = request.messages[-1]
    assert isinstance(last, UserMessage) and isinstance(last.parts[0], TextPart)
    assert "the API design" in last.parts[0].text
    calls = [p for m in request.messages if isinstance(m, AssistantMessage)
             for p in m.parts if isinstance(p, ToolCallPart)]
    assert [c.call_id for c in calls] == ["c1"]


def test_compacted_history_starts_with_the_summary() -> None:
    kept = _turn(9)
    new = compacted_history("## Goals\n- ship it\n", kept)
    first = new[0].parts[0]
    assert isinstance(first, TextPart) and "ship it" in first.text and new[2:] == kept
