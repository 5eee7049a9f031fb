"""What a person sees of a turn when the output is not a terminal: plain text, and JSON
lines for scripts. The state every view keeps (tool calls, usage) lives in :class:`View`.

Plain output: streamed text as it comes, thoughts, the plan, each tool call once when it
is done (with its diff or output), notices, and a footer with the stop reason and usage.
Lines of the front end's own (notes, questions) go to stderr, so stdout is the transcript.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import sys
from collections.abc import Iterator
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
        self.plan: list[t.PlanEntry] | None = None
        self.cancelling = False
        self.session_id = ""

    def begin_turn(self) -> None:
        self.context_fresh = False
        self.cancelling = False
        self.plan = None

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
        """The footer's parts. The context is shown only when measured during this turn
        (a turn cancelled before the model answered has no new figure)."""
        parts = [f"stop: {result.stop_reason}"]
        if usage := result.usage:
            parts.append(
                f"tokens: {numbers(usage.input_tokens)} in / {numbers(usage.output_tokens)} out"
            )
        if self.usage is not None and self.context_fresh:
            parts.append(f"context: {numbers(self.usage.used)}/{numbers(self.usage.size)}")
        if self.usage is not None and (cost := self.usage.cost):
            parts.append(f"cost: {cost.amount:.4f} {cost.currency}")
        return parts

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

    def question(self, req: t.RequestPermissionRequest, choices: str) -> None:
        raise NotImplementedError

    def prompt(self) -> None:
        """The chat's prompt, before a line is read."""

    def line_break(self) -> None:
        """End the line a question or the prompt left open (after Ctrl-C or Ctrl-D)."""

    def close(self) -> None:
        pass


class Renderer(View):
    """Plain text: session/update notifications as terminal-free lines."""

    def __init__(self, out: TextIO, err: TextIO | None = None) -> None:
        super().__init__()
        self.out = out
        self.err = err if err is not None else sys.stderr
        self.s = Style(out)
        self.kind: str | None = None  # the stream we are in: "text" or "thought"

    def _switch(self, kind: str | None) -> None:
        if self.kind != kind and self.kind is not None:
            self.out.write("\n")
        self.kind = kind

    def update(self, u: t.SessionUpdate) -> None:
        tracked = self.track(u)
        match u:
            case t.AgentMessageChunk(content=block):
                self._switch("text")
                self.out.write(block_text(block))
            case t.AgentThoughtChunk(content=block):
                self._switch("thought")
                self.out.write(self.s.dim(block_text(block)))
            case t.Plan(entries=entries):
                self._switch(None)
                self.out.write(self.s.bold("Plan") + "\n")
                for e in entries:
                    self.out.write(f"  {PLAN_MARK.get(e.status, '[?]')} {e.content}\n")
            case t.ToolCall() | t.ToolCallUpdateSessionUpdate():
                assert tracked is not None
                self._tool(*tracked)
            case t.Notice(title=title, description=description):
                self._switch(None)
                said = f": {escaped(description)}" if description else ""
                self.out.write(self.s("33", f"! {escaped(title)}") + said + "\n")
        self.out.flush()

    def _tool(self, call: Call, before: t.ToolCallStatus | None) -> None:
        status = call.status or "pending"
        if status == before or status not in ("completed", "failed"):
            return  # print each call once, when done
        self._switch(None)
        ok, why = call.outcome
        color = "32" if ok else "31"
        mark = STATUS_MARK["completed" if ok else "failed"]
        self.out.write(self.s(color, f"{mark} {call.label}" + (f" ({why})" if why else "")) + "\n")
        if call.kind != "think" or not ok:  # a plan is shown as a plan
            for item in call.content or []:
                self.out.write(self._content(item))

    def _content(self, item: t.ToolCallContent) -> str:
        match item:
            case t.Diff():
                shown = []
                for line in diff_lines(item)[:200]:
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
        self.out.write(self.s.dim("— " + " · ".join(self.footer(result))) + "\n")
        self.out.flush()

    def note(self, text: str, level: str = "info") -> None:
        self._switch(None)
        self.out.flush()
        self.err.write(f"{text}\n" if level in ("debug", "plain") else f"acp-agent: {text}\n")
        self.err.flush()

    def question(self, req: t.RequestPermissionRequest, choices: str) -> None:
        self._switch(None)
        self.out.flush()
        title = escaped(req.tool_call.title or "a tool call")
        self.err.write(f"\nAllow {title}? {choices}: ")
        self.err.flush()

    def prompt(self) -> None:
        self.out.write("> ")
        self.out.flush()

    def line_break(self) -> None:
        self.err.write("\n")
        self.err.flush()


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

    def question(self, req: t.RequestPermissionRequest, choices: str) -> None:
        self.err.write(f"Allow {escaped(req.tool_call.title or 'a tool call')}? {choices}: ")
        self.err.flush()


def diff_lines(item: t.Diff) -> list[str]:
    old = (item.old_text or "").splitlines(keepends=True)
    new = item.new_text.splitlines(keepends=True)
    lines = difflib.unified_diff(old, new, "a" + item.path, "b" + item.path)
    return [line.rstrip("\n") for line in lines]


def block_text(block: t.ContentBlock) -> str:
    match block:
        case t.TextContent(text=text):
            return text
        case t.ResourceLink(name=name, uri=uri):
            return f"[{name}]({uri})"
    return f"[{type(block).__struct_config__.tag}]"  # image, audio, resource
