"""What the user saw, from a session log: the transcript ``session/load`` replays.

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
subagents (nothing of children for the others). Titles (the agent's and the client's)
are one ``session_info_update`` at the end.

A long log streams (:func:`load_batches`): a first pass (:class:`Uses`) notes where each
update is last changed, a second yields each update once nothing later can change it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, cast

import msgspec

from ..protocol import UNSET, UnsetType
from ..protocol import types as t
from .records import ChildUpdate, ClientTitle, Prompt, Record, TurnEnd, Update

INTERRUPTED = "The agent stopped before this tool call finished."

#: Updates that describe current state, not history: the load response (and the
#: ``usage_update`` after it) carries their latest values; notices are live only.
_SKIPPED = (
    t.UsageUpdate,
    t.CurrentModeUpdate,
    t.ConfigOptionUpdate,
    t.AvailableCommandsUpdate,
    t.Notice,
)
_DONE = ("completed", "failed")
Pair = tuple[str, t.SessionUpdate]


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
    out = [u for batch in transcript_batches(records, live=live) for u in batch]
    if caps is None:
        return out
    return [shown for u in out for shown in for_client(u, caps)]


def transcripts(
    session_id: str,
    records: Iterable[Record],
    caps: t.ClientCapabilities,
    *,
    live: bool = False,
) -> list[Pair]:
    """:func:`transcript` as ``(session id, update)`` pairs, with the transcript of each
    subagent the log kept (its ``ChildUpdate`` records) right after the update that
    announced it (on its immediate parent's transcript; a grandchild's within its
    parent's): associations before child traffic, each session in its own order. A child
    whose announcement is not there is left out; so is every child for a client without
    ``subagents``."""
    records = list(records)
    kept = Uses()  # only for the children's records: this transcript is not streamed
    for _ in kept.tap(records):
        pass
    batches = load_batches(session_id, records, caps, kept.children, live=live)
    return [pair for batch in batches for pair in batch]


def load_batches(
    session_id: str,
    records: Iterable[Record],
    caps: t.ClientCapabilities,
    kept: dict[str, list[Record]],
    *,
    live: bool = False,
    uses: Uses | None = None,
    batch: int = 512,
) -> Iterator[list[Pair]]:
    """:func:`transcripts` in batches, from the records ``kept`` for each child; streamed
    when ``uses`` is the first pass over the same records (which also keeps the
    children's: ``uses.children``) and ``records`` the second."""
    children: dict[str, list[t.SessionUpdate]] = {}
    if isinstance(caps.subagents, t.SubagentCapabilities):
        children = {c: transcript(rs, caps, live=live) for c, rs in kept.items()}

    def place(owner: str, updates: list[t.SessionUpdate], out: list[Pair]) -> None:
        for update in updates:
            out.append((owner, update))
            if isinstance(update, t.SubagentUpdate) and update.session_id in children:
                place(update.session_id, children.pop(update.session_id), out)

    for updates in transcript_batches(records, live=live, uses=uses, batch=batch):
        out: list[Pair] = []
        place(session_id, [shown for u in updates for shown in for_client(u, caps)], out)
        yield out


class Uses:
    """For each tool call, compaction and session-directed message id, the position of
    the last record naming it: what :func:`transcript_batches` needs to know an update
    can no longer change; and the subagents' records (``ChildUpdate``), by child."""

    def __init__(self) -> None:
        self.last: dict[str, int] = {}
        self.count = 0
        self.children: dict[str, list[Record]] = {}

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
                elif of is t.SessionMessage or of is t.SessionMessageChunk:
                    last["m" + update.message_id] = count
            elif type(record) is ChildUpdate:
                kept = self.children.setdefault(record.session_id, [])
                kept.append(Update(update=record.update))
            count += 1
            self.count = count
            yield record


def transcript_batches(
    records: Iterable[Record],
    *,
    live: bool = False,
    uses: Uses | None = None,
    batch: int = 512,
) -> Iterator[list[t.SessionUpdate]]:
    """The transcript as recorded, in batches. With the :class:`Uses` of the same records (a first
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
    messages: dict[str, int] = {}  # session-directed message id -> its update's number
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
            elif isinstance(update, t.SessionMessage):
                key = "m" + update.message_id
            else:
                continue
            if last.get(key, -1) >= at or base + i in turn_calls:
                return i
        return max(0, len(out) - 1)

    for position, record in enumerate(records):
        kind = type(record)
        if kind is not Update and kind is not Prompt and kind is not TurnEnd:
            if kind is ClientTitle:  # shown as the session_info_update the client was sent
                named = cast(ClientTitle, record)
                shown = t.SessionInfoUpdate(title=named.title, updated_at=named.at)
                info = _merge_info(info, shown)
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
            elif isinstance(update, _SKIPPED):
                continue
            elif isinstance(update, t.CompactionSummaryChunk):
                summaries.setdefault(update.compaction_id, []).append(update.content)
            elif isinstance(update, t.CompactionUpdate) and update.compaction_id in compactions:
                index = compactions[update.compaction_id] - base
                out[index] = _patch_compaction(out[index], update)
            elif isinstance(update, t.SessionMessage | t.SessionMessageChunk):
                number = messages.get(update.message_id, -1)
                if number < 0:
                    settle()
                    messages[update.message_id] = base + len(out)
                    first = t.SessionMessage(message_id=update.message_id)
                    out.append(_patch_message(first, update))
                else:
                    out[number - base] = _patch_message(out[number - base], update)
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
    from ..tools.plan import checklist_of

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
