"""Built-in tools. A new tool is one module (its :class:`~.base.Arguments` and a
:class:`~.base.BuiltinTool` subclass) and one line in :data:`BUILTIN`."""

from __future__ import annotations

import importlib

from .base import Arguments, BuiltinTool, CallInfo, Tool, ToolContext, ToolOutput, Toolset

__all__ = [
    "BUILTIN",
    "CODEX",
    "Arguments",
    "BuiltinTool",
    "CallInfo",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "Toolset",
    "builtin_tools",
]

#: The built-in tools (``module.Class`` under this package), in the order the model sees them.
BUILTIN: tuple[str, ...] = (
    "files.ReadFile",
    "files.WriteFile",
    "files.EditFile",
    "move.MoveFile",
    "search.ListDirectory",
    "search.Glob",
    "search.Grep",
    "command.RunCommand",
    "webfetch.WebFetch",
    "plan.UpdatePlan",
    "plan.WritePlan",
    "plan.DiscardPlan",
    "ask.AskUser",
)


#: The built-in tools of a model of the ``codex`` tool style (``providers.models``): the
#: edit and plan tools it was trained on, in place of the standard ones.
CODEX: tuple[str, ...] = tuple(
    {"files.WriteFile": "patch.ApplyPatch", "plan.UpdatePlan": "plan.CodexUpdatePlan"}.get(e, e)
    for e in BUILTIN
    if e not in ("files.EditFile", "move.MoveFile")
)


def builtin_tools(*extra: Tool, style: str = "standard") -> Toolset:
    """The built-in tools of a tool style (``standard`` or ``codex``), plus ``extra`` ones
    bound to the agent (``spawn_agent``)."""
    tools: list[Tool] = []
    for entry in CODEX if style == "codex" else BUILTIN:
        module, _, name = entry.rpartition(".")
        tools.append(getattr(importlib.import_module(f"{__name__}.{module}"), name)())
    return Toolset([*tools, *extra])
