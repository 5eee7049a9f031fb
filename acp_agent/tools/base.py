"""The tool seam: what a built-in (or MCP) tool looks like to the turn engine.

A tool knows nothing of providers. It reaches the editor only through the
:class:`~acp_agent.client.Client` in its :class:`ToolContext`, and reports its result as
a :class:`ToolOutput`: ACP content for the user, text (and images) for the model.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from ..client import Client
from ..protocol import types as t
from ..providers.base import ImagePart, ToolSpec

ToolKind: TypeAlias = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]

#: What the permission policy needs to know about one call.
Access: TypeAlias = Literal["read", "write", "execute", "none"]


@dataclass(slots=True)
class ToolContext:
    session_id: str
    cwd: str
    roots: list[str]
    client: Client
    tool_call_id: str
    emit: Callable[[t.SessionUpdate], Awaitable[None]]
    """Send a session update for this session (progress, plans)."""

    def resolve(self, path: str) -> str:
        """An absolute, normalised path; relative paths resolve against the session cwd."""
        return os.path.normpath(path if os.path.isabs(path) else os.path.join(self.cwd, path))

    def inside_roots(self, path: str) -> bool:
        """Whether ``path`` (after resolving symlinks) lies inside the session's roots."""
        real = os.path.realpath(self.resolve(path))
        for root in self.roots:
            r = os.path.realpath(root)
            if real == r or real.startswith(r.rstrip(os.sep) + os.sep):
                return True
        return False

    def display(self, path: str) -> str:
        """Project-relative form of ``path`` for titles."""
        abs_path = self.resolve(path)
        rel = os.path.relpath(abs_path, self.cwd)
        return abs_path if rel.startswith("..") else rel


@dataclass(slots=True)
class ToolOutput:
    text: str
    """What the model reads."""
    content: list[Any] = field(default_factory=list)
    """ACP ``ToolCallContent`` for the user; defaults to ``text`` as one text block."""
    raw_output: Any = None
    images: list[ImagePart] = field(default_factory=list)
    locations: list[t.ToolCallLocation] | None = None


class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    @property
    def kind(self) -> ToolKind: ...

    def title(self, args: Mapping[str, Any], ctx: ToolContext) -> str: ...

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[t.ToolCallLocation]: ...

    def access(self, args: Mapping[str, Any], ctx: ToolContext) -> tuple[Access, list[str]]:
        """The kind of access and the absolute paths it touches (for the permission policy)."""
        ...

    def permission_key(self, args: Mapping[str, Any]) -> str:
        """Scope of an "always" decision, e.g. the tool name or ``run_command:git``."""
        ...

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput: ...


class Toolset:
    def __init__(self, tools: list[Tool]) -> None:
        self._tools = {tool.spec.name: tool for tool in tools}

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools
