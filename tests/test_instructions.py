"""What the model is told: the built-in instructions, the environment, the project's
AGENTS.md, the client's systemPrompt, plan mode and mode changes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from acp_agent.engine.instructions import MAX_INSTRUCTIONS_CHARS, builtin, system_prompt
from acp_agent.sessions.session import Session
from acp_agent.tools import builtin_tools

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall
from .harness import AgentProcess
from .schema_check import SchemaChecker


async def prompt_of(cwd: Path, env: dict[str, str] | None = None, **kw: Any) -> str:
    async def emit(sid: str, update: Any) -> None:
        return None

    session = Session("sess_x", str(cwd), emit, mode=kw.pop("mode", "ask"), model="openai:gpt-4.1")
    return await system_prompt(session, env=env or {}, **kw)


def test_the_fixed_overhead_stays_small() -> None:
    """System prompt plus every tool's schema: well under 6 k tokens (~3.5 chars a token
    is a safe over-estimate for English and JSON)."""
    tools = json.dumps([{"name": s.name, "description": s.description, "parameters": s.parameters}
                        for s in builtin_tools().specs()])
    assert (len(builtin()) + len(tools)) / 3.5 < 6_000


async def test_the_environment_block(tmp_path: Path) -> None:
    text = await prompt_of(tmp_path, {"SHELL": "/bin/zsh"})
    assert text.startswith(builtin())
    assert f"Workspace root: {tmp_path}" in text
    assert "shell: /bin/zsh" in text and "Model: openai:gpt-4.1" in text
    assert "Git: not a git repository" in text
    assert "Permission mode: ask (reads run; every edit and command asks" in text


async def test_git_state_and_the_nearest_agents_md(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg" / "sub").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(repo)], check=True)
    (repo / "AGENTS.md").write_text("Root rules: run `make check`.\n")
    (repo / "pkg" / "AGENTS.md").write_text("Package rules: no new dependencies.\n")
    (repo / "pkg" / "CLAUDE.md").write_text("Claude rules.\n")
    (repo / "untracked.txt").write_text("x")
    text = await prompt_of(repo / "pkg" / "sub")
    assert "a repository on branch trunk, 3 uncommitted change(s)" in text  # pkg/ is one
    assert "Package rules" in text and "Root rules" not in text and "Claude rules" not in text
    assert f"# Instructions from {repo / 'pkg' / 'AGENTS.md'}" in text


async def test_claude_md_when_there_is_no_agents_md_and_the_users_own(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("Use tabs.\n")
    config = tmp_path / "config"
    (config / "acp-agent").mkdir(parents=True)
    (config / "acp-agent" / "AGENTS.md").write_text("Answer in French.\n")
    (tmp_path / ".acp-agent").mkdir()
    (tmp_path / ".acp-agent" / "instructions.md").write_text("Project extra.\n")
    text = await prompt_of(tmp_path, {"XDG_CONFIG_HOME": str(config)})
    assert text.index("Answer in French") < text.index("Use tabs") < text.index("Project extra")


async def test_huge_instructions_are_cut_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("rule\n" * 10_000)
    text = await prompt_of(tmp_path)
    note = f"[Cut at {MAX_INSTRUCTIONS_CHARS:,} characters; read {tmp_path / 'AGENTS.md'}"
    assert note in text and len(text) < len(builtin()) + MAX_INSTRUCTIONS_CHARS + 2_000


async def test_the_configured_prompt_replaces_the_builtin(tmp_path: Path) -> None:
    text = await prompt_of(tmp_path, configured="Be terse in {cwd}.")
    assert text.startswith(f"Be terse in {tmp_path}.") and builtin() not in text


# ---------------------------------------------------------------------- through the agent


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def openai_agent(checker: SchemaChecker, state_dir: str, server: FakeLLMServer) -> AgentProcess:
    return AgentProcess(checker, "--state-dir", state_dir, "--model", "openai:gpt-4.1",
                        "--base-url", server.openai_url, env={"OPENAI_API_KEY": "k"})


def system_of(server: FakeLLMServer, index: int = -1) -> str:
    messages = server.requests[index].body["messages"]
    assert messages[0]["role"] == "system"
    return str(messages[0]["content"])


def tools_of(server: FakeLLMServer, index: int = -1) -> list[str]:
    return [t["function"]["name"] for t in server.requests[index].body.get("tools", [])]


async def test_the_clients_system_prompt_append_override_and_errors(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
) -> None:
    for _ in range(3):
        server.enqueue(Reply([Text("ok"), Finish("stop")]))
    async with openai_agent(checker, state_dir, server) as agent:
        await agent.initialize()

        def block(text: str) -> dict[str, Any]:
            return {"type": "text", "text": text}

        appended = await agent.new_session(workspace, systemPrompt={
            "mode": "append", "content": [block("Always answer in haiku.")]})
        await agent.prompt(appended, "hi")
        text = system_of(server)
        assert text.startswith(builtin()) and "Always answer in haiku." in text
        replaced = await agent.new_session(workspace, systemPrompt={
            "mode": "override", "content": [block("You are a rubber duck.")]})
        await agent.prompt(replaced, "hi")
        text = system_of(server)
        assert text.startswith("You are a rubber duck.") and builtin() not in text
        assert f"Workspace root: {workspace}" in text  # the environment still comes along
        for bad, where in (
            ({"mode": "merge", "content": [block("x")]}, "mode"),
            ({"mode": "append", "content": []}, "content"),
            ({"mode": "append", "content": [{"type": "image", "data": "AA==",
                                             "mimeType": "image/png"}]}, "content[0]"),
        ):
            response = await agent.request_raw(
                "session/new", {"cwd": workspace, "mcpServers": [], "systemPrompt": bad})
            assert response["error"]["code"] == -32602
            assert f"$.systemPrompt.{where}" in response["error"]["message"]
    # a new process: load without systemPrompt keeps the stored one
    async with openai_agent(checker, state_dir, server) as again:
        await again.initialize()
        await again.request("session/load", {"sessionId": appended, "cwd": workspace,
                                             "mcpServers": []})
        await again.prompt(appended, "again")
        assert "Always answer in haiku." in system_of(server)


async def test_plan_mode_offers_reading_and_mode_changes_reach_the_model(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
) -> None:
    server.enqueue(
        Reply([Text("ok"), Finish("stop")]),
        Reply([ToolCall("c1", "write_file", json.dumps({"path": "x", "content": "x"})),
               Finish("tool_calls")]),
        Reply([Text("refused, fine"), Finish("stop")]),
        Reply([Text("back"), Finish("stop")]),
    )
    async with openai_agent(checker, state_dir, server) as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        await agent.prompt(sid, "hi")
        assert "write_file" in tools_of(server) and "run_command" in tools_of(server)
        first_system = system_of(server)
        await agent.request("session/set_mode", {"sessionId": sid, "modeId": "plan"})
        await agent.prompt(sid, "plan it")
        offered = tools_of(server)
        assert "write_file" not in offered and "run_command" not in offered
        assert {"read_file", "grep", "write_plan", "update_plan"} <= set(offered)
        assert system_of(server) == first_system  # stable: the prefix caches
        note = server.requests[-2].body["messages"][-1]
        assert note["role"] == "user" and "now plan: read-only" in note["content"]
        result = server.requests[-1].body["messages"][-1]
        assert result["role"] == "tool" and "plan mode" in result["content"]
        await agent.request("session/set_mode", {"sessionId": sid, "modeId": "ask"})
        await agent.prompt(sid, "go")
        assert "write_file" in tools_of(server)
        assert "now ask" in server.requests[-1].body["messages"][-1]["content"]
