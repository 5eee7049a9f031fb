"""update_plan, and the built-in toolset as a whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_agent.errors import ToolError
from acp_agent.tools import ToolOutput, Toolset, builtin_tools
from acp_agent.tools.plan import UpdatePlan

from .fake_client import FakeClient, MakeClient, wire
from .raw import Raw

plan = Raw(UpdatePlan())

ENTRIES = [
    {"content": "Read the code", "priority": "high", "status": "completed"},
    {"content": "Fix the bug", "priority": "medium", "status": "in_progress"},
    {"content": "Run the tests", "priority": "low", "status": "pending"},
]


async def test_update_plan_emits_complete_plan(ws: Path, fake: MakeClient) -> None:
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
    scope = plan.scope({"entries": ENTRIES}, ctx)
    assert scope is not None and scope.key == "tool:update_plan"


@pytest.mark.parametrize("entries, message", [
    (None, "missing required field `entries`"),
    ("do it", r"Expected `array`, got `str` - at `\$.entries`"),
    (["do it"], r"Expected `object`, got `str` - at `\$.entries\[0\]`"),
    ([{"content": "", "priority": "high", "status": "pending"}], "content"),
    ([{"content": "x", "priority": "urgent", "status": "pending"}], "priority"),
    ([{"content": "x", "priority": "high", "status": "done"}], "status"),
    ([{"content": "x", "priority": "high"}], "status"),
    ([ENTRIES[0], {"content": "x", "priority": "high", "status": "pending", "eta": 1}],
     r"unknown field `eta` - at `\$.entries\[1\]`"),
])
async def test_update_plan_rejects_bad_entries(
    ws: Path, fake: MakeClient, entries: Any, message: str
) -> None:
    client = fake()
    with pytest.raises(ToolError, match=message):
        await plan.run({"entries": entries}, client.context(str(ws)))
    assert client.emitted == []


def test_builtin_toolset() -> None:
    tools = builtin_tools()
    assert isinstance(tools, Toolset)
    names = [s.name for s in tools.specs()]
    assert names == ["read_file", "write_file", "edit_file", "move_file", "list_directory",
                     "glob", "grep", "run_command", "web_fetch", "update_plan", "write_plan",
                     "discard_plan", "ask_user"]
    kinds = {name: tools.get(name).kind for name in names}  # type: ignore[union-attr]
    assert kinds == {"read_file": "read", "write_file": "edit", "edit_file": "edit",
                     "move_file": "move",
                     "list_directory": "read", "glob": "search", "grep": "search",
                     "run_command": "execute", "web_fetch": "fetch", "update_plan": "think",
                     "write_plan": "think", "discard_plan": "think", "ask_user": "think"}
    codex = [s.name for s in builtin_tools(style="codex").specs()]
    assert codex == ["read_file", "apply_patch", "list_directory", "glob", "grep",
                     "run_command", "web_fetch", "update_plan", "write_plan", "discard_plan",
                     "ask_user"]
    for spec in tools.specs():
        params = spec.parameters
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params.get("required", [])) <= set(params["properties"])
        assert spec.description
    assert ToolOutput("x").content == []


async def test_invalid_arguments_raise_tool_errors() -> None:
    """parse() rejects bad arguments with a ToolError naming the field and the
    parameters (the turn reports it to the model)."""
    tools = builtin_tools()
    cases: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {}), ("read_file", {"path": 3}), ("write_file", {"content": "x"}),
        ("edit_file", {"path": ""}), ("glob", {}), ("grep", {"path": "."}),
        ("run_command", {"command": ""}), ("read_file", {"path": "x", "limit": "ten"}),
    ]
    for name, args in cases:
        tool = tools.get(name)
        assert tool is not None
        with pytest.raises(ToolError, match=f"{name} takes: "):
            tool.parse(args)


# ---------------------------------------------------------------- plan documents (draft `plan`)

def _with_plan_capability(client: FakeClient) -> None:
    import msgspec as _msgspec

    from acp_agent.protocol import types as t

    client.capabilities = _msgspec.structs.replace(client.capabilities, plan=t.PlanCapabilities())


async def test_update_plan_uses_plan_update_when_advertised(ws: Path, fake: MakeClient) -> None:
    client = fake()
    _with_plan_capability(client)
    await plan.run({"entries": ENTRIES}, client.context(str(ws)))
    assert wire(client.emitted) == [{"sessionUpdate": "plan_update", "plan": {
        "type": "items", "planId": "checklist", "entries": ENTRIES}}]


async def test_write_plan_document_and_fallbacks(ws: Path, fake: MakeClient) -> None:
    from acp_agent.tools.plan import DiscardPlan, WritePlan

    doc = "## Plan\n\n- [x] Read the parser\n- [ ] Split the lexer\n\nNotes follow."
    rich = fake()
    _with_plan_capability(rich)
    await Raw(WritePlan()).run({"content": doc}, rich.context(str(ws)))
    await Raw(DiscardPlan()).run({}, rich.context(str(ws)))
    assert wire(rich.emitted) == [
        {
            "sessionUpdate": "plan_update",
            "plan": {"type": "markdown", "planId": "plan", "content": doc},
        },
        {"sessionUpdate": "plan_removed", "planId": "plan"},
        {"sessionUpdate": "plan_removed", "planId": "checklist"},
    ]
    plain = fake()  # no `plan` capability: never a draft update
    await Raw(WritePlan()).run({"content": doc}, plain.context(str(ws)))
    await Raw(WritePlan()).run({"content": "Just prose, no steps."}, plain.context(str(ws)))
    await Raw(DiscardPlan()).run({}, plain.context(str(ws)))
    assert wire(plain.emitted) == [
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "Read the parser", "priority": "medium", "status": "completed"},
                {"content": "Split the lexer", "priority": "medium", "status": "pending"},
            ],
        },
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "Just prose, no steps.\n"},
        },
        {"sessionUpdate": "plan", "entries": []},
    ]
    with pytest.raises(ToolError):
        await Raw(WritePlan()).run({"content": "  "}, plain.context(str(ws)))
