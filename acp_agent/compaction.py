"""Context compaction: the model summarises older history; the summary replaces it.

The pure parts (where to cut, the summary request, the new history), the run
(:func:`compact`: reported as ``compaction_update`` / ``compaction_summary_chunk`` or an
ordinary message, and recorded), and when it happens (:func:`maybe_compact` before a
model request, :func:`compact_session` for ``/compact``).

The cut never separates a tool call from its result: it falls just before a user
message, so the kept tail starts a clean exchange.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .conversation import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from .errors import ProviderError, ProviderStreamError
from .protocol import types as t
from .providers.base import ModelProvider, ModelRequest, TextDelta

if TYPE_CHECKING:
    from .runtime import Runtime
    from .session import Session

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


# --------------------------------------------------------------------------- the run


async def compact(
    session: Session,
    provider: ModelProvider,
    *,
    reported: bool,
    instructions: str | None = None,
    keep_user_turns: int = 0,
    max_tokens: int | None = None,
) -> str:
    """Summarise the older history and replace it; returns the terminal status
    (``completed``, ``failed``, or ``skipped`` when there is nothing to compact).

    ``reported``: the client advertised ``session.compaction``, so the compaction is one
    ``compaction_update`` entity (``in_progress`` → summary chunks → exactly one terminal
    status); otherwise the outcome is described in an ordinary agent message. A cancel
    sends the ``cancelled`` status and propagates.
    """
    cut = split_point(session.history, keep_user_turns)
    if cut == 0:
        return "skipped"
    older, kept = session.history[:cut], session.history[cut:]
    compaction_id = f"cmp_{session.new_message_id()}"
    if reported:
        await session.emit(t.CompactionUpdate(compaction_id=compaction_id, status="in_progress"))
    pieces: list[str] = []
    try:
        async for event in provider.stream(summary_request(older, instructions, max_tokens)):
            if isinstance(event, TextDelta) and event.text:
                pieces.append(event.text)
                if reported:
                    await session.emit(
                        t.CompactionSummaryChunk(
                            compaction_id=compaction_id, content=t.TextContent(text=event.text)
                        )
                    )
        summary = "".join(pieces).strip()
        if not summary:
            raise ProviderStreamError("the model returned an empty summary")
    except asyncio.CancelledError:
        if reported:
            await session.emit(
                t.CompactionUpdate(compaction_id=compaction_id, status="cancelled", summary=None)
            )
        raise
    except ProviderError as exc:
        if reported:
            await session.emit(
                t.CompactionUpdate(
                    compaction_id=compaction_id, status="failed", summary=None, error=exc.message
                )
            )
        else:
            await session.say(f"_Compaction failed: {exc.message}. The history is unchanged._")
        return "failed"
    session.replace_history(compacted_history(summary, kept))
    if reported:
        await session.emit(t.CompactionUpdate(compaction_id=compaction_id, status="completed"))
    else:
        await session.say(
            f"_Compacted {len(older)} earlier messages into this summary:_\n\n{summary}"
        )
    return "completed"


async def maybe_compact(rt: Runtime, session: Session) -> None:
    """Before a model request: compact when the context passes the configured share."""
    info = rt.model_info_for(session.model)
    threshold = rt.config.limits.compact_at * info.context_window
    if session.usage.context_tokens < threshold:
        return
    share = session.usage.context_tokens / info.context_window
    await rt.notify(
        session,
        "info",
        "Compacting the conversation",
        f"The context is {share:.0%} full; older messages are summarised.",
    )
    await compact_session(rt, session, None, keep_user_turns=1)


async def compact_session(
    rt: Runtime, session: Session, instructions: str | None, *, keep_user_turns: int
) -> str:
    """Compact ``session`` now (``/compact``, or :func:`maybe_compact`); the status."""
    from .conversation import estimate_tokens

    info = rt.model_info_for(session.model)
    status = await compact(
        session,
        rt.provider(session),
        reported=rt.shows_compaction,
        instructions=instructions,
        keep_user_turns=keep_user_turns,
        max_tokens=min(info.max_output_tokens, 8192),
    )
    if status == "skipped" and keep_user_turns == 0:
        await session.say("Nothing to compact yet.")
    if status == "completed":
        session.usage.context_tokens = estimate_tokens(session.history, "")
        await session.emit(session.usage_update(info.context_window))
    return status
