"""The pure parts of compaction: where to cut (also inside a long turn), the summary
request (the session's own system prompt and tools, fitted to the window), the new
history."""

from __future__ import annotations

from acp_agent.conversation import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
    estimate_tokens,
)
from acp_agent.engine.compaction import (
    ACK,
    compacted_history,
    cut_points,
    fit,
    request_in_progress,
    split_point,
    summary_request,
)
from acp_agent.providers.base import ModelRequest

FRAME = ModelRequest(
    system="the session's system prompt",
    messages=[],
    tools=[ToolSpec("read_file", "Read.", {"type": "object", "properties": {}})],
    thinking="high",
)


def _turn(n: int, tools: int = 0, size: int = 10) -> list[Message]:
    out: list[Message] = [UserMessage([TextPart(f"q{n}")])]
    for k in range(tools):
        out += [AssistantMessage([ToolCallPart(f"c{n}.{k}", "read_file", {"path": "a"})]),
                ToolResultMessage(f"c{n}.{k}", "read_file", [TextPart("x" * size)])]  # fmt: skip
    out.append(AssistantMessage([TextPart(f"a{n}")]))
    return out


def test_cut_points_never_split_a_call_from_its_result() -> None:
    history = _turn(1, tools=2) + _turn(2)
    points = cut_points(history)
    for point in points:
        before = history[:point]
        calls = {p.call_id for m in before if isinstance(m, AssistantMessage)
                 for p in m.parts if isinstance(p, ToolCallPart)}  # fmt: skip
        results = {m.call_id for m in before if isinstance(m, ToolResultMessage)}
        assert calls == results and not isinstance(history[point], ToolResultMessage)
    assert points == [1, 3, 5, 6, 7]


def test_the_kept_tail_fits_its_budget_also_inside_one_long_turn() -> None:
    history = _turn(1, tools=30, size=4_000)  # one turn: 30 exchanges of ~1,000 tokens
    cut = split_point(history, keep_tokens=5_000)
    assert 0 < cut < len(history) and isinstance(history[cut], AssistantMessage)
    assert estimate_tokens(history[cut:]) <= 5_000
    assert estimate_tokens(history[cut - 2:]) > 5_000  # as much as fits
    assert request_in_progress(history, cut) == "q1"  # the turn's request travels along
    assert split_point(history, 0) == len(history)  # /compact keeps nothing
    assert split_point([UserMessage([TextPart("hi")])], 100) == 0  # nothing to compact


def test_the_summary_request_is_the_sessions_own_plus_a_final_ask() -> None:
    history = [
        *_turn(1, tools=1),
        UserMessage([TextPart("q2")]),
        AssistantMessage([TextPart("let me"), ToolCallPart("x", "grep", {})]),  # unanswered
    ]
    request = summary_request(FRAME, history, "the API design", 1_000)
    assert request.system == FRAME.system and request.tools == FRAME.tools
    assert request.max_tokens == 1_000 and request.thinking == "off"
    last = request.messages[-1]
    assert isinstance(last, UserMessage)
    assert "Do not call tools" in last.parts[0].text  # type: ignore[union-attr]
    assert "the API design" in last.parts[0].text  # type: ignore[union-attr]
    calls = [p.call_id for m in request.messages if isinstance(m, AssistantMessage)
             for p in m.parts if isinstance(p, ToolCallPart)]  # fmt: skip
    assert calls == ["c1.0"]


def test_the_summary_input_is_fitted_to_the_window() -> None:
    history = _turn(1, tools=40, size=8_000)
    fitted = fit(history, budget=20_000)
    assert estimate_tokens(fitted) <= 20_000
    assert isinstance(fitted[0], UserMessage)  # still a valid conversation
    assert fit(history[:3], budget=1_000_000) == history[:3]


def test_the_new_history() -> None:
    kept = _turn(9)
    new = compacted_history("## Goals\n- ship it\n", kept)
    assert "ship it" in new[0].parts[0].text and new[1].parts[0].text == ACK  # type: ignore[union-attr]
    assert new[2:] == kept
    mid_turn = compacted_history("summary", kept[1:], in_progress="fix the bug")
    assert "fix the bug" in mid_turn[0].parts[0].text  # type: ignore[union-attr]
    assert mid_turn[1:] == kept[1:]  # an assistant message follows the summary directly
