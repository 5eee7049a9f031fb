"""Making room in the context before compaction is needed: old, large tool results are
replaced by a short stub that says what they were and how to get them again.

Before each model request (``Runtime.turn_context``'s hook), when the context passes
``limits.prune-at`` of the window, every tool result older than the newest
:data:`KEEP_RECENT` and longer than :data:`MIN_CHARS` becomes a stub. Stubbing happens in
one batch and is recorded (``records.PruneResults``), so the history, and with it the
prompt-cache prefix, changes once, not at every request; a reloaded session has the same
stubs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from .conversation import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    ToolSpec,
    estimate_tokens,
)

if TYPE_CHECKING:
    from .session import Session

#: The newest tool results are always kept whole.
KEEP_RECENT = 6
#: Results shorter than this are not worth a stub.
MIN_CHARS = 2_000


def stub_text(call: ToolCallPart | None, result: ToolResultMessage) -> str:
    size = sum(len(p.text) for p in result.parts if isinstance(p, TextPart))
    what = result.name
    if call is not None and call.arguments:
        args = ", ".join(f"{k}={v!r}" for k, v in list(call.arguments.items())[:3])
        what = f"{result.name}({args[:200]})"
    return (
        f"[Earlier result of {what}: {size:,} characters, removed to make room in the "
        "context. Call the tool again if you need it.]"
    )


def stubbed(result: ToolResultMessage, call: ToolCallPart | None) -> ToolResultMessage:
    return ToolResultMessage(
        result.call_id, result.name, [TextPart(stub_text(call, result))], result.is_error
    )


def prunable(history: list[Message]) -> list[str]:
    """The call ids of the tool results a prune would replace."""
    results = [m for m in history if isinstance(m, ToolResultMessage)]
    old = results[:-KEEP_RECENT] if KEEP_RECENT else results
    return [
        m.call_id
        for m in old
        if sum(len(p.text) for p in m.parts if isinstance(p, TextPart)) >= MIN_CHARS
        or any(not isinstance(p, TextPart) for p in m.parts)
    ]


def apply_stubs(history: list[Message], call_ids: set[str]) -> list[Message]:
    """``history`` with the results of ``call_ids`` replaced by their stubs."""
    calls = {
        p.call_id: p
        for m in history
        if isinstance(m, AssistantMessage)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    }
    return [
        stubbed(m, calls.get(m.call_id))
        if isinstance(m, ToolResultMessage) and m.call_id in call_ids
        else m
        for m in history
    ]


def frame_tokens(system: str, tools: list[ToolSpec]) -> int:
    """What every request carries besides the history: the system prompt and the tools."""
    return estimate_tokens([], system) + len(msgspec.json.encode(tools)) // 4


def context_estimate(session: Session) -> int:
    """Tokens the next request will carry, at least: the provider's count of the last
    one, or an estimate (history, system prompt, tools) when that is larger (new results
    since)."""
    estimate = estimate_tokens(session.history) + session.frame_tokens
    return max(session.usage.context_tokens, estimate)


def prune(session: Session, window: int, prune_at: float) -> int:
    """Stub old large results when the context passes ``prune_at`` of ``window``;
    returns how many were stubbed (recorded in the session's log)."""
    if context_estimate(session) < prune_at * window:
        return 0
    ids = prunable(session.history)
    if ids:
        session.stub_results(ids)
    return len(ids)
