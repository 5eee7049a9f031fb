"""Built-in tools. A new tool is one module (its :class:`~.base.Arguments` and a
:class:`~.base.BuiltinTool` subclass) and one line in :data:`BUILTIN`."""

from __future__ import annotations

from .base import Arguments, BuiltinTool, CallInfo, Tool, ToolContext, ToolOutput, Toolset
from .command import RunCommand
from .files import EditFile, ReadFile, WriteFile
from .plan import DiscardPlan, UpdatePlan, WritePlan
from .search import Glob, Grep, ListDirectory

__all__ = [
    "BUILTIN",
    "Arguments",
    "BuiltinTool",
    "CallInfo",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "Toolset",
    "builtin_tools",
]

#: The built-in tools, in the order the model sees them.
BUILTIN: tuple[type[BuiltinTool], ...] = (  # type: ignore[type-arg]
    ReadFile,
    WriteFile,
    EditFile,
    ListDirectory,
    Glob,
    Grep,
    RunCommand,
    UpdatePlan,
    WritePlan,
    DiscardPlan,
)


def builtin_tools(*extra: Tool) -> Toolset:
    """The built-in tools, plus ``extra`` ones bound to the agent (``spawn_agent``)."""
    return Toolset([*(tool() for tool in BUILTIN), *extra])
