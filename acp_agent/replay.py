"""From a session log back to a live session: its state (:func:`restore`) and what the
user saw (:func:`transcript`, replayed by ``session/load``).

The transcript is the log's updates in their original order with their original ids,
materialized: the chunks of one message become one chunk, a tool call becomes one
``tool_call`` carrying its final state, and state-only updates (usage, modes, config
options, commands) are left to the load response. A tool call still running when its turn
was interrupted (the process died) is shown as failed, and terminals embedded in tool
calls (released long ago, unknown to the new connection) become their output as text.
Draft-only updates pass :func:`draft_allowed` for the loading client; notices are never
replayed; a compaction is one ``compaction_update`` (its patches and summary chunks
folded in) at its original position.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec

from .conversation import AssistantMessage, Message, TextPart, ToolCallPart, ToolResultMessage
from .protocol import UNSET, UnsetType
from .protocol import types as t
from .records import (
    AddMessage,
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


def draft_allowed(update: t.SessionUpdate, caps: t.ClientCapabilities) -> bool:
    """Whether a replayed update may go to a client with these capabilities. The one gate
    for draft-only updates; notices are live-only and never replayed."""
    if isinstance(update, t.Notice):
        return False
    if isinstance(update, t.CompactionUpdate | t.CompactionSummaryChunk):
        session = caps.session
        return isinstance(session, t.ClientSessionCapabilities) and bool(session.compaction)
    if isinstance(update, t.PlanUpdate | t.PlanRemoved):
        return bool(caps.plan)
    if isinstance(update, t.SubagentUpdate | t.SessionMessage | t.SessionMessageChunk):
        return bool(caps.subagents)
    return True


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


def scan(records: Iterable[Record]) -> tuple[State, Uses]:
    """One pass over a log: its :class:`State`, and the :class:`Uses` a streamed replay of
    the same records needs."""
    uses = Uses()
    return restore(uses.tap(records)), uses


def restore(records: Iterable[Record]) -> State:
    state = State()
    open_calls: list[ToolCallPart] = []  # asked for by the model, not answered yet
    in_turn = False
    history = state.history
    for record in records:
        kind = type(record)  # records are final classes: ``is`` is isinstance, faster
        if kind is Update:
            update: Any = cast(Update, record).update
            of = type(update)
            if of is t.AgentMessageChunk or of is t.AgentThoughtChunk:
                state.next_message_id = _after(state.next_message_id, update.message_id)
            elif of is t.ToolCall:
                state.next_tool_id = _after(state.next_tool_id, update.tool_call_id)
            elif of is t.SessionInfoUpdate and update.title is not UNSET:
                state.title = update.title
        elif kind is AddMessage:
            message = cast(AddMessage, record).message
            if isinstance(message, ToolResultMessage):
                open_calls = [c for c in open_calls if c.call_id != message.call_id]
            else:
                _close(history, open_calls)
                open_calls = []
                if isinstance(message, AssistantMessage):
                    open_calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
            history.append(message)
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
    allow: Callable[[t.SessionUpdate], bool] = lambda _: True,
    *,
    live: bool = False,
) -> list[t.SessionUpdate]:
    """The updates to replay, in order. ``live``: another process is running the session,
    so its last turn may still be in progress (its tool calls are not failed)."""
    return [update for batch in transcript_batches(records, allow, live=live) for update in batch]


class Uses:
    """For each tool call and compaction id, the position of the last record naming it:
    what :func:`transcript_batches` needs to know an update can no longer change."""

    def __init__(self) -> None:
        self.last: dict[str, int] = {}
        self.count = 0

    def tap(self, records: Iterable[Record]) -> Iterator[Record]:
        """``records``, counted and noted on the way through."""
        last = self.last
        count = self.count
        for record in records:
            if type(record) is Update:
                update: Any = record.update
                of = type(update)
                if of is t.ToolCall or of is t.ToolCallUpdateSessionUpdate:
                    last["t" + update.tool_call_id] = count
                elif of is t.CompactionUpdate or of is t.CompactionSummaryChunk:
                    last["c" + update.compaction_id] = count
            count += 1
            self.count = count
            yield record


def transcript_batches(
    records: Iterable[Record],
    allow: Callable[[t.SessionUpdate], bool] = lambda _: True,
    *,
    live: bool = False,
    uses: Uses | None = None,
    batch: int = 512,
) -> Iterator[list[t.SessionUpdate]]:
    """:func:`transcript` in batches. With the :class:`Uses` of the same records (a first
    pass), each update is yielded as soon as nothing later in the log can change it (at
    turn boundaries, ``batch`` at a time): a long log is replayed without its transcript,
    or its records, ever whole in memory. Without, everything comes at the end."""
    out: list[t.SessionUpdate] = []  # updates not yielded yet; out[0] is update number base
    base = 0
    calls: dict[str, int] = {}  # tool call id -> its update's number
    turn_calls: list[int] = []
    info: t.SessionInfoUpdate | None = None
    pending: list[str] = []  # texts of the chunk at out[-1], joined lazily
    compactions: dict[str, int] = {}  # compaction id -> its update's number
    summaries: dict[str, list[t.ContentBlock]] = {}  # streamed summary chunks
    last = uses.last if uses is not None else None

    def settle() -> None:
        if pending:
            chunk = out[-1]
            assert isinstance(chunk, t.AgentMessageChunk | t.AgentThoughtChunk)
            out[-1] = msgspec.structs.replace(chunk, content=t.TextContent(text="".join(pending)))
            pending.clear()

    def end_turn() -> None:
        for index in turn_calls:
            call = out[index - base]
            assert isinstance(call, t.ToolCall)
            if call.status not in _DONE:
                out[index - base] = msgspec.structs.replace(
                    call, status="failed", raw_output=call.raw_output or {"error": INTERRUPTED}
                )
        turn_calls.clear()

    def final(update: t.SessionUpdate, position: int) -> t.SessionUpdate:
        """What an update is once nothing more can change it (the last of an id only)."""
        if isinstance(update, t.ToolCall) and calls.get(update.tool_call_id) == position:
            return _without_terminals(update)
        if (
            isinstance(update, t.CompactionUpdate)
            and compactions.get(update.compaction_id) == position
            and not update.summary
            and summaries.get(update.compaction_id)
        ):
            return msgspec.structs.replace(
                update, summary=_coalesce(summaries[update.compaction_id])
            )
        return update

    def done(at: int) -> int:
        """How many of ``out`` nothing at or after record ``at`` can change."""
        assert last is not None
        for i, update in enumerate(out[:-1]):  # the last one may still grow
            if isinstance(update, t.ToolCall):
                key = "t" + update.tool_call_id
            elif isinstance(update, t.CompactionUpdate):
                key = "c" + update.compaction_id
            else:
                continue
            if last.get(key, -1) >= at or base + i in turn_calls:
                return i
        return max(0, len(out) - 1)

    for position, record in enumerate(records):
        kind = type(record)
        if kind is not Update and kind is not Prompt and kind is not TurnEnd:
            continue  # the model's history, settings, usage: not shown
        if kind is not Update:
            settle()
            end_turn()
            if last is not None and len(out) > batch:
                ready = done(position)
                if ready:
                    yield [final(u, base + i) for i, u in enumerate(out[:ready])]
                    del out[:ready]
                    base += ready
            if kind is Prompt:
                prompt = cast(Prompt, record)
                mid = prompt.message_id
                out.extend(t.UserMessageChunk(content=b, message_id=mid) for b in prompt.blocks)
        else:
            update = cast(Update, record).update
            if isinstance(update, t.AgentMessageChunk | t.AgentThoughtChunk):
                prior = out[-1] if out else None
                if (
                    type(prior) is type(update)
                    and isinstance(prior, t.AgentMessageChunk | t.AgentThoughtChunk)
                    and prior.message_id == update.message_id
                    and isinstance(prior.content, t.TextContent)
                    and isinstance(update.content, t.TextContent)
                ):
                    if not pending:
                        pending.append(prior.content.text)
                    pending.append(update.content.text)
                    continue
                settle()
                out.append(update)
            elif isinstance(update, t.ToolCallUpdateSessionUpdate) and update.tool_call_id in calls:
                index = calls[update.tool_call_id] - base
                call = out[index]
                assert isinstance(call, t.ToolCall)
                out[index] = _merge(call, update)
            elif isinstance(update, t.SessionInfoUpdate):
                info = _merge_info(info, update)
            elif isinstance(update, _STATE_UPDATES) or not allow(update):
                continue
            elif isinstance(update, t.CompactionSummaryChunk):
                summaries.setdefault(update.compaction_id, []).append(update.content)
            elif isinstance(update, t.CompactionUpdate) and update.compaction_id in compactions:
                index = compactions[update.compaction_id] - base
                out[index] = _patch_compaction(out[index], update)
            else:
                settle()
                if isinstance(update, t.ToolCall):
                    calls[update.tool_call_id] = base + len(out)
                    turn_calls.append(base + len(out))
                elif isinstance(update, t.CompactionUpdate):
                    compactions[update.compaction_id] = base + len(out)
                out.append(update)
    settle()
    if not live:
        end_turn()
    rest = [final(u, base + i) for i, u in enumerate(out)]
    if info is not None:
        rest.append(info)
    yield rest


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
