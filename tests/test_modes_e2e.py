"""Modes and the model, on every provider route: the same tools in every mode (plan mode
refuses a change when it is called), the system prompt unchanged, and a change of mode
told before the text of the next prompt, never after it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall
from .harness import AgentProcess
from .routes import ANTHROPIC, ROUTES, Route
from .schema_check import SchemaChecker


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer(billing=True) as s:
        yield s


def edit_call(route: Route, call_id: str) -> ToolCall:
    """A call that writes a file, in the route's edit format."""
    if route.name == "responses":  # a custom tool: the patch itself
        patch = "*** Begin Patch\n*** Add File: planned.txt\n+x\n*** End Patch\n"
        return ToolCall(call_id, "apply_patch", patch)
    return ToolCall(call_id, "write_file", json.dumps({"path": "planned.txt", "content": "x"}))


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.name)
async def test_every_mode_offers_the_same_tools_and_the_note_comes_first(
    route: Route, checker: SchemaChecker, state_dir: str, workspace: str,
    server: FakeLLMServer, tmp_path: Path,
) -> None:  # fmt: skip
    server.enqueue(
        Reply([Text("ok"), Finish("stop")]),
        Reply([edit_call(route, "c1"), Finish("tool_calls")]),
        Reply([Text("refused, fine"), Finish("stop")]),
        Reply([Text("back"), Finish("stop")]),
    )
    async with route.agent(checker, state_dir, server, tmp_path) as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        await agent.prompt(sid, "hi")
        await agent.request("session/set_mode", {"sessionId": sid, "modeId": "plan"})
        await agent.prompt(sid, "plan it")
        await agent.request("session/set_mode", {"sessionId": sid, "modeId": "ask"})
        await agent.prompt(sid, "go")
    bodies = [r.body for r in server.requests]
    assert len(bodies) == 4
    tools = [route.tools(b) for b in bodies]
    assert all(t == tools[0] for t in tools)  # names, descriptions, schemas: byte for byte
    assert {"read_file", "grep", "write_plan", "run_command"} <= set(route.tool_names(bodies[0]))
    assert all(route.system(b) == route.system(bodies[0]) for b in bodies)
    assert "Permission mode: ask" in route.system(bodies[0])
    # the note precedes the user's text, in the same user message; nothing follows it
    plan = route.user_texts(bodies[1])[-1]
    assert len(plan) == 2 and plan[1] == "plan it"
    assert plan[0].startswith("<system-reminder>The permission mode is now plan: read-only")
    assert route.user_texts(bodies[2])[-1] == plan  # the refusal's turn: still that prompt
    refusal = route.tool_results(bodies[2])[-1]
    assert "Refused: the session is in plan mode" in refusal
    assert not (Path(workspace) / "planned.txt").exists()
    back = route.user_texts(bodies[3])[-1]
    assert back[0].startswith("<system-reminder>The permission mode is now ask") and back[1] == "go"
    if route is ANTHROPIC:  # the cached prefix (tools, system) survives a change of mode
        bills = server.billing.bills if server.billing else []
        assert bills[1].cached >= bills[0].cache_write > 1000
        assert bills[1].cache_write < 400


async def test_plan_mode_asks_before_a_command_and_says_why(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    """In plan mode a command may run only after the user allows it, the question saying
    it must change nothing; no "always" is offered."""
    route = ROUTES[0]
    server.enqueue(
        Reply([ToolCall("c1", "run_command", json.dumps({"command": "git --version"})),
               Finish("tool_calls")]),
        Reply([Text("done"), Finish("stop")]),
    )
    async with route.agent(checker, state_dir, server, tmp_path, "--mode", "plan") as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        await agent.prompt(sid, "what git is there?")
        asked = [r for r in agent.client_requests
                 if r["method"] == "session/request_permission"]  # fmt: skip
    assert len(asked) == 1
    question = asked[0]["params"]
    assert question["toolCall"]["title"] == (  # (bubblewrap: the suite needs it)
        "Run `git --version` (sandboxed: read-only) (plan mode: allow it only if it changes"
        " nothing)")
    assert [o["kind"] for o in question["options"]] == ["allow_once", "reject_once"]
    assert "git version" in route.tool_results(server.requests[1].body)[-1]


async def test_the_offline_model_answers_the_prompt_after_a_mode_change(
    checker: SchemaChecker, state_dir: str, workspace: str
) -> None:
    """The note before the prompt is not the user's text: `write ae.txt hi` writes."""
    async with AgentProcess(checker, "--state-dir", state_dir) as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        await agent.prompt(sid, "hello")
        await agent.request("session/set_mode", {"sessionId": sid, "modeId": "accept-edits"})
        result = await agent.prompt(sid, "write ae.txt hi")
        assert result["stopReason"] == "end_turn"
    assert (Path(workspace) / "ae.txt").read_text() == "hi\n"
