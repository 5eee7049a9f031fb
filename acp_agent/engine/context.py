"""Making room in the context before compaction is needed: old, large tool results are
replaced by a short stub that says what they were and how to get them again.

Before each model request (``turn.before_request``), when the context passes
``limits.prune-at`` of the window, the newest tool results are kept whole up to
:data:`KEEP_SHARE` of the window (and at least the newest :data:`KEEP_RECENT`), and every
older one longer than :data:`MIN_CHARS` becomes a stub. Stubbing happens in one batch and
is recorded (``records.PruneResults``), so the history, and with it the prompt-cache
prefix, changes once, not at every request; a reloaded session has the same stubs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from ..conversation import (
    Message,
    TextPart,
    ToolResultMessage,
    ToolSpec,
    estimate_tokens,
)

if TYPE_CHECKING:
    from ..sessions.session import Session

#: The newest tool results are kept whole up to this share of the window...
KEEP_SHARE = 0.25
#: ... and the newest two always.
KEEP_RECENT = 2
#: Results shorter than this are not worth a stub.
MIN_CHARS = 2_000


def _size(result: ToolResultMessage) -> int:
    """Characters (an image counts as MIN_CHARS: always worth a stub)."""
    return sum(len(p.text) if isinstance(p, TextPart) else MIN_CHARS for p in result.parts)


def prunable(history: list[Message], keep_tokens: int = 0) -> list[str]:
    """The call ids of the tool results a prune would replace: all but the newest, kept
    whole up to ``keep_tokens`` (at least :data:`KEEP_RECENT` of them), that are large."""
    results = [m for m in history if isinstance(m, ToolResultMessage)]
    kept, budget = 0, keep_tokens * 4
    while kept < len(results):
        size = _size(results[-1 - kept])
        if kept >= KEEP_RECENT and size > budget:
            break
        budget -= size
        kept += 1
    return [m.call_id for m in results[: len(results) - kept] if _size(m) >= MIN_CHARS]


def frame_tokens(system: str, tools: list[ToolSpec]) -> int:
    """What every request carries besides the history: the system prompt and the tools."""
    return estimate_tokens([], system) + len(msgspec.json.encode(tools)) // 4


def context_estimate(session: Session) -> int:
    """Tokens the next request will carry, at least: the provider's count of the last
    one, or an estimate (history, system prompt, tools) when that is larger (new results
    since)."""
    estimate = session.history_tokens() + session.frame_tokens
    return max(session.usage.context_tokens, estimate)


def prune(session: Session, window: int, prune_at: float) -> int:
    """Stub old large results when the context passes ``prune_at`` of ``window``;
    returns how many were stubbed (recorded in the session's log)."""
    if context_estimate(session) < prune_at * window:
        return 0
    ids = prunable(session.history, int(KEEP_SHARE * window))
    if ids:
        session.stub_results(ids)
    return len(ids)
