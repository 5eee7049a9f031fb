"""Context compaction: the model summarises older history; the summary replaces it.

The pure parts (where to cut, the summary request, the new history), the run
(:func:`compact`: reported as ``compaction_update`` / ``compaction_summary_chunk`` or an
ordinary message, and recorded), and when it happens (:func:`maybe_compact` before a
model request, :func:`compact_session` for ``/compact``).

The cut never separates a tool call from its result: the kept tail starts a clean
exchange, before a user message or between tool exchanges of a long turn (whose request
then stays in the summary message, verbatim). When the model says a request does not fit
its window, :func:`make_room` compacts, or drops the oldest messages, and the turn tries
once more.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import msgspec

from ..conversation import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
    estimate_tokens,
)
from ..errors import ProviderContextError, ProviderError, ProviderStreamError
from ..protocol import types as t
from ..providers.base import ModelProvider, ModelRequest, TextDelta, UsageReport

if TYPE_CHECKING:
    from ..handlers.runtime import Runtime
    from ..providers.models import ModelInfo
    from ..sessions.session import Session

SUMMARY_PROMPT = """\
Stop working on the task for a moment: the earlier part of this conversation is about to \
be replaced by a summary you write now, and you will continue from it. Write that summary \
for yourself: the user's goals and constraints, decisions made and why, the files, \
functions and commands involved (with paths), what was done and what it showed, what \
remains to do, and open questions. Keep exact names, paths and error messages. Markdown \
headings and bullets; no preamble. Do not call tools: answer with the summary only."""

SUMMARY_PREFIX = "Summary of the earlier conversation (compacted):\n\n"
IN_PROGRESS = "\n\nThe request being worked on when the conversation was compacted:\n\n"
ACK = "Understood. I'll continue from this summary."


def cut_points(history: list[Message]) -> list[int]:
    """Where a kept tail may start: before a user or assistant message, with every tool
    call before that point answered before it (the tail starts a clean exchange)."""
    points: list[int] = []
    pending: set[str] = set()
    for i, message in enumerate(history):
        if isinstance(message, ToolResultMessage):
            pending.discard(message.call_id)
            continue
        if i and not pending:
            points.append(i)
        if isinstance(message, AssistantMessage):
            pending = {p.call_id for p in message.parts if isinstance(p, ToolCallPart)}
    return points


def split_point(history: list[Message], keep_tokens: int) -> int:
    """Where the kept tail starts: the earliest cut point whose tail fits ``keep_tokens``
    (estimated), else the latest one; ``len(history)`` keeps nothing (``keep_tokens``
    0); 0 when there is nothing to compact."""
    if keep_tokens <= 0:
        return len(history)
    points = cut_points(history)
    if not points:
        return 0
    for point in points:
        if estimate_tokens(history[point:]) <= keep_tokens:
            return point
    return points[-1]


def summary_request(
    frame: ModelRequest, older: list[Message], instructions: str | None, max_tokens: int | None
) -> ModelRequest:
    """The summary request: the session's own system prompt and tools (so it is valid on
    both APIs with any history, and reads the cached prefix), the older history, and a
    final user message asking for the summary."""
    ask = SUMMARY_PROMPT
    if instructions:
        ask += f"\n\nThe user asks to keep in particular: {instructions}"
    return msgspec.structs.replace(
        frame,
        messages=[*_without_dangling_calls(older), UserMessage([TextPart(ask)])],
        max_tokens=max_tokens,
        thinking="off",
    )


def fit(messages: list[Message], budget: int) -> list[Message]:
    """``messages`` made to fit ``budget`` tokens (estimated) for the summary request:
    large tool results become stubs, then the oldest exchanges go (noted)."""
    from .context import MIN_CHARS, apply_stubs

    if estimate_tokens(messages) <= budget:
        return messages
    large = {
        m.call_id
        for m in messages
        if isinstance(m, ToolResultMessage)
        and sum(len(p.text) for p in m.parts if isinstance(p, TextPart)) >= MIN_CHARS // 4
    }
    messages = apply_stubs(messages, large)
    if estimate_tokens(messages) <= budget:
        return messages
    for point in cut_points(messages):
        tail = messages[point:]
        if estimate_tokens(tail) <= budget:
            note = UserMessage([TextPart(f"[{point} earlier messages omitted here.]")])
            return [note, *tail] if not isinstance(tail[0], UserMessage) else tail
    return messages[-1:] if isinstance(messages[-1], UserMessage) else []


def compacted_history(
    summary: str, kept: list[Message], in_progress: str | None = None
) -> list[Message]:
    """The history that replaces the old one: the summary (and, when the cut fell inside a
    turn, that turn's request, verbatim) as context, then the kept tail."""
    text = SUMMARY_PREFIX + summary.strip() + (IN_PROGRESS + in_progress if in_progress else "")
    head: list[Message] = [UserMessage([TextPart(text)])]
    if not kept or not isinstance(kept[0], AssistantMessage):
        head.append(AssistantMessage([TextPart(ACK)]))
    return [*head, *kept]


def request_in_progress(history: list[Message], cut: int) -> str | None:
    """The text of the last user message before ``cut`` when the tail continues its turn
    (no user message in the tail)."""
    if any(isinstance(m, UserMessage) and not _note(m) for m in history[cut:]):
        return None
    for message in reversed(history[:cut]):
        if isinstance(message, UserMessage) and not _note(message):
            text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart)).strip()
            if IN_PROGRESS.strip() in text:  # compacted before: the request is carried on
                return text.split(IN_PROGRESS.strip(), 1)[1].strip() or None
            if text.startswith((SUMMARY_PREFIX, "[")):
                return None
            return text or None
    return None


def _note(message: UserMessage) -> bool:
    """A note of the agent's in the user's place (a mode change), not a request."""
    first = message.parts[0] if message.parts else None
    return isinstance(first, TextPart) and first.text.startswith("[The permission mode is")


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
    frame: ModelRequest,
    *,
    reported: bool,
    instructions: str | None = None,
    keep_tokens: int = 0,
    max_tokens: int | None = None,
    window: int | None = None,
    info: ModelInfo | None = None,
) -> str:
    """Summarise the older history and replace it; returns the terminal status
    (``completed``, ``failed``, or ``skipped`` when there is nothing to compact).

    ``frame`` carries the system prompt and tools of the session's requests. ``reported``:
    the client advertised ``session.compaction``, so the compaction is one
    ``compaction_update`` entity (``in_progress`` → summary chunks → exactly one terminal
    status); otherwise the outcome is described in an ordinary agent message. A cancel
    sends the ``cancelled`` status and propagates.
    """
    history = session.history
    cut = split_point(history, keep_tokens)
    if cut == 0:
        return "skipped"
    older, kept = history[:cut], history[cut:]
    in_progress = request_in_progress(history, cut)
    compaction_id = f"cmp_{session.new_message_id()}"
    if reported:
        await session.emit(t.CompactionUpdate(compaction_id=compaction_id, status="in_progress"))
    pieces: list[str] = []
    if window is not None:  # the summary request must fit, or it fails like the turn did
        budget = int(0.8 * window) - (max_tokens or 0) - estimate_tokens([], frame.system)
        older_for_summary = fit(older, max(budget, 1_000))
    else:
        older_for_summary = older
    request = summary_request(frame, older_for_summary, instructions, max_tokens)
    try:
        async for event in provider.stream(request):
            if isinstance(event, UsageReport):
                session.usage.add_spent(event, info)
            elif isinstance(event, TextDelta) and event.text:
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
    session.replace_history(compacted_history(summary, kept, in_progress))
    if reported:
        await session.emit(t.CompactionUpdate(compaction_id=compaction_id, status="completed"))
    else:
        await session.say(
            f"_Compacted {len(older)} earlier messages into this summary:_\n\n{summary}"
        )
    return "completed"


# --------------------------------------------------------------------------- when


#: After compaction, the kept tail is at most this share of the window (the rest is the
#: summary's).
KEEP_SHARE = 0.2
#: After a failed automatic compaction, the next try waits until the context has grown
#: by this share of the window (or a context-length error forces it).
RETRY_GROWTH = 0.05


async def maybe_compact(rt: Runtime, session: Session) -> None:
    """Before a model request (mid-turn too): compact when the context passes
    ``limits.compact-at`` of the window, unless a compaction just failed."""
    from .context import context_estimate

    window = rt.window(session)
    used = context_estimate(session)
    if used < rt.config.limits.compact_at * window or used < session.compact_after:
        return
    await rt.notify(
        session,
        "info",
        "Compacting the conversation",
        f"The context is {used / window:.0%} full; older messages are summarised.",
    )
    status = await compact_session(rt, session, None, keep_tokens=int(KEEP_SHARE * window))
    if status == "failed":  # not again before every request: once it has grown
        session.compact_after = used + int(RETRY_GROWTH * window)


async def compact_session(
    rt: Runtime, session: Session, instructions: str | None, *, keep_tokens: int
) -> str:
    """Compact ``session`` now (``/compact`` keeps nothing; automatic and recovery keep
    a tail); the status."""
    from .turn import request_of

    info = rt.model_info_for(session.model)
    window = rt.window(session)
    frame = request_of(await rt.turn_context(session))
    status = await compact(
        session,
        rt.provider(session),
        frame,
        reported=rt.shows_compaction,
        instructions=instructions,
        keep_tokens=keep_tokens,
        max_tokens=min(info.max_output_tokens, 8192),
        window=window,
        info=info,
    )
    if status == "skipped" and keep_tokens == 0:
        await session.say("Nothing to compact yet.")
    if status == "completed":
        session.compact_after = 0
        session.usage.context_tokens = estimate_tokens(session.history, frame.system)
        await session.emit(session.usage_update(info.context_window))
    return status


async def make_room(rt: Runtime, session: Session, error: ProviderContextError) -> bool:
    """The model said the request does not fit its window: compact (keeping a tail),
    or, if that fails, drop the oldest part of the history. ``False`` when nothing
    could be done. A window the server named is believed from then on."""
    from .context import context_estimate

    if error.limit and error.limit < rt.window(session):
        session.window_limit = error.limit
        if context_estimate(session) < rt.config.limits.compact_at * error.limit:
            return True  # it fits: the next request asks for a smaller answer
    window = rt.window(session)
    status = await compact_session(rt, session, None, keep_tokens=int(KEEP_SHARE * window))
    if status == "completed":
        return True
    return await drop_oldest(rt, session, keep_tokens=int(KEEP_SHARE * window))


async def drop_oldest(rt: Runtime, session: Session, *, keep_tokens: int) -> bool:
    """The last resort: keep the newest whole exchanges that fit ``keep_tokens``
    (older tool results stubbed first), drop the rest, and say so."""
    from .context import apply_stubs, prunable

    history = apply_stubs(session.history, set(prunable(session.history)))
    cut = split_point(history, keep_tokens)
    if cut == 0:  # nothing to drop; shorter old results may be enough
        if history == session.history:
            return False
        session.replace_history(history)
        return True
    dropped = cut
    note = (
        f"[{dropped} earlier messages were dropped: the conversation no longer fit the "
        "model's context window and could not be summarised.]"
    )
    in_progress = request_in_progress(history, cut)
    head = note + (IN_PROGRESS + in_progress if in_progress else "")
    kept = history[cut:]
    new: list[Message] = [UserMessage([TextPart(head)])]
    if not kept or not isinstance(kept[0], AssistantMessage):
        new.append(AssistantMessage([TextPart(ACK)]))
    session.replace_history([*new, *kept])
    await rt.notify(
        session,
        "warning",
        "Earlier messages dropped",
        f"{dropped} messages no longer fit the model's context window.",
        fallback=True,
    )
    return True
