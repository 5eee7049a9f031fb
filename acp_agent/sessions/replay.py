"""From a session log back to a live session: its state (:func:`restore`, or
:func:`scan`, which also notes what a streamed replay of the same records needs).
What the user saw is :mod:`acp_agent.sessions.transcript`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from ..conversation import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
    apply_stubs,
)
from ..protocol import UNSET
from ..protocol import types as t
from .records import (
    AddMessage,
    Checkpoint,
    ClientTitle,
    Header,
    Instructions,
    Prompt,
    PruneResults,
    Record,
    ReplaceHistory,
    Rewind,
    Roots,
    Settings,
    Steer,
    Touched,
    TruncateHistory,
    TurnEnd,
    Undone,
    Update,
    UsageTotals,
)
from .steers import NOT_ACTED_UPON
from .transcript import INTERRUPTED, Uses
from .turnlog import TurnLog

__all__ = ["INTERRUPTED", "State", "prompt_text", "restore", "scan"]


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
    titled_by_client: bool = False
    first_prompt: str | None = None
    mode: str | None = None
    model: str | None = None
    thinking: str | None = None
    sandbox: str | None = None
    instructions: Instructions | None = None
    usage: UsageTotals = field(
        default_factory=lambda: UsageTotals(context_tokens=0, input_tokens=0, output_tokens=0)
    )
    next_tool_id: int = 1
    next_message_id: int = 1
    turnlog: TurnLog = field(default_factory=TurnLog)


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
    steers: dict[str, Steer] = {}  # accepted, not yet shown nor the prompt of a turn
    in_turn = False
    history = state.history
    for record in records:
        kind = type(record)  # records are final classes: ``is`` is isinstance, faster
        if kind is Update:
            update: Any = cast(Update, record).update
            of = type(update)
            if of is t.AgentMessageChunk or of is t.AgentThoughtChunk:
                state.next_message_id = _after(state.next_message_id, update.message_id)
            elif of is t.UserMessageChunk:  # a steer joined (see ``steers``)
                steers.pop(update.message_id, None)
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
            steers.pop(record.message_id, None)
            if in_turn:  # the process died in the turn before
                open_calls = _unread(history, open_calls, steers)
            in_turn = True
            state.next_message_id = _after(state.next_message_id, record.message_id)
            text = prompt_text(record.blocks)
            if state.first_prompt is None:
                state.first_prompt = text
            state.turnlog.prompt(record.message_id, text, record.at, record.history)
        elif isinstance(record, TruncateHistory):
            _close(history, open_calls)
            open_calls = []
            del history[record.length :]
            state.turnlog.rewritten(record.length)
        elif isinstance(record, ReplaceHistory):
            open_calls = []
            history[:] = record.messages
            state.turnlog.rewritten()
        elif isinstance(record, Checkpoint):
            state.turnlog.checkpoint(record)
        elif isinstance(record, Touched):
            state.turnlog.touch(record)
        elif isinstance(record, Undone):
            state.turnlog.took_back(record)
        elif isinstance(record, Rewind):
            state.turnlog.rewound(record)
            state.next_message_id = _after(state.next_message_id, record.message_id)
        elif isinstance(record, Settings):
            state.mode, state.model = record.mode, record.model
            state.thinking, state.sandbox = record.thinking, record.sandbox
        elif isinstance(record, UsageTotals):
            state.usage = record
        elif isinstance(record, Instructions):
            state.instructions = record
        elif isinstance(record, PruneResults):
            history[:] = apply_stubs(history, set(record.call_ids))
        elif isinstance(record, Steer):
            steers[record.message_id] = record
            state.next_message_id = _after(state.next_message_id, record.message_id)
        elif isinstance(record, TurnEnd):
            in_turn = False
        elif isinstance(record, Roots):
            state.cwd = record.cwd
            state.additional_directories = list(record.additional_directories)
        elif isinstance(record, ClientTitle):
            state.title, state.titled_by_client = record.title, True
        elif isinstance(record, Header):
            state.cwd, state.created_at = record.cwd, record.created_at
            state.additional_directories = list(record.additional_directories)
            state.forked_from = record.forked_from
    _unread(history, open_calls, steers)
    if in_turn:  # the process died mid-turn: the message it was streaming (at most one,
        state.next_message_id += 1  # buffered < 100 ms) may have an id the log lacks
    return state


def _close(history: list[Message], calls: list[ToolCallPart]) -> None:
    """Give unanswered tool calls (the process died mid-turn) a result: the model APIs
    reject a history with dangling calls. Applied in log order, so positions match what
    the writing process held in memory."""
    for call in calls:
        history.append(ToolResultMessage(call.call_id, call.name, [TextPart(INTERRUPTED)], True))


def _unread(
    history: list[Message], calls: list[ToolCallPart], steers: dict[str, Steer]
) -> list[ToolCallPart]:
    """The process died mid-turn: its unanswered calls get a result (:func:`_close`),
    then the messages sent into it that never joined are kept as not acted upon (as
    ``steers.settle`` would have). Returns the calls still open (none)."""
    _close(history, calls)
    for steer in steers.values():
        text = prompt_text(steer.blocks)
        history.append(UserMessage([TextPart(NOT_ACTED_UPON), TextPart(text)]))
    steers.clear()
    return []


def prompt_text(blocks: Iterable[t.ContentBlock]) -> str:
    """The text of a prompt, for titles (resource links stand in when there is none)."""
    texts = [b.text for b in blocks if isinstance(b, t.TextContent)]
    if not any(s.strip() for s in texts):
        texts = [f"@{b.name}" for b in blocks if isinstance(b, t.ResourceLink)]
    return " ".join(texts).strip()
