"""update_plan, and the built-in toolset as a whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_agent.errors import ToolError
from acp_agent.tools import Tool, ToolOutput, Toolset, builtin_tools
from acp_agent.tools.plan import UpdatePlan

from .fake_client import wire

plan = UpdatePlan()

ENTRIES = [
    {"content": "Read the code", "priority": "high", "status": "completed"},
    {"content": "Fix the bug", "priority": "medium", "status": "in_progress"},
    {"content": "Run the tests", "priority": "low", "status": "pending"},
]


async def test_update_plan_emits_complete_plan(ws: Path, fake) -> None:
    client = fake(read=True, write=True, terminal=True)
    ctx = client.context(str(ws))
    out = await plan.run({"entries": ENTRIES}, ctx)
    assert wire(client.emitted) == [{"sessionUpdate": "plan", "entries": ENTRIES}]
    assert out.text.splitlines() == ["Plan updated: 1/3 completed.", "[x] Read the code",
                                     "[~] Fix the bug", "[ ] Run the tests"]
    await plan.run({"entries": ENTRIES[:1]}, ctx)
    assert wire(client.emitted[-1])["entries"] == ENTRIES[:1]  # the whole list, every time
    assert client.calls == []
    assert plan.kind == "think"
    assert plan.access({"entries": ENTRIES}, ctx) == ("none", [])
    assert plan.title({"entries": ENTRIES}, ctx) == "Update plan"
    assert plan.permission_key({"entries": ENTRIES}) == "update_plan"


@pytest.mark.parametrize("entries, message", [
    (None, "must be a list"),
    ("do it", "must be a list"),
    (["do it"], "entry 1 must be an object"),
    ([{"content": "", "priority": "high", "status": "pending"}], "content"),
    ([{"content": "x", "priority": "urgent", "status": "pending"}], "priority"),
    ([{"content": "x", "priority": "high", "status": "done"}], "status"),
    ([{"content": "x", "priority": "high"}], "status"),
    ([ENTRIES[0], {"content": "x", "priority": "high", "status": "pending", "eta": 1}],
     "entry 2: unknown field"),
])
async def test_update_plan_rejects_bad_entries(ws: Path, fake, entries: Any, message: str) -> None:
    client = fake()
    with pytest.raises(ToolError, match=message):
        await plan.run({"entries": entries}, client.context(str(ws)))
    assert client.emitted == []


def test_builtin_toolset() -> None:
    tools = builtin_tools()
    assert isinstance(tools, Toolset)
    names = [s.name for s in tools.specs()]
    assert names == ["read_file", "write_file", "edit_file", "list_directory", "glob", "grep",
                     "run_command", "update_plan"]
    kinds = {name: tools.get(name).kind for name in names}  # type: ignore[union-attr]
    assert kinds == {"read_file": "read", "write_file": "edit", "edit_file": "edit",
                     "list_directory": "read", "glob": "search", "grep": "search",
                     "run_command": "execute", "update_plan": "think"}
    for spec in tools.specs():
        params = spec.parameters
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
        assert spec.description
    tool: Tool = tools.get("read_file")  # type: ignore[assignment]
    assert tool.permission_key({"path": "x"}) == "read_file"
    assert ToolOutput("x").content == []


async def test_invalid_arguments_raise_tool_errors(ws: Path, fake) -> None:
    """title()/access() reject bad arguments with ToolError (the turn reports them)."""
    ctx = fake().context(str(ws))
    tools = builtin_tools()
    cases: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {}), ("read_file", {"path": 3}), ("write_file", {"content": "x"}),
        ("edit_file", {"path": ""}), ("glob", {}), ("grep", {"path": "."}),
        ("run_command", {"command": ""}), ("read_file", {"path": "x", "limit": "ten"}),
    ]
    for name, args in cases:
        tool = tools.get(name)
        assert tool is not None
        with pytest.raises(ToolError):
            tool.title(args, ctx)
            tool.access(args, ctx)
            await tool.run(args, ctx)
