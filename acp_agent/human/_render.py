"""What a person sees of a turn when the output is not a terminal: plain text, and JSON
lines for scripts. The state every view keeps (tool calls, usage) lives in :class:`View`.

Plain output: streamed text as it comes, thoughts, the plan, each tool call once when it
is done (with its diff or output), notices, and a footer with the stop reason and usage.
Lines of the front end's own (notes, questions) go to stderr. When stdout is not a
terminal (``answer_only``), stdout is the answer alone, messages separated by a blank
line; thoughts, the plan, tool calls, notices and the footer go to stderr with the rest.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

import msgspec
from msgspec import UnsetType

from ..escaping import escaped
from ..protocol import types as t

T = TypeVar("T")

STATUS_MARK = {"pending": "…", "in_progress": "▶", "completed": "✓", "failed": "✗"}
PLAN_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class Style:
    def __init__(self, stream: TextIO) -> None:
        self.color = stream.isatty() and not os.environ.get("NO_COLOR")

    def __call__(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def dim(self, text: str) -> str:
        return self("2", text)

    def bold(self, text: str) -> str:
        return self("1", text)


@dataclass
class Call:
    """A tool call as known so far: ``tool_call`` then ``tool_call_update``s merged.
    ``None`` means not told yet."""

    title: str | None = None
    name: str | None = None
    kind: t.ToolKind | None = None
    status: t.ToolCallStatus | None = None
    content: list[t.ToolCallContent] | None = None
    raw_output: Any = None

    def merge(self, u: t.ToolCall | t.ToolCallUpdateSessionUpdate) -> None:
        title = _given(u.title, self.title)
        self.title = None if title is None else escaped(title)  # never shown raw
        self.name = _given(u.name, self.name)
        self.kind = _given(u.kind, self.kind)
        self.status = _given(u.status, self.status)
        self.content = _given(u.content, self.content)
        self.raw_output = _given(u.raw_output, self.raw_output)

    @property
    def label(self) -> str:
        return self.title if self.title is not None else self.name or "tool"

    @property
    def outcome(self) -> tuple[bool, str]:
        """``(succeeded, why not)``: a command that exits non-zero (or by a signal) failed,
        whatever the call's status says."""
        if self.status == "failed":
            return False, ""
        raw = self.raw_output
        if isinstance(raw, dict):
            if raw.get("signal"):
                return False, f"killed by {raw['signal']}"
            code = raw.get("exitCode")
            if isinstance(code, int) and code != 0:
                return False, f"exit {code}"
        return True, ""


def _given(value: T | UnsetType | None, current: T | None) -> T | None:
    """An update's field replaces what we knew only when it was sent, and not as null."""
    return current if value is None or isinstance(value, UnsetType) else value


def numbers(n: int) -> str:
    return f"{n:,}"


class View:
    """What every view knows of the session: its tool calls, its usage and its plan."""

    def __init__(self) -> None:
        self.calls: dict[str, Call] = {}
        self.usage: t.UsageUpdate | None = None
        self.context_fresh = False  # a usage_update came during this turn
        self.cost_before = 0.0  # the session's cost when this turn began
        self.plan: list[t.PlanEntry] | None = None
        self.cancelling = False
        self.session_id = ""
        self.cwd = ""  # paths inside it are shown relative to it

    def begin_turn(self) -> None:
        self.context_fresh = False
        self.cancelling = False
        self.plan = None
        cost = self.usage.cost if self.usage is not None else None
        self.cost_before = cost.amount if isinstance(cost, t.Cost) else 0.0

    def track(self, u: t.SessionUpdate) -> tuple[Call, t.ToolCallStatus | None] | None:
        """Keep what ``u`` tells; for a tool call its merged state and its old status."""
        match u:
            case t.UsageUpdate():
                self.usage = u
                self.context_fresh = True
            case t.Plan(entries=entries):
                self.plan = entries
            case t.ToolCall() | t.ToolCallUpdateSessionUpdate():
                call = self.calls.setdefault(u.tool_call_id, Call())
                before = call.status
                call.merge(u)
                return call, before
        return None

    def footer(self, result: t.PromptResponse) -> list[str]:
        """The footer's parts, this turn's figures: tokens, the context when measured
        during this turn (a turn cancelled before the model answered has no new figure),
        the turn's cost (and the session's when it differs). Empty for an answer the
        agent gave by itself (a command: no usage)."""
        if not isinstance(result.usage, t.Usage) and result.stop_reason == "end_turn":
            return []
        parts = [f"stop: {result.stop_reason}"]
        if usage := result.usage:
            parts.append(
                f"tokens: {numbers(usage.input_tokens)} in / {numbers(usage.output_tokens)} out"
            )
        if self.usage is not None and self.context_fresh and self.usage.used:
            parts.append(f"context: {numbers(self.usage.used)}/{numbers(self.usage.size)}")
        if self.usage is not None and isinstance(cost := self.usage.cost, t.Cost):
            turn = cost.amount - self.cost_before
            session = f" (session: {cost.amount:.4f})" if abs(turn - cost.amount) >= 5e-5 else ""
            parts.append(f"cost: {turn:.4f} {cost.currency}{session}")
        return parts

    def relative(self, path: str) -> str:
        """``path`` as shown: relative to the session's directory when inside it."""
        if self.cwd and path.startswith(self.cwd.rstrip(os.sep) + os.sep):
            return os.path.relpath(path, self.cwd)
        return path

    # what the front end says, each view in its own way
    def note(self, text: str, level: str = "info") -> None:
        raise NotImplementedError

    def update(self, u: t.SessionUpdate) -> None:
        raise NotImplementedError

    def finish(self, result: t.PromptResponse) -> None:
        raise NotImplementedError

    def start_cancelling(self) -> None:
        self.cancelling = True
        self.note("cancelling the turn… (Ctrl-C again quits)")

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """The screen is the keyboard's for a while (a question, the prompt)."""
        yield

    def question(self, req: t.RequestPermissionRequest, choices: list[tuple[str, str]]) -> None:
        """Ask: the call's title, then each option's key and its own name."""
        raise NotImplementedError

    def answered(self, name: str) -> None:
        """The option a key chose, written after the question."""

    def user(self, text: str) -> None:
        """A prompt of the conversation (shown when a resumed chat replays its end)."""
        self.note("> " + text.replace("\n", "\n  "), "plain")

    def begin_replay(self) -> None:
        """A resumed chat's last exchanges are shown next (not part of this run's answer)."""

    def end_replay(self) -> None:
        """The replayed exchanges are shown: what they streamed is printed whole."""

    def draft(self, text: str) -> None:
        """The line typed while a turn runs (:mod:`.compose`), after each key; ``""``
        when there is none. Drawn only where the turn's progress is (a terminal)."""

    def prompt(self) -> None:
        """The chat's prompt, before a line is read."""

    def line_break(self) -> None:
        """End the line a question or the prompt left open (after Ctrl-C or Ctrl-D)."""

    def close(self) -> None:
        pass


class Renderer(View):
    """Plain text: session/update notifications as terminal-free lines. With
    ``answer_only``, ``out`` gets the answer and ``err`` everything else."""

    def __init__(self, out: TextIO, err: TextIO | None = None, *, answer_only: bool = False):
        super().__init__()
        self.out = out
        self.err = err if err is not None else sys.stderr
        self.answer_only = answer_only
        self.side = self.err if answer_only else out  # where the rest goes
        self.s = Style(self.side)
        self.kind: str | None = None  # the stream we are in: "text" or "thought"
        self.message: str | None = None  # the answer's message being written
        self.answer = out  # where the answer goes (not while replaying an old one)
        self.ends: dict[int, str] = {}  # each stream's last two characters written

    def _write(self, stream: TextIO, text: str) -> None:
        if text:
            stream.write(text)
            self.ends[id(stream)] = (self.ends.get(id(stream), "") + text)[-2:]

    def _end_line(self, stream: TextIO, blank: bool = False) -> None:
        """Finish the stream's line (``blank``: and leave an empty one after it)."""
        end = self.ends.get(id(stream))
        if end is None:
            return  # nothing written there yet
        want = "\n\n" if blank else "\n"
        have = len(end) - len(end.rstrip("\n"))
        self._write(stream, "\n" * max(0, len(want) - have))

    def _switch(self, kind: str | None) -> None:
        if self.kind != kind and self.kind is not None:
            self._end_line(self.answer if self.kind == "text" else self.side)
        self.kind = kind

    def update(self, u: t.SessionUpdate) -> None:
        tracked = self.track(u)
        match u:
            case t.AgentMessageChunk(content=block):
                message = u.message_id if isinstance(u.message_id, str) else None
                if self.kind != "text" or message != self.message:
                    self._switch(None)
                    if self.answer_only and self.answer is self.out:  # a blank line apart
                        self._end_line(self.answer, blank=True)
                self.kind, self.message = "text", message
                self._write(self.answer, block_text(block))
            case t.AgentThoughtChunk(content=block):
                self._switch("thought")
                self._write(self.side, self.s.dim(block_text(block)))
            case t.Plan(entries=entries):
                self._switch(None)
                self._write(self.side, self.s.bold("Plan") + "\n")
                for e in entries:
                    mark = PLAN_MARK.get(e.status, "[?]")
                    self._write(self.side, f"  {mark} {escaped(e.content)}\n")
            case t.ToolCall() | t.ToolCallUpdateSessionUpdate():
                assert tracked is not None
                self._tool(*tracked)
            case t.Notice(title=title, description=description):
                self._switch(None)
                said = f": {escaped(description)}" if description else ""
                line = self.s("33", f"! {escaped(title)}") + said
                self._write(self.side, line + "\n")
        self.out.flush()
        self.side.flush()

    def _tool(self, call: Call, before: t.ToolCallStatus | None) -> None:
        status = call.status or "pending"
        if status == before or status not in ("completed", "failed"):
            return  # print each call once, when done
        self._switch(None)
        ok, why = call.outcome
        color = "32" if ok else "31"
        mark = STATUS_MARK["completed" if ok else "failed"]
        self._write(
            self.side, self.s(color, f"{mark} {call.label}" + (f" ({why})" if why else "")) + "\n"
        )
        if call.kind != "think" or not ok:  # a plan is shown as a plan
            for item in call.content or []:
                self._write(self.side, self._content(item))

    def _content(self, item: t.ToolCallContent) -> str:
        match item:
            case t.Diff():
                shown = []
                for line in diff_lines(item, self.relative)[:200]:
                    code = "32" if line.startswith("+") else "31" if line.startswith("-") else "2"
                    shown.append(self.s(code, line) + "\n")
                return "".join(shown)
            case t.Content(content=block):
                text = block_text(block).rstrip("\n")
                body = "\n".join(text.splitlines()[:40])
                return self.s.dim("  " + body.replace("\n", "\n  ")) + "\n" if body else ""
            case t.Terminal(terminal_id=terminal_id):
                return self.s.dim(f"  [terminal {terminal_id}]") + "\n"
        return ""

    def finish(self, result: t.PromptResponse) -> None:
        self._switch(None)
        footer = self.footer(result)
        if footer:
            self._write(self.side, self.s.dim("— " + " · ".join(footer)) + "\n")
        self.out.flush()
        self.side.flush()

    def begin_replay(self) -> None:
        self._switch(None)
        self.answer = self.side

    def end_replay(self) -> None:
        self._switch(None)
        self.answer = self.out

    def note(self, text: str, level: str = "info") -> None:
        self._switch(None)
        self.out.flush()
        line = f"{text}\n" if level in ("debug", "plain") else f"acp-agent: {text}\n"
        self._write(self.err, line)
        self.err.flush()

    def question(self, req: t.RequestPermissionRequest, choices: list[tuple[str, str]]) -> None:
        self._switch(None)
        self.out.flush()
        title = escaped(req.tool_call.title or "a tool call")
        self.err.write(f"\nAllow {title}? {question_choices(choices)}: ")
        self.err.flush()

    def answered(self, name: str) -> None:
        self.err.write(name + "\n")
        self.err.flush()

    def prompt(self) -> None:
        self._write(self.side, "> ")
        self.side.flush()

    def line_break(self) -> None:
        self.err.write("\n")
        self.err.flush()


def question_choices(choices: list[tuple[str, str]]) -> str:
    """``[a] Allow once, [A] Always allow `ls`, ... (Ctrl-C: reject and cancel)``."""
    shown = ", ".join(f"[{key}] {escaped(name)}" for key, name in choices)
    return shown + " (Ctrl-C: reject and cancel)"


class JsonLines(View):
    """``run --json``: each ``session/update``'s params as one JSON line, then the
    prompt's result as ``{"result": ...}``; notes go to stderr."""

    def __init__(self, out: TextIO, err: TextIO | None = None) -> None:
        super().__init__()
        self.out = out
        self.err = err if err is not None else sys.stderr

    def _line(self, value: Any) -> None:
        self.out.write(msgspec.json.encode(value).decode() + "\n")
        self.out.flush()

    def update(self, u: t.SessionUpdate) -> None:
        self.track(u)
        self._line(t.SessionNotification(session_id=self.session_id, update=u))

    def finish(self, result: t.PromptResponse) -> None:
        self._line({"result": result})

    def note(self, text: str, level: str = "info") -> None:
        self.err.write(f"{text}\n" if level in ("debug", "plain") else f"acp-agent: {text}\n")
        self.err.flush()

    def line_break(self) -> None:
        self.err.write("\n")
        self.err.flush()

    def question(self, req: t.RequestPermissionRequest, choices: list[tuple[str, str]]) -> None:
        title = escaped(req.tool_call.title or "a tool call")
        self.err.write(f"Allow {title}? {question_choices(choices)}: ")
        self.err.flush()

    def answered(self, name: str) -> None:
        self.err.write(name + "\n")
        self.err.flush()


def diff_lines(item: t.Diff, show: Callable[[str], str] = str) -> list[str]:
    """A unified diff of the edit; ``a/``, ``b/`` before a path ``show`` made relative
    (git's way), an absolute path as it is (a new file: ``/dev/null`` before it); the
    path and the lines escaped (:func:`~acp_agent.escaping.escaped`)."""
    old = (item.old_text or "").splitlines(keepends=True)
    new = item.new_text.splitlines(keepends=True)
    path = escaped(show(item.path))
    before, after = (path, path) if os.path.isabs(path) else ("a/" + path, "b/" + path)
    if not isinstance(item.old_text, str):
        before = "/dev/null"
    lines = difflib.unified_diff(old, new, before, after)
    return [escaped(line.rstrip("\n"), lines=True) for line in lines]


def block_text(block: t.ContentBlock) -> str:
    """A content block as the terminal shows it: text escaped, line breaks kept."""
    match block:
        case t.TextContent(text=text):
            return escaped(text, lines=True)
        case t.ResourceLink(name=name, uri=uri):
            return f"[{escaped(name)}]({escaped(uri)})"
    return f"[{type(block).__struct_config__.tag}]"  # image, audio, resource
