"""What a person sees of a turn: typed ``session/update``s turned into terminal text.

Streamed text as it comes, thoughts dimmed, the plan, each tool call once when it is
done (with its diff or output), notices, and a footer with the stop reason and usage.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import TextIO, TypeVar

from msgspec import UnsetType

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
class _Call:
    """A tool call as known so far: ``tool_call`` then ``tool_call_update``s merged.
    ``None`` means not told yet."""

    title: str | None = None
    name: str | None = None
    kind: t.ToolKind | None = None
    status: t.ToolCallStatus | None = None
    content: list[t.ToolCallContent] | None = None

    def merge(self, u: t.ToolCall | t.ToolCallUpdateSessionUpdate) -> None:
        self.title = _given(u.title, self.title)
        self.name = _given(u.name, self.name)
        self.kind = _given(u.kind, self.kind)
        self.status = _given(u.status, self.status)
        self.content = _given(u.content, self.content)


def _given(value: T | UnsetType | None, current: T | None) -> T | None:
    """An update's field replaces what we knew only when it was sent, and not as null."""
    return current if value is None or isinstance(value, UnsetType) else value


class Renderer:
    """Turns session/update notifications into terminal output."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.s = Style(out)
        self.kind: str | None = None  # the stream we are in: "text" or "thought"
        self.calls: dict[str, _Call] = {}
        self.usage: t.UsageUpdate | None = None

    def _switch(self, kind: str | None) -> None:
        if self.kind != kind and self.kind is not None:
            self.out.write("\n")
        self.kind = kind

    def update(self, u: t.SessionUpdate) -> None:
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
                self._tool(u)
            case t.UsageUpdate():
                self.usage = u
            case t.Notice(title=title, description=description):
                self._switch(None)
                self.out.write(
                    self.s("33", f"! {title}") + (f": {description}" if description else "") + "\n"
                )
        self.out.flush()

    def _tool(self, u: t.ToolCall | t.ToolCallUpdateSessionUpdate) -> None:
        call = self.calls.setdefault(u.tool_call_id, _Call())
        before = call.status
        call.merge(u)
        status = call.status or "pending"
        if status == before or status not in ("completed", "failed"):
            return  # the progress line shows the work; print each call once, when done
        self._switch(None)
        color = "32" if status == "completed" else "31"
        title = call.title if call.title is not None else call.name or "tool"
        self.out.write(self.s(color, f"{STATUS_MARK[status]} {title}") + "\n")
        if call.kind != "think" or status == "failed":  # a plan is shown as a plan
            for item in call.content or []:
                self.out.write(self._content(item))

    def _content(self, item: t.ToolCallContent) -> str:
        match item:
            case t.Diff(path=path, old_text=old_text, new_text=new_text):
                old = (old_text or "").splitlines(keepends=True)
                new = new_text.splitlines(keepends=True)
                lines = list(difflib.unified_diff(old, new, "a" + path, "b" + path))
                shown = []
                for line in lines[:200]:
                    code = "32" if line.startswith("+") else "31" if line.startswith("-") else "2"
                    shown.append(self.s(code, line.rstrip("\n")) + "\n")
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
        parts = [f"stop: {result.stop_reason}"]
        if usage := result.usage:
            parts.append(f"tokens: {usage.input_tokens} in / {usage.output_tokens} out")
        if self.usage:
            parts.append(f"context: {self.usage.used}/{self.usage.size}")
            if cost := self.usage.cost:
                parts.append(f"cost: {cost.amount:.4f} {cost.currency}")
        self.out.write(self.s.dim("— " + " · ".join(parts)) + "\n")
        self.out.flush()


def block_text(block: t.ContentBlock) -> str:
    match block:
        case t.TextContent(text=text):
            return text
        case t.ResourceLink(name=name, uri=uri):
            return f"[{name}]({uri})"
    return f"[{type(block).__struct_config__.tag}]"  # image, audio, resource
