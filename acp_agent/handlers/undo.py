"""``/undo`` and ``/rewind``: taking back what turns did (``engine.checkpoints``).

``/undo`` puts the workspace back to before the last turn that changed it and not taken
back yet; again, one turn further back. ``/rewind`` lists the turns (prompt, time) and
goes back to before the chosen one: ``/rewind N [both|code|conversation]`` (N counts from
the latest turn, 1; ``both`` by default). A client that takes form elicitations is shown
a form instead of the list.

A path someone else changed after the turn left it is never overwritten without a yes:
the files are listed and the user asked (a form where the client takes form
elicitations, else a permission request, which the terminal mode asks at the keyboard);
the ones not confirmed are kept. Every path put back is a ``tool_call`` carrying its diff
(the editor shows what changed back); one that cannot be (known by its hash only) is a
failed one saying why. The model is told what was taken back (a note in its history). The
conversation part of a rewind cuts the model's history where the chosen prompt began
(a turn folded into a compaction's summary can no longer be cut) and is recorded
(``Rewind``), so ``session/load`` shows it. Both refuse while a turn runs
(``prompting``).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Any

from .. import log
from ..client import elicitation_modes
from ..conversation import TextPart, UserMessage
from ..engine.checkpoints import Step, plan, put_back
from ..errors import RemoteError
from ..escaping import escaped
from ..protocol import types as t
from ..sessions.records import Checkpoint, Rewind, now_iso
from ..sessions.session import Session
from ..sessions.transcript import rewind_message
from ..sessions.turnlog import UNKNOWN, TurnMark
from ..tools.base import within

if TYPE_CHECKING:
    from .services import Services

MAX_DIFF_BYTES = 512 * 1024
QUESTION = "undo"
"""The name of the tool call that asks to overwrite files changed since (the terminal
mode asks it even under ``--yes``)."""
WHAT = ("both", "code", "conversation")


async def undo(sv: Services, session: Session) -> None:
    live = session.turnlog.live()
    if not live:
        await session.say("Nothing to undo: no turn of this session changed the workspace.")
        return
    checkpoint = live[-1]
    mark = _mark(session, checkpoint.turn)
    done = await put_back_turns(sv, session, [checkpoint])
    quoted = _quote(mark.text) if mark else "an earlier request"
    await session.say(f"Undid the changes of {quoted}: {done.summary()}")
    session.add_message(UserMessage([TextPart(
        f"[The user undid what you changed for their request {quoted}: {done.summary()} "
        "Those files are as they were before it.]")]))  # fmt: skip


async def rewind(sv: Services, session: Session, rest: str) -> None:
    turns = listed(session)
    if not turns:
        await session.say("Nothing to rewind: this session has no turns yet.")
        return
    words = rest.split()
    chosen: tuple[int, str] | None = None
    if words and words[0].isdigit() and (len(words) == 1 or words[1] in WHAT):
        chosen = int(words[0]), words[1] if len(words) > 1 else "both"
    elif not words and "form" in elicitation_modes(sv.client.capabilities):
        chosen = await _ask_turn(sv, session, turns)
        if chosen is None:
            await session.say("Nothing was rewound.")
            return
    if chosen is None or not 1 <= chosen[0] <= len(turns):
        await session.say(_listing(turns) if not words else
                          f"`/rewind {rest}`: no such turn.\n\n" + _listing(turns))  # fmt: skip
        return
    back, what = chosen
    mark = turns[-back]
    if what != "code" and mark.history is None:
        await session.say(f"The conversation before {_quote(mark.text)} was compacted into a "
                          "summary and cannot be cut there; `/rewind "
                          f"{back} code` puts the workspace back.")  # fmt: skip
        return
    taken = [m.turn for m in session.turnlog.marks[session.turnlog.marks.index(mark) :]]
    files = 0
    if what != "conversation":
        later = [c for c in session.turnlog.live() if c.turn in taken]
        files = len((await put_back_turns(sv, session, later)).restored) if later else 0
    length = mark.history if what != "code" else None
    if length is not None:
        session.truncate_history(length)
    record = Rewind(turn=mark.turn, prompt=mark.text, taken=back,
                    length=length, files=files, message_id=session.new_message_id(),
                    at=now_iso())  # fmt: skip
    session.record_rewind(record)
    await session.emit_fn(session.id, rewind_message(record))  # recorded as the Rewind
    workspace = "The workspace was put back too." if files else "The files were left as they are."
    if length is not None:
        session.add_message(UserMessage([TextPart(
            f"[The user rewound the conversation to before their request {_quote(mark.text)}: "
            f"{back} turn(s) were taken back. {workspace}]")]))  # fmt: skip


def listed(session: Session) -> list[TurnMark]:
    """The turns ``/rewind`` offers: those that reached the model or changed files."""
    changed = {c.turn for c in session.turnlog.checkpoints}
    return [m for m in session.turnlog.turns(len(session.history))
            if m.history is not None or m.turn in changed]  # fmt: skip


def _listing(turns: list[TurnMark]) -> str:
    lines = [f"{n}. {_when(m.at)} — {_quote(m.text)}" for n, m in
             zip(range(len(turns), 0, -1), turns, strict=True)]  # fmt: skip
    return ("Turns of this session (1 is the latest):\n" + "\n".join(lines) + "\n\n"
            "`/rewind N` goes back to before turn N: the workspace and the conversation; "
            "`/rewind N code` the workspace only, `/rewind N conversation` the conversation only.")


async def _ask_turn(
    sv: Services, session: Session, turns: list[TurnMark]
) -> tuple[int, str] | None:
    options = [t.EnumOption(const=str(n), title=f"{_when(m.at)} — {_clip(m.text, 60)}")
               for n, m in zip(range(len(turns), 0, -1), turns, strict=True)]  # fmt: skip
    schema = t.ElicitationSchema(
        type="object",
        properties={
            "turn": t.StringPropertySchema(title="Go back to before", one_of=options[::-1]),
            "restore": t.StringPropertySchema(
                title="Put back", default="both", one_of=[
                    t.EnumOption(const="both", title="The workspace and the conversation"),
                    t.EnumOption(const="code", title="The workspace only"),
                    t.EnumOption(const="conversation", title="The conversation only")]),
        },
        required=["turn", "restore"],
    )  # fmt: skip
    answer = await _elicit(sv, session, "Rewind to before which turn?", schema)
    if answer is None or str(answer.get("turn", "")) not in {o.const for o in options}:
        return None
    what = answer.get("restore")
    return int(answer["turn"]), what if what in WHAT else "both"


# ---------------------------------------------------------------------- putting back


class Done:
    def __init__(self) -> None:
        self.restored: list[str] = []
        self.kept: list[str] = []
        self.failed: list[str] = []

    def summary(self) -> str:
        parts = [f"{len(self.restored)} file(s) put back"]
        if self.kept:
            parts.append(f"kept as they are now, changed since: {', '.join(self.kept)}")
        if self.failed:
            parts.append(f"not restorable: {', '.join(self.failed)}")
        return "; ".join(parts) + "."


async def put_back_turns(sv: Services, session: Session, checkpoints: list[Checkpoint]) -> Done:
    """Put the workspace back to before ``checkpoints`` (oldest first), asking about
    files changed since; each path reported as a tool call; they are then taken back."""
    store = sv.turns.checkpoints
    steps = await asyncio.to_thread(plan, checkpoints, session.id, store.settings.max_file_size)
    conflicts = [s for s in steps if s.conflict and s.restorable]
    allowed = await _confirm(sv, session, conflicts) if conflicts else set()
    done = Done()
    for step in steps:
        shown = _display(session, step.path)
        if not step.restorable:
            done.failed.append(shown)
            why = (f"{shown} cannot be put back: it was {_size(step.target.size)}, kept by its "
                   "hash only (over checkpoints.max-file-size, or binary).")  # fmt: skip
            await _report(session, step, f"Not restorable: {shown}", "failed", text=why)
        elif step.conflict and step.path not in allowed:
            done.kept.append(shown)
            await _report(session, step, f"Kept {shown}", "failed",
                          text=f"{shown} changed after the agent's turn; it was kept.")  # fmt: skip
        else:
            try:
                old, new = await asyncio.to_thread(_apply, sv, session, step)
            except OSError as exc:
                done.failed.append(shown)
                await _report(session, step, f"Not restored: {shown}", "failed",
                              text=f"{shown}: {exc.strerror or exc}")  # fmt: skip
                continue
            done.restored.append(shown)
            verb = "Remove" if step.target.kind == "absent" else "Restore"
            diff = t.Diff(path=step.path, old_text=old, new_text=new or "")
            await _report(session, step, f"Undo: {verb.lower()} {shown}", "completed", diff=diff)
    session.record_undone([c.turn for c in checkpoints])
    await asyncio.to_thread(store.forget, session)
    return done


def _apply(sv: Services, session: Session, step: Step) -> tuple[str | None, str | None]:
    parent = _existing(os.path.dirname(step.path))
    if not any(within(parent, os.path.realpath(root)) for root in session.roots):
        # a directory on the way became a link out of the roots since: touch nothing there
        raise OSError(0, f"its directory now leads to {parent}, outside the session's roots")
    old = _text(step.path) if step.current.kind == "file" else None
    put_back(sv.turns.checkpoints, session.id, step)
    new = _text(step.path) if step.target.kind == "file" else None
    return old, new


def _existing(directory: str) -> str:
    """The real path of ``directory``'s nearest existing ancestor (itself, if it exists)."""
    while not os.path.lexists(directory) and os.path.dirname(directory) != directory:
        directory = os.path.dirname(directory)
    return os.path.realpath(directory)


def _text(path: str) -> str:
    try:
        size = os.path.getsize(path)
        if size > MAX_DIFF_BYTES:
            return f"({_size(size)})"
        with open(path, "rb") as fh:
            data = fh.read()
        return data.decode("utf-8") if b"\0" not in data else f"(binary file, {_size(size)})"
    except UnicodeDecodeError:
        return f"(binary file, {_size(size)})"
    except OSError:
        return ""


async def _report(session: Session, step: Step, title: str, status: Any, *,
                  diff: t.Diff | None = None, text: str | None = None) -> None:  # fmt: skip
    content: list[Any] = [diff] if diff is not None else []
    if text is not None:
        content.append(t.Content(content=t.TextContent(text=text)))
    await session.emit(t.ToolCall(
        tool_call_id=session.new_tool_call_id(), title=escaped(title),
        kind="delete" if step.target.kind == "absent" else "edit", status=status,
        content=content, locations=[t.ToolCallLocation(path=escaped(step.path))],
        raw_input={"path": step.path}))  # fmt: skip


async def _confirm(sv: Services, session: Session, conflicts: list[Step]) -> set[str]:
    """The conflicting paths the user says to put back anyway."""
    names = {_display(session, s.path): s.path for s in conflicts}
    cut = any(s.expected.kind == UNKNOWN.kind for s in conflicts)
    message = (f"{len(names)} file(s) changed after the agent's turn: {', '.join(names)}. "
               + ("(A turn was cut short before its end was recorded: what it left there "
                  "is not known.) " if cut else "")
               + "Put them back anyway? Those not chosen are kept as they are now.")  # fmt: skip
    if "form" in elicitation_modes(sv.client.capabilities):
        field = t.MultiSelectPropertySchema(
            title="Put back anyway", default=[],
            items=t.TitledMultiSelectItems(any_of=[t.EnumOption(const=p, title=n)
                                                   for n, p in names.items()]))  # fmt: skip
        schema = t.ElicitationSchema(type="object", properties={"overwrite": field})
        answer = await _elicit(sv, session, message, schema)
        chosen = answer.get("overwrite") if answer else None
        return {p for p in chosen if p in names.values()} if isinstance(chosen, list) else set()
    call_id = session.new_tool_call_id()
    where = [t.ToolCallLocation(path=escaped(p)) for p in names.values()]
    title = escaped(f"Undo: overwrite {len(names)} file(s) changed since")
    shown = t.ToolCall(tool_call_id=call_id, title=title, kind="edit", status="pending",
                       name=QUESTION, locations=where,
                       content=[t.Content(content=t.TextContent(text=escaped(message)))])
    await session.emit(shown)
    options = [t.PermissionOption(option_id="overwrite", name="Put them back", kind="allow_once"),
               t.PermissionOption(option_id="keep", name="Keep them", kind="reject_once")]
    update = t.ToolCallUpdate(tool_call_id=call_id, title=shown.title, kind="edit", name=QUESTION,
                              status="pending", locations=shown.locations, content=shown.content)
    try:
        outcome = await sv.client.request_permission(session.id, update, options)
    except RemoteError as exc:
        log.warning("could not ask about files changed since; they are kept", error=exc.message)
        outcome = None
    yes = isinstance(outcome, t.SelectedPermissionOutcome) and outcome.option_id == "overwrite"
    await session.emit(t.ToolCallUpdateSessionUpdate(
        tool_call_id=call_id, status="completed" if yes else "failed"))  # fmt: skip
    return set(names.values()) if yes else set()


async def _elicit(sv: Services, session: Session, message: str,
                  schema: t.ElicitationSchema) -> dict[str, Any] | None:  # fmt: skip
    request = t.ElicitationFormMode(message=message, requested_schema=schema,
                                    session_id=session.id)  # fmt: skip
    try:
        raw = await sv.client.call("elicitation/create", request, dict[str, Any])
    except RemoteError as exc:
        log.warning("the form could not be shown", error=exc.message)
        return None
    content = raw.get("content")
    return content if raw.get("action") == "accept" and isinstance(content, dict) else None


# ---------------------------------------------------------------------- words


def _mark(session: Session, turn: str) -> TurnMark | None:
    return next((m for m in session.turnlog.marks if m.turn == turn), None)


def _display(session: Session, path: str) -> str:
    rel = os.path.relpath(path, session.cwd)
    return path if rel.startswith("..") else rel


def _quote(text: str) -> str:
    return f"\u201c{_clip(text, 80)}\u201d"


def _clip(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def _when(at: str) -> str:
    """An ISO time (UTC) as the local time of day (and date, when not today)."""
    try:
        stamp = time.mktime(time.strptime(at[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    except ValueError:
        return at
    local = time.localtime(stamp)
    same_day = time.strftime("%Y-%m-%d", local) == time.strftime("%Y-%m-%d")
    return time.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M", local)


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"
