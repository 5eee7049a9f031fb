"""Plans: ``update_plan`` (the checklist, complete every time), ``write_plan`` (a
markdown plan document) and ``discard_plan``.

Clients that advertise ``plan`` receive ID-addressed ``plan_update`` / ``plan_removed``
updates; others receive the classic ``plan`` entry list: a markdown plan's checklist
items (``- [ ] step``) become entries, and a discarded plan an empty list.
"""

from __future__ import annotations

import re
from typing import Annotated, get_args

import msgspec
from msgspec import Meta

from ..errors import ToolError
from ..protocol import types as t
from .base import Arguments, BuiltinTool, CallInfo, ToolContext, ToolKind, ToolOutput

PRIORITIES: tuple[str, ...] = get_args(t.PlanEntryPriority)
STATUSES: tuple[str, ...] = get_args(t.PlanEntryStatus)
MAX_ENTRIES = 100
CHECKLIST_ID = "checklist"
DOCUMENT_ID = "plan"
_CHECKBOX = re.compile(r"^\s*[-*+]\s+\[([ xX~])\]\s+(.+?)\s*$")
_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class PlanEntryArg(msgspec.Struct, forbid_unknown_fields=True):
    content: Annotated[str, Meta(min_length=1, description="What this step does.")]
    priority: t.PlanEntryPriority
    status: t.PlanEntryStatus


class UpdatePlanArgs(Arguments):
    entries: Annotated[list[PlanEntryArg], Meta(max_length=MAX_ENTRIES)]


class UpdatePlan(BuiltinTool[UpdatePlanArgs]):
    name = "update_plan"
    kind: ToolKind = "think"
    arguments = UpdatePlanArgs
    description = (
        "Publish your plan for the task to the user. Send the COMPLETE list every time "
        "(it replaces the previous plan); keep statuses current, with at most one entry "
        "in_progress."
    )

    def describe(self, args: UpdatePlanArgs, ctx: ToolContext) -> CallInfo:
        return CallInfo("Update plan")

    async def run(self, args: UpdatePlanArgs, ctx: ToolContext) -> ToolOutput:
        entries = [
            t.PlanEntry(content=e.content.strip(), priority=e.priority, status=e.status)
            for e in args.entries
        ]
        if any(not e.content for e in entries):
            raise ToolError("every plan entry needs a non-blank content")
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


class CodexStep(msgspec.Struct, forbid_unknown_fields=True):
    step: Annotated[str, Meta(min_length=1, description="What this step does.")]
    status: t.PlanEntryStatus


class CodexPlanArgs(Arguments):
    plan: Annotated[list[CodexStep], Meta(max_length=MAX_ENTRIES)]
    explanation: Annotated[str, Meta(description="Why the plan is what it is (optional).")] = ""


class CodexUpdatePlan(BuiltinTool[CodexPlanArgs]):
    """``update_plan`` in the form OpenAI's GPT-5 and codex models were trained on (steps
    with a status, an optional explanation), shown to the user as :class:`UpdatePlan`'s."""

    name = "update_plan"
    kind: ToolKind = "think"
    arguments = CodexPlanArgs
    description = (
        "Publish your plan for the task to the user: the COMPLETE list of steps every time "
        "(it replaces the previous plan), each pending, in_progress or completed, at most "
        "one in_progress; `explanation` may say what changed."
    )

    def describe(self, args: CodexPlanArgs, ctx: ToolContext) -> CallInfo:
        return CallInfo("Update plan")

    async def run(self, args: CodexPlanArgs, ctx: ToolContext) -> ToolOutput:
        entries = [PlanEntryArg(s.step, "medium", s.status) for s in args.plan]
        out = await UpdatePlan().run(UpdatePlanArgs(entries=entries), ctx)
        if args.explanation.strip():
            out.text += f"\nExplanation: {args.explanation.strip()}"
        return out


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


class WritePlanArgs(Arguments):
    content: Annotated[str, Meta(min_length=1, description="The plan, in Markdown.")]


class WritePlan(BuiltinTool[WritePlanArgs]):
    name = "write_plan"
    kind: ToolKind = "think"
    arguments = WritePlanArgs
    streamed = ("content",)
    description = (
        "Write or revise the plan document for the task, in Markdown (it replaces the "
        "previous version). Use checklist items (- [ ] step) for the steps. In plan mode, "
        "this is how you deliver the plan."
    )

    def describe(self, args: WritePlanArgs, ctx: ToolContext) -> CallInfo:
        return CallInfo("Write plan")

    async def run(self, args: WritePlanArgs, ctx: ToolContext) -> ToolOutput:
        content = args.content
        if not content.strip():
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


class NoArgs(Arguments):
    pass


class DiscardPlan(BuiltinTool[NoArgs]):
    name = "discard_plan"
    kind: ToolKind = "think"
    arguments = NoArgs
    description = "Discard the plan document and checklist (they no longer apply)."

    def describe(self, args: NoArgs, ctx: ToolContext) -> CallInfo:
        return CallInfo("Discard plan")

    async def run(self, args: NoArgs, ctx: ToolContext) -> ToolOutput:
        if supports_plan_documents(ctx):
            for plan_id in (DOCUMENT_ID, CHECKLIST_ID):
                await ctx.emit(t.PlanRemoved(plan_id=plan_id))
        else:
            await ctx.emit(t.Plan(entries=[]))
        return ToolOutput(text="Plan discarded.")
