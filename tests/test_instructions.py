"""What the model is told: the built-in instructions, the environment, the project's
AGENTS.md, the client's systemPrompt, plan mode and mode changes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from acp_agent.engine.instructions import builtin, system_prompt
from acp_agent.engine.projectrules import MAX_INSTRUCTIONS_CHARS
from acp_agent.sessions.session import Session
from acp_agent.tools import builtin_tools

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall
from .harness import AgentProcess
from .schema_check import SchemaChecker


async def prompt_of(cwd: Path, env: dict[str, str] | None = None, **kw: Any) -> str:
    async def emit(sid: str, update: Any) -> None:
        return None

    if (top := kw.pop("git_root", None)) is not None:
        subprocess.run(["git", "init", "-q", str(top)], check=True)

    session = Session("sess_x", str(cwd), emit, mode=kw.pop("mode", "ask"), model="openai:gpt-4.1")
    return await system_prompt(session, env=env or {}, **kw)


def test_the_fixed_overhead_stays_small() -> None:
    """System prompt plus every tool's schema: well under 6 k tokens (~3.5 chars a token
    is a safe over-estimate for English and JSON)."""
    tools = json.dumps([{"name": s.name, "description": s.description, "parameters": s.parameters}
                        for s in builtin_tools().specs()])
    assert (len(builtin()) + len(tools)) / 3.5 < 6_000


async def test_the_environment_block(tmp_path: Path) -> None:
    text = await prompt_of(tmp_path, {"SHELL": "/bin/bash"})
    assert text.startswith(builtin())
    assert f"Workspace root: {tmp_path}" in text
    assert "- Shell: commands run as `/bin/bash -c <command>`" in text
    assert "Model: openai:gpt-4.1" in text
    assert "Git: not a git repository" in text
    assert "Permission mode: ask (reads run; every edit and command asks" in text


async def test_git_state_and_every_agents_md_from_the_root_down(tmp_path: Path) -> None:
    """Root first, the session's directory last; CLAUDE.md only where a directory has no
    AGENTS.md; files below the session's directory are not in the system prompt."""
    repo = tmp_path / "repo"
    (repo / "pkg" / "sub" / "deeper").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(repo)], check=True)
    (repo / "AGENTS.md").write_text("Root rules: run `make check`.\n")
    (repo / "pkg" / "AGENTS.md").write_text("Package rules: no new dependencies.\n")
    (repo / "pkg" / "CLAUDE.md").write_text("Claude rules.\n")
    (repo / "pkg" / "sub" / "CLAUDE.md").write_text("Sub rules (CLAUDE.md).\n")
    (repo / "pkg" / "sub" / "deeper" / "AGENTS.md").write_text("Deeper rules.\n")
    (repo / "untracked.txt").write_text("x")
    text = await prompt_of(repo / "pkg" / "sub")
    assert "a repository on branch trunk, 3 uncommitted change(s)" in text  # pkg/ is one
    assert text.index("Root rules") < text.index("Package rules") < text.index("Sub rules")
    assert "Claude rules" not in text and "Deeper rules" not in text
    assert f"# Instructions from {repo / 'pkg' / 'AGENTS.md'}" in text


async def test_the_chain_has_a_total_budget_the_outermost_cut_first(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "AGENTS.md").write_text("R" * 15_000)
    (tmp_path / "a" / "AGENTS.md").write_text("A" * 15_000)
    (tmp_path / "a" / "b" / "AGENTS.md").write_text("B" * 15_000)
    text = await prompt_of(tmp_path / "a" / "b", {}, git_root=tmp_path)
    assert "B" * 15_000 in text and "A" * 15_000 in text  # the nearest two are whole
    assert "R" * 2_000 in text and "R" * 2_001 not in text
    assert f"[Cut at 2,000 characters; read {tmp_path / 'AGENTS.md'} for the rest.]" in text


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


async def test_an_agents_md_below_the_workspace_comes_with_the_first_result_under_it(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
) -> None:
    """Once per session, attached to the result of the first call that touches a path
    under its directory (outermost first); other results carry nothing."""
    ws = Path(workspace)
    (ws / "calc" / "ops").mkdir(parents=True)
    (ws / "calc" / "AGENTS.md").write_text("Calc rules: keep it pure.\n")
    (ws / "calc" / "ops" / "CLAUDE.md").write_text("Ops rules.\n")
    (ws / "calc" / "ops" / "add.py").write_text("def add(a, b):\n    return a + b\n")
    (ws / "calc" / "core.py").write_text("X = 1\n")
    (ws.parent / "secret.txt").write_text("TOP SECRET\n")
    (ws / "leak").mkdir()
    (ws / "leak" / "AGENTS.md").symlink_to(ws.parent / "secret.txt")  # out of the roots
    (ws / "leak" / "x.txt").write_text("x\n")

    def read(call_id: str, path: str) -> Reply:
        return Reply([ToolCall(call_id, "read_file", json.dumps({"path": path})),
                      Finish("tool_calls")])  # fmt: skip

    server.enqueue(read("c1", "hello.txt"), read("c2", "calc/ops/add.py"),
                   read("c3", "calc/core.py"), read("c4", "leak/x.txt"),
                   Reply([Text("ok"), Finish("stop")]))
    async with openai_agent(checker, state_dir, server) as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        await agent.prompt(sid, "look")
    results = [m["content"] for m in server.requests[-1].body["messages"] if m["role"] == "tool"]
    assert "Rules" not in results[0] and "rules" not in results[0]
    first = results[1]
    assert first.index("<system-reminder>Instructions from calc/AGENTS.md, for the files "
                       "under calc/") < first.index("Instructions from calc/ops/CLAUDE.md")
    assert "Calc rules: keep it pure." in first and "Ops rules." in first
    assert "rules" not in results[2]  # told once
    assert "Calc rules" not in system_of(server)
    assert "SECRET" not in results[3] and "system-reminder" not in results[3]
    said = json.dumps(agent.updates_of(sid))
    assert "Instruction file skipped" in said and "outside the session" in said


async def test_after_a_model_switch_the_system_prompt_names_the_new_model(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    server.enqueue(Reply([Text("a"), Finish("stop")]), Reply([Text("b"), Finish("stop")]))
    config = tmp_path / "c.toml"
    config.write_text('models = ["openai:gpt-4.1-mini"]\n')
    agent = AgentProcess(checker, "--state-dir", state_dir, "--model", "openai:gpt-4.1",
                         "--base-url", server.openai_url, "--config", str(config),
                         env={"OPENAI_API_KEY": "k"})  # fmt: skip
    async with agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        await agent.prompt(sid, "hi")
        await agent.prompt(sid, "/model openai:gpt-4.1-mini")
        await agent.prompt(sid, "again")
    assert "- Model: openai:gpt-4.1\n" in system_of(server, 0)
    assert "- Model: openai:gpt-4.1-mini\n" in system_of(server, 1)
