"""From a session log back to a live session: its state (:func:`restore`) and what the
user saw (:func:`transcript`, replayed by ``session/load``).

The transcript is the log's updates in their original order with their original ids,
materialized: the chunks of one message become one chunk, a tool call becomes one
``tool_call`` carrying its final state, and state-only updates (usage, modes, config
options, commands) are left to the load response. A tool call still running when its turn
was interrupted (the process died) is shown as failed, and terminals embedded in tool
calls (released long ago, unknown to the new connection) become their output as text.
Each update takes the form the loading client takes (:func:`for_client`: a draft update
it did not advertise becomes its fallback, as it would have live); notices are never
replayed; a compaction is one ``compaction_update`` (its patches and summary chunks
folded in) at its original position, a session-directed message one ``session_message``
(its chunks folded in). :func:`transcripts` adds the subagents' transcripts, each under
its child's id right after the update that announced the child, for a client that takes
subagents (nothing of children for the others).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import msgspec

from .conversation import AssistantMessage, Message, TextPart, ToolCallPart, ToolResultMessage
from .protocol import UNSET, UnsetType
from .protocol import types as t
from .records import (
    AddMessage,
    ChildUpdate,
    Header,
    Instructions,
    Prompt,
    PruneResults,
    Record,
    ReplaceHistory,
    Roots,
    Settings,
    TruncateHistory,
    TurnEnd,
    Update,
    UsageTotals,
)

INTERRUPTED = "The agent stopped before this tool call finished."

#: Updates that describe current state, not history: the load response (and the
#: ``usage_update`` after it) carries their latest values.
_STATE_UPDATES = (
    t.UsageUpdate,
    t.CurrentModeUpdate,
    t.ConfigOptionUpdate,
    t.AvailableCommandsUpdate,
    t.SessionInfoUpdate,
)
_DONE = ("completed", "failed")


# --------------------------------------------------------------------------- state


@dataclass
class State:
    """What a session log says about the session now."""

    cwd: str = ""
    additional_directories: list[str] = field(default_factory=list)
    created_at: str = ""
    forked_from: str | None = None
    history: list[Message] = field(default_factory=list)
    title: str | None = None
    first_prompt: str | None = None
    mode: str | None = None
    model: str | None = None
    thinking: str | None = None
    instructions: Instructions | None = None
    usage: UsageTotals = field(
        default_factory=lambda: UsageTotals(context_tokens=0, input_tokens=0, output_tokens=0)
    )
    next_tool_id: int = 1
    next_message_id: int = 1


_COUNTER = re.compile(r"_(\d+)$")


def _after(current: int, ident: object) -> int:
    """Keep id counters past every id already used (ids must stay unique in a session)."""
    if isinstance(ident, str) and (m := _COUNTER.search(ident)) is not None:
        return max(current, int(m.group(1)) + 1)
    return current


def restore(records: Iterable[Record]) -> State:
    state = State()
    open_calls: list[ToolCallPart] = []  # asked for by the model, not answered yet
    in_turn = False
    history = state.history
    for record in records:
        if isinstance(record, AddMessage):
            message = record.message
            if isinstance(message, ToolResultMessage):
                open_calls = [c for c in open_calls if c.call_id != message.call_id]
            else:
                _close(history, open_calls)
                open_calls = []
                if isinstance(message, AssistantMessage):
                    open_calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
            history.append(message)
        elif isinstance(record, Update):
            update = record.update
            if isinstance(update, t.AgentMessageChunk | t.AgentThoughtChunk):
                state.next_message_id = _after(state.next_message_id, update.message_id)
            elif isinstance(update, t.ToolCall):
                state.next_tool_id = _after(state.next_tool_id, update.tool_call_id)
            elif isinstance(update, t.SessionInfoUpdate) and update.title is not UNSET:
                state.title = update.title
        elif isinstance(record, Prompt):
            in_turn = True
            state.next_message_id = _after(state.next_message_id, record.message_id)
            if state.first_prompt is None:
                state.first_prompt = prompt_text(record.blocks)
        elif isinstance(record, TruncateHistory):
            _close(history, open_calls)
            open_calls = []
            del history[record.length :]
        elif isinstance(record, ReplaceHistory):
            open_calls = []
            history[:] = record.messages
        elif isinstance(record, Settings):
            state.mode, state.model = record.mode, record.model
            state.thinking = record.thinking
        elif isinstance(record, UsageTotals):
            state.usage = record
        elif isinstance(record, Instructions):
            state.instructions = record
        elif isinstance(record, PruneResults):
            from .context import apply_stubs

            history[:] = apply_stubs(history, set(record.call_ids))
        elif isinstance(record, TurnEnd):
            in_turn = False
        elif isinstance(record, Roots):
            state.cwd = record.cwd
            state.additional_directories = list(record.additional_directories)
        elif isinstance(record, Header):
            state.cwd, state.created_at = record.cwd, record.created_at
            state.additional_directories = list(record.additional_directories)
            state.forked_from = record.forked_from
    _close(history, open_calls)
    if in_turn:  # the process died mid-turn: the message it was streaming (at most one,
        state.next_message_id += 1  # buffered < 100 ms) may have an id the log lacks
    return state


def _close(history: list[Message], calls: list[ToolCallPart]) -> None:
    """Give unanswered tool calls (the process died mid-turn) a result: the model APIs
    reject a history with dangling calls. Applied in log order, so positions match what
    the writing process held in memory."""
    for call in calls:
        history.append(ToolResultMessage(call.call_id, call.name, [TextPart(INTERRUPTED)], True))


def prompt_text(blocks: Iterable[t.ContentBlock]) -> str:
    """The text of a prompt, for titles (resource links stand in when there is none)."""
    texts = [b.text for b in blocks if isinstance(b, t.TextContent)]
    if not any(s.strip() for s in texts):
        texts = [f"@{b.name}" for b in blocks if isinstance(b, t.ResourceLink)]
    return " ".join(texts).strip()


# --------------------------------------------------------------------------- transcript


def transcript(
    records: Iterable[Record],
    caps: t.ClientCapabilities | None = None,
    *,
    live: bool = False,
) -> list[t.SessionUpdate]:
    """The updates to replay, in order, each in the form a client with ``caps`` takes
    (:func:`for_client`; ``None``: as recorded). ``live``: another process is running
    the session, so its last turn may still be in progress (its tool calls are not
    failed)."""
    out = _transcript(records, live=live)
    if caps is None:
        return [u for u in out if not isinstance(u, t.Notice)]
    return [shown for u in out for shown in for_client(u, caps)]


def transcripts(
    session_id: str,
    records: Iterable[Record],
    caps: t.ClientCapabilities,
    *,
    live: bool = False,
) -> list[tuple[str, t.SessionUpdate]]:
    """:func:`transcript` as ``(session id, update)`` pairs, with the transcript of each
    subagent the log kept (its ``ChildUpdate`` records) right after the update that
    announced it (on its immediate parent's transcript; a grandchild's within its
    parent's): associations before child traffic, each session in its own order. A child
    whose announcement is not there is left out; so is every child for a client without
    ``subagents``."""
    records = list(records)
    out: list[tuple[str, t.SessionUpdate]] = []
    own = transcript(records, caps, live=live)
    if not isinstance(caps.subagents, t.SubagentCapabilities):
        return [(session_id, u) for u in own]
    kept: dict[str, list[Record]] = {}
    for record in records:
        if isinstance(record, ChildUpdate):
            kept.setdefault(record.session_id, []).append(Update(update=record.update))
    children = {child: transcript(rs, caps, live=live) for child, rs in kept.items()}

    def place(owner: str, updates: list[t.SessionUpdate]) -> None:
        for update in updates:
            out.append((owner, update))
            if isinstance(update, t.SubagentUpdate) and update.session_id in children:
                place(update.session_id, children.pop(update.session_id))

    place(session_id, own)
    return out


def for_client(update: t.SessionUpdate, caps: t.ClientCapabilities) -> list[t.SessionUpdate]:
    """A recorded update as a client with ``caps`` sees it: a draft update it did not
    advertise becomes its fallback, as it would have live (a plan document becomes the
    classic ``plan``, a compaction its message), or nothing (notices are live-only,
    subagents hidden)."""
    if isinstance(update, t.Notice):
        return []
    if isinstance(update, t.CompactionUpdate | t.CompactionSummaryChunk):
        session = caps.session
        if isinstance(session, t.ClientSessionCapabilities) and bool(session.compaction):
            return [update]
        return _compaction_message(update)
    if isinstance(update, t.PlanUpdate | t.PlanRemoved):
        return [update] if caps.plan else _classic_plan(update)
    if isinstance(update, t.SubagentUpdate | t.SessionMessage | t.SessionMessageChunk):
        return [update] if caps.subagents else []
    return [update]


def _compaction_message(update: t.SessionUpdate) -> list[t.SessionUpdate]:
    if not isinstance(update, t.CompactionUpdate):
        return []
    if update.status == "completed" and isinstance(update.summary, list):
        summary = "".join(b.text for b in update.summary if isinstance(b, t.TextContent))
        text = f"_The earlier conversation was compacted into this summary:_\n\n{summary}\n"
    elif update.status == "failed":
        why = update.error or "unknown error"
        text = f"_Compaction failed: {why}. The history is unchanged._\n"
    else:
        return []
    return [t.AgentMessageChunk(content=t.TextContent(text=text), message_id=update.compaction_id)]


def _classic_plan(update: t.SessionUpdate) -> list[t.SessionUpdate]:
    from .tools.plan import checklist_of

    if isinstance(update, t.PlanRemoved):
        return [t.Plan(entries=[])]
    assert isinstance(update, t.PlanUpdate)
    plan = update.plan
    if isinstance(plan, t.PlanItems):
        return [t.Plan(entries=plan.entries)]
    content = getattr(plan, "content", "")
    entries = checklist_of(content) if isinstance(content, str) else []
    if entries:
        return [t.Plan(entries=entries)]
    return [t.AgentMessageChunk(content=t.TextContent(text=f"{content}\n"))] if content else []


def _transcript(records: Iterable[Record], *, live: bool) -> list[t.SessionUpdate]:
    out: list[t.SessionUpdate] = []
    calls: dict[str, int] = {}  # tool call id -> its index in ``out``
    turn_calls: list[int] = []
    info: t.SessionInfoUpdate | None = None
    pending: list[str] = []  # texts of the chunk at out[-1], joined lazily
    compactions: dict[str, int] = {}  # compaction id -> its index in ``out``
    summaries: dict[str, list[t.ContentBlock]] = {}  # streamed summary chunks
    messages: dict[str, int] = {}  # session-directed message id -> its index in ``out``

    def settle() -> None:
        if pending:
            last = out[-1]
            assert isinstance(last, t.AgentMessageChunk | t.AgentThoughtChunk)
            out[-1] = msgspec.structs.replace(last, content=t.TextContent(text="".join(pending)))
            pending.clear()

    def end_turn() -> None:
        for index in turn_calls:
            call = out[index]
            assert isinstance(call, t.ToolCall)
            if call.status not in _DONE:
                out[index] = msgspec.structs.replace(
                    call, status="failed", raw_output=call.raw_output or {"error": INTERRUPTED}
                )
        turn_calls.clear()

    for record in records:
        if isinstance(record, Prompt):
            settle()
            end_turn()
            mid = record.message_id
            out.extend(t.UserMessageChunk(content=b, message_id=mid) for b in record.blocks)
        elif isinstance(record, TurnEnd):
            settle()
            end_turn()
        elif isinstance(record, Update):
            update = record.update
            if isinstance(update, t.AgentMessageChunk | t.AgentThoughtChunk):
                last = out[-1] if out else None
                if (
                    type(last) is type(update)
                    and isinstance(last, t.AgentMessageChunk | t.AgentThoughtChunk)
                    and last.message_id == update.message_id
                    and isinstance(last.content, t.TextContent)
                    and isinstance(update.content, t.TextContent)
                ):
                    if not pending:
                        pending.append(last.content.text)
                    pending.append(update.content.text)
                    continue
                settle()
                out.append(update)
            elif isinstance(update, t.ToolCallUpdateSessionUpdate) and update.tool_call_id in calls:
                index = calls[update.tool_call_id]
                call = out[index]
                assert isinstance(call, t.ToolCall)
                out[index] = _merge(call, update)
            elif isinstance(update, t.SessionInfoUpdate):
                info = _merge_info(info, update)
            elif isinstance(update, (*_STATE_UPDATES, t.Notice)):
                continue
            elif isinstance(update, t.CompactionSummaryChunk):
                summaries.setdefault(update.compaction_id, []).append(update.content)
            elif isinstance(update, t.CompactionUpdate) and update.compaction_id in compactions:
                index = compactions[update.compaction_id]
                out[index] = _patch_compaction(out[index], update)
            elif isinstance(update, t.SessionMessage | t.SessionMessageChunk):
                index = messages.get(update.message_id, -1)
                if index < 0:
                    settle()
                    messages[update.message_id] = len(out)
                    first = t.SessionMessage(message_id=update.message_id)
                    out.append(_patch_message(first, update))
                else:
                    out[index] = _patch_message(out[index], update)
            else:
                settle()
                if isinstance(update, t.ToolCall):
                    calls[update.tool_call_id] = len(out)
                    turn_calls.append(len(out))
                elif isinstance(update, t.CompactionUpdate):
                    compactions[update.compaction_id] = len(out)
                out.append(update)
    settle()
    if not live:
        end_turn()
    for index in calls.values():
        out[index] = _without_terminals(out[index])
    for compaction_id, index in compactions.items():
        compaction = out[index]
        assert isinstance(compaction, t.CompactionUpdate)
        if not compaction.summary and summaries.get(compaction_id):
            summary = _coalesce(summaries[compaction_id])
            out[index] = msgspec.structs.replace(compaction, summary=summary)
    if info is not None:
        out.append(info)
    return out


def _without_terminals(call: t.SessionUpdate) -> t.SessionUpdate:
    """Terminal ids die with their connection: show what the terminal printed instead."""
    assert isinstance(call, t.ToolCall)
    if isinstance(call.content, UnsetType) or not any(
        isinstance(c, t.Terminal) for c in call.content
    ):
        return call
    raw = call.raw_output
    output = raw.get("output") if isinstance(raw, dict) else None
    content: list[t.ToolCallContent] = []
    for item in call.content:
        if not isinstance(item, t.Terminal):
            content.append(item)
        elif isinstance(output, str) and output:
            fence = "```" + "`" * max(0, _longest_run(output, "`") - 2)
            text = f"{fence}\n{output.rstrip()}\n{fence}"
            content.append(t.Content(content=t.TextContent(text=text)))
    return msgspec.structs.replace(call, content=content)


def _longest_run(text: str, char: str) -> int:
    run = best = 0
    for c in text:
        run = run + 1 if c == char else 0
        best = max(best, run)
    return best


_FIELDS = ("kind", "status", "title", "name", "content", "locations", "raw_input", "raw_output")


def _merge(call: t.ToolCall, update: t.ToolCallUpdate) -> t.ToolCall:
    changes: dict[str, object] = {}
    for name in _FIELDS:
        value = getattr(update, name)
        if value is UNSET:
            continue
        if value is None:  # null clears (a title cannot be cleared)
            if name != "title":
                changes[name] = None if name == "name" else UNSET
            continue
        changes[name] = value
    return msgspec.structs.replace(call, **changes) if changes else call


def _patch_compaction(
    compaction: t.SessionUpdate, update: t.CompactionUpdate
) -> t.CompactionUpdate:
    """One compaction is replayed as one update: its patches folded together."""
    assert isinstance(compaction, t.CompactionUpdate)
    changes = {
        name: getattr(update, name)
        for name in ("status", "summary", "error")
        if getattr(update, name) is not UNSET
    }
    return msgspec.structs.replace(compaction, **changes)


_MESSAGE_FIELDS = (
    "sender_session_id",
    "recipient_session_id",
    "sender_message_id",
    "recipient_message_id",
    "content",
    "meta",
)


def _patch_message(
    message: t.SessionUpdate, update: t.SessionMessage | t.SessionMessageChunk
) -> t.SessionMessage:
    """One session-directed message is replayed as one ``session_message``: upserts
    applied in order (omitted: unchanged), chunks appended to its content."""
    assert isinstance(message, t.SessionMessage)
    if isinstance(update, t.SessionMessageChunk):
        content = message.content if isinstance(message.content, list) else []
        return msgspec.structs.replace(message, content=_coalesce([*content, update.content]))
    changes = {
        name: getattr(update, name)
        for name in _MESSAGE_FIELDS
        if getattr(update, name) is not UNSET
    }
    return msgspec.structs.replace(message, **changes)


def _coalesce(blocks: list[t.ContentBlock]) -> list[t.ContentBlock]:
    out: list[t.ContentBlock] = []
    for block in blocks:
        last = out[-1] if out else None
        if isinstance(block, t.TextContent) and isinstance(last, t.TextContent):
            out[-1] = t.TextContent(text=last.text + block.text)
        else:
            out.append(block)
    return out


def _merge_info(
    info: t.SessionInfoUpdate | None, update: t.SessionInfoUpdate
) -> t.SessionInfoUpdate:
    if info is None:
        return update
    return t.SessionInfoUpdate(
        title=info.title if update.title is UNSET else update.title,
        updated_at=info.updated_at if update.updated_at is UNSET else update.updated_at,
    )
