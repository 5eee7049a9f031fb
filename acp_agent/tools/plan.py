"""update_plan: publish the agent's plan (the complete list, every time) to the editor."""

from __future__ import annotations

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
        await ctx.emit(t.Plan(entries=entries))
        done = sum(e.status == "completed" for e in entries)
        lines = [f"{_MARKS[e.status]} {e.content}" for e in entries]
        summary = f"Plan updated: {done}/{len(entries)} completed."
        return ToolOutput(
            text="\n".join([summary, *lines]),
            raw_output={"entries": [{"content": e.content, "priority": e.priority,
                                     "status": e.status} for e in entries]},
        )
