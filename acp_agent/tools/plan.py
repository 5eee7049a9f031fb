"""Plans: ``update_plan`` (the checklist, complete every time), ``write_plan`` (a
markdown plan document) and ``discard_plan``.

Clients that advertise ``plan`` receive ID-addressed ``plan_update`` / ``plan_removed``
updates; others receive the classic ``plan`` entry list: a markdown plan's checklist
items (``- [ ] step``) become entries, and a discarded plan an empty list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, get_args

from ..errors import ToolError
from ..protocol import types as t
from ..providers.base import ToolSpec
from ._common import BaseTool
from .base import Access, ToolContext, ToolKind, ToolOutput

PRIORITIES: tuple[str, ...] = get_args(t.PlanEntryPriority)
STATUSES: tuple[str, ...] = get_args(t.PlanEntryStatus)
MAX_ENTRIES = 100
CHECKLIST_ID = "checklist"
DOCUMENT_ID = "plan"
_CHECKBOX = re.compile(r"^\s*[-*+]\s+\[([ xX~])\]\s+(.+?)\s*$")
_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


def parse_entries(args: Mapping[str, Any]) -> list[t.PlanEntry]:
    raw = args.get("entries")
    if not isinstance(raw, list):
        raise ToolError("argument 'entries' must be a list of {content, priority, status}")
    if len(raw) > MAX_ENTRIES:
        raise ToolError(f"a plan has at most {MAX_ENTRIES} entries")
    entries: list[t.PlanEntry] = []
    for i, item in enumerate(raw, 1):
        if not isinstance(item, Mapping):
            raise ToolError(f"entry {i} must be an object with content, priority and status")
        content, priority, status = item.get("content"), item.get("priority"), item.get("status")
        if not isinstance(content, str) or not content.strip():
            raise ToolError(f"entry {i}: 'content' must be a non-empty string")
        if priority not in PRIORITIES:
            raise ToolError(f"entry {i}: 'priority' must be one of {', '.join(PRIORITIES)}")
        if status not in STATUSES:
            raise ToolError(f"entry {i}: 'status' must be one of {', '.join(STATUSES)}")
        unknown = set(item) - {"content", "priority", "status"}
        if unknown:
            raise ToolError(f"entry {i}: unknown field(s) {', '.join(sorted(unknown))}")
        entries.append(t.PlanEntry(content=content.strip(), priority=priority, status=status))
    return entries


class UpdatePlan(BaseTool):
    kind: ToolKind = "think"
    spec = ToolSpec(
        name="update_plan",
        description=(
            "Publish your plan for the task to the user. Send the COMPLETE list every time "
            "(it replaces the previous plan); keep statuses current, with at most one entry "
            "in_progress."
        ),
        parameters={
            "type": "object",
            "properties": {
                "entries": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "description": "What this step does."},
                            "priority": {"type": "string", "enum": list(PRIORITIES)},
                            "status": {"type": "string", "enum": list(STATUSES)},
                        },
                        "required": ["content", "priority", "status"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["entries"],
            "additionalProperties": False,
        },
    )

    def title(self, args: Mapping[str, Any], ctx: ToolContext) -> str:
        return "Update plan"

    def access(self, args: Mapping[str, Any], ctx: ToolContext) -> tuple[Access, list[str]]:
        return "none", []

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        entries = parse_entries(args)
        if supports_plan_documents(ctx):
            await ctx.emit(t.PlanUpdate(plan=t.PlanItems(plan_id=CHECKLIST_ID, entries=entries)))
        else:
            await ctx.emit(t.Plan(entries=entries))
        done = sum(e.status == "completed" for e in entries)
        lines = [f"{_MARKS[e.status]} {e.content}" for e in entries]
        summary = f"Plan updated: {done}/{len(entries)} completed."
        return ToolOutput(
            text="\n".join([summary, *lines]),
            raw_output={
                "entries": [
                    {"content": e.content, "priority": e.priority, "status": e.status}
                    for e in entries
                ]
            },
        )


def supports_plan_documents(ctx: ToolContext) -> bool:
    return isinstance(ctx.client.capabilities.plan, t.PlanCapabilities)


def checklist_of(markdown: str) -> list[t.PlanEntry]:
    """The ``- [ ]`` / ``- [x]`` items of a markdown plan, as plan entries."""
    status: dict[str, t.PlanEntryStatus] = {
        " ": "pending",
        "~": "in_progress",
        "x": "completed",
        "X": "completed",
    }
    return [
        t.PlanEntry(content=m.group(2), priority="medium", status=status[m.group(1)])
        for m in map(_CHECKBOX.match, markdown.splitlines())
        if m
    ][:MAX_ENTRIES]


class WritePlan(BaseTool):
    kind: ToolKind = "think"
    spec = ToolSpec(
        name="write_plan",
        description=(
            "Write or revise the plan document for the task, in Markdown (it replaces the "
            "previous version). Use checklist items (- [ ] step) for the steps. In plan mode, "
            "this is how you deliver the plan."
        ),
        parameters={
            "type": "object",
            "properties": {"content": {"type": "string", "description": "The plan, in Markdown."}},
            "required": ["content"],
            "additionalProperties": False,
        },
    )

    def title(self, args: Mapping[str, Any], ctx: ToolContext) -> str:
        return "Write plan"

    def access(self, args: Mapping[str, Any], ctx: ToolContext) -> tuple[Access, list[str]]:
        return "none", []

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        content = args.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ToolError("argument 'content' must be non-empty Markdown")
        if supports_plan_documents(ctx):
            await ctx.emit(t.PlanUpdate(plan=t.PlanMarkdown(plan_id=DOCUMENT_ID, content=content)))
            shown = "as a plan document"
        else:
            entries = checklist_of(content)
            if entries:
                await ctx.emit(t.Plan(entries=entries))
                shown = f"as a checklist of {len(entries)} steps"
            else:
                await ctx.emit(t.AgentMessageChunk(content=t.TextContent(text=content + "\n")))
                shown = "as a message"
        return ToolOutput(
            text=f"Plan written ({len(content)} characters), shown {shown}.",
            raw_output={"planId": DOCUMENT_ID, "shown": shown},
        )


class DiscardPlan(BaseTool):
    kind: ToolKind = "think"
    spec = ToolSpec(
        name="discard_plan",
        description="Discard the plan document and checklist (they no longer apply).",
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
    )

    def title(self, args: Mapping[str, Any], ctx: ToolContext) -> str:
        return "Discard plan"

    def access(self, args: Mapping[str, Any], ctx: ToolContext) -> tuple[Access, list[str]]:
        return "none", []

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        if supports_plan_documents(ctx):
            for plan_id in (DOCUMENT_ID, CHECKLIST_ID):
                await ctx.emit(t.PlanRemoved(plan_id=plan_id))
        else:
            await ctx.emit(t.Plan(entries=[]))
        return ToolOutput(text="Plan discarded.")
