"""MCP servers that change, die, or live in the editor, end to end: the agent process
over real stdio (every message it writes checked against the schema), a real MCP server,
and a fake model (the offline script, or the fake OpenAI server to see what each model
request offered)."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ..fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall
from ..harness import AgentProcess
from ..limits import MCP_START
from ..procs import alive
from ..schema_check import SchemaChecker
from .acp_bridge import AcpBridge
from .conftest import LIVE

NOTICES: dict[str, Any] = {"session": {"notices": {}}}


def live(name: str, *args: str) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [LIVE, *args], "env": []}


def mcp_start(tmp_path: Path) -> str:
    """A configuration file letting a first prompt wait for the servers' start."""
    path = tmp_path / "mcp-start.toml"
    path.write_text(MCP_START)
    return str(path)


def scripted(checker: SchemaChecker, state_dir: str, tmp_path: Path,
             script: list[list[dict[str, Any]]]) -> AgentProcess:
    """An agent on the offline model playing ``script``, one response per model request."""
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return AgentProcess(checker, "--state-dir", state_dir, "--config", mcp_start(tmp_path),
                        env={"ACP_AGENT_OFFLINE_SCRIPT": str(path)})


def call(tool: str, /, **arguments: Any) -> list[dict[str, Any]]:
    return [{"tool_call": {"name": tool, "arguments": arguments}}]


def tools_of(server: FakeLLMServer, index: int) -> list[str]:
    return [t["function"]["name"] for t in server.requests[index].body.get("tools", [])]


def commands(agent: AgentProcess, sid: str) -> set[str]:
    latest = agent.updates_of(sid, "available_commands_update")[-1]
    return {c["name"] for c in latest["availableCommands"]}


@pytest.fixture
async def model() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as server:
        yield server


async def test_a_list_change_reaches_the_next_model_request_and_the_commands(
    checker: SchemaChecker, state_dir: str, workspace: str, model: FakeLLMServer, tmp_path: Path
) -> None:
    """The model adds a tool and a prompt through the server: the very next model request
    of the same turn offers the new tool (and the model calls it), and the client's
    command list is resent with the new prompt."""
    model.enqueue(
        Reply([ToolCall("c1", "mcp__live__add_tool", json.dumps({"name": "fresh"})),
               ToolCall("c2", "mcp__live__add_prompt", json.dumps({"name": "brief"})),
               Finish("tool_calls")]),
        Reply([ToolCall("c3", "mcp__live__fresh", "{}"), Finish("tool_calls")]),
        Reply([Text("done"), Finish("stop")]),
    )
    agent = AgentProcess(checker, "--state-dir", state_dir, "--model", "openai:gpt-4.1",
                         "--base-url", model.openai_url, "--config", mcp_start(tmp_path),
                         env={"OPENAI_API_KEY": "k"})  # fmt: skip
    async with agent:
        await agent.initialize()
        result = await agent.request("session/new", {"cwd": workspace,
                                                     "mcpServers": [live("live")]})
        sid = result["sessionId"]
        assert (await agent.prompt(sid, "grow"))["stopReason"] == "end_turn"
        assert "mcp__live__fresh" not in tools_of(model, 0)
        assert "mcp__live__fresh" in tools_of(model, 1)
        *_, fresh = agent.tool_calls(sid)
        assert fresh["status"] == "completed" and "I am fresh" in json.dumps(fresh["content"])
        assert "mcp:live:brief" in commands(agent, sid)


async def test_a_server_dying_mid_turn_is_restarted_and_the_turn_goes_on(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
) -> None:
    """The tool call in flight fails with a clear message, the turn ends normally, the
    user is told the server was restarted, and its tools work again. Killed once more,
    it is reported and stays down; closing the agent leaves no process behind."""
    pid_file = tmp_path / "live.pids"
    script = [call("mcp__live__crash"), [{"text": "carrying on"}],
              call("mcp__live__echo", text="again"), [{"text": "fine"}]]
    agent = scripted(checker, state_dir, tmp_path, script)
    async with agent:
        await agent.initialize(NOTICES)
        result = await agent.request("session/new", {
            "cwd": workspace, "mcpServers": [live("live", "--pid-file", str(pid_file))]})
        sid = result["sessionId"]
        assert (await agent.prompt(sid, "crash it"))["stopReason"] == "end_turn"
        (crashed,) = agent.tool_calls(sid)
        assert crashed["status"] == "failed"
        assert ("MCP server 'live' exited during a call to 'crash'; it is being restarted"
                in json.dumps(crashed["content"]))
        assert "carrying on" in json.dumps(agent.updates_of(sid, "agent_message_chunk"))

        def notice(title: str) -> bool:
            return any(n["title"] == title for n in agent.updates_of(sid, "notice"))

        await agent.wait_for(lambda: notice("MCP server 'live' stopped; restarted"))
        assert (await agent.prompt(sid, "echo"))["stopReason"] == "end_turn"
        assert agent.tool_calls(sid)[-1]["status"] == "completed"
        first, second = (int(line) for line in pid_file.read_text().split())
        assert not alive(first)

        os.kill(second, signal.SIGKILL)
        await agent.wait_for(lambda: notice("MCP server 'live' stopped again"))
    assert len(pid_file.read_text().split()) == 2
    assert not alive(second)


async def test_mcp_over_acp(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
) -> None:
    """An MCP server the client provides (type acp): advertised, reached with mcp/message
    requests (schema-checked), its tools called, and its list changes (a listen stream
    carried by mcp/message notifications) reach the agent."""
    script = [call("mcp__bridge__echo", text="over acp"),
              call("mcp__bridge__add_tool", name="fresh"), call("mcp__bridge__fresh"),
              [{"text": "done"}]]
    agent = scripted(checker, state_dir, tmp_path, script)
    async with agent, AcpBridge.for_agent(agent, "srv-1", LIVE) as bridge:
        caps = (await agent.initialize(NOTICES))["agentCapabilities"]["mcpCapabilities"]
        assert caps == {"http": True, "sse": True, "acp": True}
        result = await agent.request("session/new", {"cwd": workspace,
                                                     "mcpServers": [bridge.config("bridge")]})
        sid = result["sessionId"]
        assert (await agent.prompt(sid, "use it"))["stopReason"] == "end_turn"
        echo, add, fresh = agent.tool_calls(sid)
        assert echo["status"] == "completed" and "echo: over acp" in json.dumps(echo)
        assert add["status"] == "completed"
        assert fresh["status"] == "completed" and "I am fresh" in json.dumps(fresh)
        methods = [r["method"] for r in bridge.requests]
        # the modern era: probed first, list changes on a listen stream (an agent whose
        # probe timed out on a slow start re-probes once the server says it is modern)
        assert methods[0] == "server/discover" and "subscriptions/listen" in methods
        assert {"tools/list", "prompts/list", "tools/call"} <= set(methods)
        assert len({r["requestId"] for r in bridge.requests}) == len(bridge.requests)
        assert agent.updates_of(sid, "notice") == []


async def test_an_acp_server_the_client_does_not_serve_is_reported(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
) -> None:
    """A client that answers mcp/message with "method not found": the server fails to
    start, the user is told, the session works."""
    agent = scripted(checker, state_dir, tmp_path, [[{"text": "still here"}]])
    async with agent:
        await agent.initialize(NOTICES)
        result = await agent.request("session/new", {"cwd": workspace, "mcpServers": [
            {"type": "acp", "name": "ghost", "serverId": "nobody"}]})
        sid = result["sessionId"]
        assert (await agent.prompt(sid, "hi"))["stopReason"] == "end_turn"
        (notice,) = agent.updates_of(sid, "notice")
        assert notice["title"] == "MCP server 'ghost' failed to start"
        assert "Method not found" in notice.get("description", "")
