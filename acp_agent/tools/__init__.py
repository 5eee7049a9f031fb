"""Built-in tools."""

from __future__ import annotations

from .base import Tool, ToolContext, ToolOutput, Toolset
from .command import RunCommand
from .files import EditFile, ReadFile, WriteFile
from .plan import DiscardPlan, UpdatePlan, WritePlan
from .search import Glob, Grep, ListDirectory

__all__ = ["Tool", "ToolContext", "ToolOutput", "Toolset", "builtin_tools"]


def builtin_tools(*extra: Tool) -> Toolset:
    """The built-in tools, plus ``extra`` ones bound to the agent (``spawn_agent``)."""
    return Toolset([
        ReadFile(), WriteFile(), EditFile(), ListDirectory(), Glob(), Grep(), RunCommand(),
        UpdatePlan(), WritePlan(), DiscardPlan(), *extra,
    ])
