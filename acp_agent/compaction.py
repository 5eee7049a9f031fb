"""Context compaction: the model summarises older history; the summary replaces it.

The pure parts live here (where to cut, the summary request, the new history); the
session reports the compaction to the client (``compaction_update`` /
``compaction_summary_chunk`` or an ordinary message) and records it.

The cut never separates a tool call from its result: it falls just before a user
message, so the kept tail starts a clean exchange.
"""

from __future__ import annotations

from .providers.base import (
    AssistantMessage,
    Message,
    ModelRequest,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)

SUMMARY_SYSTEM = """\
You compact a coding session's history. Write a faithful, user-readable summary of the \
conversation so far that lets the work continue without the original messages: the \
user's goals and constraints, decisions made, files and commands involved (with paths), \
what was done and what remains, and any open questions. Use Markdown headings and \
bullets. Do not invent anything. Do not address the user; do not call tools."""

SUMMARY_PROMPT = "Summarise the conversation so far for the compacted context."

SUMMARY_PREFIX = "Summary of the earlier conversation (compacted):\n\n"


def split_point(history: list[Message], keep_user_turns: int) -> int:
    """Index where the kept tail starts: at the ``keep_user_turns``-th user message from
    the end (0 keeps nothing). Returns 0 when there is nothing worth compacting."""
    starts = [i for i, m in enumerate(history) if isinstance(m, UserMessage)]
    if keep_user_turns <= 0:
        return len(history)
    if len(starts) <= keep_user_turns:
        return 0
    return starts[-keep_user_turns]


def summary_request(
    older: list[Message], instructions: str | None, max_tokens: int | None
) -> ModelRequest:
    ask = SUMMARY_PROMPT
    if instructions:
        ask += f"\n\nThe user asks to keep in particular: {instructions}"
    return ModelRequest(
        system=SUMMARY_SYSTEM,
        messages=[*_without_dangling_calls(older), UserMessage([TextPart(ask)])],
        tools=[],
        max_tokens=max_tokens,
    )


def compacted_history(summary: str, kept: list[Message]) -> list[Message]:
    """The history that replaces the old one: the summary as context, then the tail."""
    return [
        UserMessage([TextPart(SUMMARY_PREFIX + summary.strip())]),
        AssistantMessage([TextPart("Understood. I'll continue from this summary.")]),
        *kept,
    ]


def _without_dangling_calls(messages: list[Message]) -> list[Message]:
    """Drop tool calls that have no result (a cancelled turn), which the APIs reject."""
    answered = {m.call_id for m in messages if isinstance(m, ToolResultMessage)}
    out: list[Message] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            parts = [p for p in m.parts if not isinstance(p, ToolCallPart) or p.call_id in answered]
            if not parts:
                continue
            m = AssistantMessage(parts)
        out.append(m)
    return out
