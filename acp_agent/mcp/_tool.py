"""An MCP server's tool as a :class:`~acp_agent.tools.base.Tool`.

Permission mapping from the tool's annotations (hints from the server, see below):

==========================================  ==============  =========
annotations                                 kind            access
==========================================  ==============  =========
none (or no hint set)                       ``other``       execute
``readOnlyHint``                            ``read``        read
``readOnlyHint`` + ``openWorldHint``        ``fetch``       read
``destructiveHint: false`` +
``openWorldHint: false`` (local, additive)  ``edit``        write
anything else (may destroy, or reach out)   ``edit``        execute
==========================================  ==============  =========

So in ``ask`` mode read-only tools run without asking and the rest ask; ``plan`` mode
refuses everything but read-only tools. MCP tools touch no workspace paths the agent
can see, so ``access`` reports none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..conversation import ToolSpec
from ..tools.base import Access, CallInfo, ToolContext, ToolKind, ToolOutput
from ._convert import tool_output

if TYPE_CHECKING:
    from mcp.types import Tool as McpToolDef
    from mcp.types import ToolAnnotations

    from ._server import ServerConnection


def classify(annotations: ToolAnnotations | None) -> tuple[ToolKind, Access]:
    """Tool kind and permission access from MCP tool annotations (see the module table)."""
    if annotations is None:
        return "other", "execute"
    read_only = annotations.read_only_hint
    destructive = annotations.destructive_hint
    open_world = annotations.open_world_hint
    if read_only:
        return ("fetch" if open_world else "read"), "read"
    if read_only is None and destructive is None and open_world is None:
        return "other", "execute"
    if destructive is False and open_world is False:
        return "edit", "write"
    return "edit", "execute"


def _parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The tool's input schema, with the ``type: object`` and ``properties`` that some
    providers insist on."""
    params = dict(schema)
    params.setdefault("type", "object")
    if params.get("type") == "object":
        params.setdefault("properties", {})
    return params


class McpTool:
    """One tool of one server, offered to the model under a namespaced name."""

    def __init__(self, server: ServerConnection, tool: McpToolDef, name: str) -> None:
        self.server = server
        self.tool_name = tool.name
        self.display = (
            tool.title
            or (tool.annotations.title if tool.annotations is not None else None)
            or tool.name
        )
        description = (tool.description or "").strip() or f"The {self.display!r} tool."
        self.spec = ToolSpec(
            name=name,
            description=f"{description}\n\n(Tool {tool.name!r} of MCP server {server.name!r}.)",
            parameters=_parameters(tool.input_schema),
        )
        self.kind: ToolKind
        self._access: Access
        self.kind, self._access = classify(tool.annotations)

    concurrent = False

    def parse(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as given: the server validates them against its own schema."""
        return dict(raw)

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallInfo:
        return CallInfo(f"{self.display} ({self.server.name} MCP)", self._access)

    def describe_partial(self, members: Mapping[str, Any], ctx: ToolContext) -> CallInfo:
        return self.describe(dict(members), ctx)  # the title names the tool, not its input

    async def prepare(self, args: dict[str, Any], ctx: ToolContext) -> None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        result = await self.server.call_tool(self.tool_name, args)
        return tool_output(result)

    def __repr__(self) -> str:
        return f"<McpTool {self.spec.name} kind={self.kind} access={self._access}>"
