"""Drive a tool as the turn engine does, from the model's raw arguments."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from acp_agent.engine.permissions import Scope, scope_of
from acp_agent.protocol import types as t
from acp_agent.tools.base import CallInfo, Tool, ToolContext, ToolOutput


class Raw:
    """``tool`` with every step taking the raw JSON object: ``parse`` then
    ``describe`` or ``run`` (a :class:`~acp_agent.errors.ToolError` from either)."""

    def __init__(self, tool: Tool) -> None:
        self.tool = tool
        self.spec = tool.spec
        self.kind = tool.kind

    def describe(self, raw: Mapping[str, Any], ctx: ToolContext) -> CallInfo:
        return self.tool.describe(self.tool.parse(raw), ctx)

    async def run(self, raw: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return await self.tool.run(self.tool.parse(raw), ctx)

    def title(self, raw: Mapping[str, Any], ctx: ToolContext) -> str:
        return self.describe(raw, ctx).title

    def access(self, raw: Mapping[str, Any], ctx: ToolContext) -> tuple[str, list[str]]:
        info = self.describe(raw, ctx)
        return info.access, list(info.paths)

    def locations(self, raw: Mapping[str, Any], ctx: ToolContext) -> list[t.ToolCallLocation]:
        return list(self.describe(raw, ctx).locations)

    def scope(self, raw: Mapping[str, Any], ctx: ToolContext) -> Scope | None:
        """What an "always" answer to this call would cover (as the policy computes it)."""
        info = self.describe(raw, ctx)
        real = [ctx.check(p) for p in info.paths]
        return scope_of(self.spec.name, info, real, ctx.cwd, ctx.display)
