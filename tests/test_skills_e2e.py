"""Agent Skills through the agent: the catalogue in every provider's request (within its
budget, the user told what was left out), loading by the model (the ``skill`` tool) and
by ``/name args``, broken skills told, and changes on disk picked up for the next turn
without touching the system prompt (its cached prefix)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall
from .harness import AgentProcess
from .schema_check import SchemaChecker
from .test_skills import skill

FAMILIES = {
    "chat": ("openai:gpt-4.1", ""),
    "responses": ("openai:gpt-4.1", '[openai]\napi = "responses"\n'),
    "anthropic": ("anthropic:claude-sonnet-4-5", ""),
}


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def agent_for(checker: SchemaChecker, state_dir: str, server: FakeLLMServer, tmp_path: Path,
              family: str = "chat") -> AgentProcess:  # fmt: skip
    model, config = FAMILIES[family]
    home = tmp_path / "home"
    args = ["--state-dir", state_dir, "--model", model, "--mode", "bypass"]
    url = server.url if model.startswith("anthropic") else server.openai_url
    args += ["--base-url", url]
    if config:
        cfg = tmp_path / f"{family}.toml"
        cfg.write_text(config)
        args += ["--config", str(cfg)]
    env = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "HOME": str(home),
           "XDG_CONFIG_HOME": str(home / ".config")}  # fmt: skip
    return AgentProcess(checker, *args, env=env)


def system_of(body: dict[str, Any]) -> str:
    if "instructions" in body:  # the Responses API
        return str(body["instructions"])
    if "system" in body:  # Anthropic: blocks
        system = body["system"]
        return system if isinstance(system, str) else "".join(b["text"] for b in system)
    return str(body["messages"][0]["content"])


def text_of(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False)


@pytest.mark.parametrize("family", list(FAMILIES))
async def test_the_catalogue_reaches_every_providers_model_within_its_budget(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer,
    tmp_path: Path, family: str,
) -> None:  # fmt: skip
    where = Path(workspace) / ".agents" / "skills"
    skill(where, "release", "Cut a release of this project. Use when asked to release.")
    for i in range(30):  # more than the budget holds
        skill(where, f"zz-filler-{i:02d}", "Filler skill " + "padding " * 100)
    user = tmp_path / "home" / ".config" / "acp-agent" / "skills"
    skill(user, "standup", "Write my standup notes.")
    server.enqueue(Reply([Text("ok"), Finish("stop")]))
    async with agent_for(checker, state_dir, server, tmp_path, family) as agent:
        await agent.initialize({"session": {"notices": {}}})
        sid = await agent.new_session(workspace)
        await agent.prompt(sid, "hi")
        system = system_of(server.requests[-1].body)
        assert "# Skills" in system
        release = where / "release" / "SKILL.md"
        line = f"- release: Cut a release of this project. Use when asked to release. ({release})"
        assert line in system
        assert "zz-filler-00" in system and "more skill(s) are not listed" in system
        assert "standup" in system  # named among the left out, after the project's
        assert "Step one." not in system  # the instructions wait until loaded
        notices = [u for u in agent.updates_of(sid, "notice")
                   if u["title"] == "Skills left out of the model's list"]  # fmt: skip
        assert len(notices) == 1 and "standup" in notices[0]["description"]
        commands = agent.updates_of(sid, "available_commands_update")[-1]["availableCommands"]
        names = [c["name"] for c in commands]
        assert "release" in names and "standup" in names and "zz-filler-29" in names


async def test_the_model_loads_a_skill_and_the_user_invokes_one(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    where = Path(workspace) / ".agents" / "skills"
    skill(where, "release", "Cut a release.", "1. Bump the version in VERSION.\n2. Tag it.")
    skill(where, "changelog", raw="---\nname: changelog\ndescription: Write a changelog entry."
          "\nargument-hint: version\n---\nAdd an entry for $ARGUMENTS under Unreleased.\n")
    server.enqueue(
        Reply([ToolCall("c1", "skill", json.dumps({"name": "release"})), Finish("tool_calls")]),
        Reply([Text("Following the release skill."), Finish("stop")]),
        Reply([Text("Entry written."), Finish("stop")]),
    )
    async with agent_for(checker, state_dir, server, tmp_path) as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        await agent.prompt(sid, "please release")
        result = server.requests[1].body["messages"][-1]
        assert result["role"] == "tool" and "1. Bump the version in VERSION." in result["content"]
        assert f"Skill folder: {where / 'release'}" in result["content"]
        call = next(c for c in agent.tool_calls(sid) if c.get("title") == "Skill: release")
        assert call["status"] == "completed"
        commands = agent.updates_of(sid, "available_commands_update")[-1]["availableCommands"]
        changelog = next(c for c in commands if c["name"] == "changelog")
        assert changelog["input"] == {"hint": "version"}
        await agent.prompt(sid, "/changelog 2.1.0")
        sent = server.requests[-1].body["messages"][-1]
        assert sent["role"] == "user"
        content = sent["content"] if isinstance(sent["content"], str) else text_of(sent)
        assert "Use the skill `changelog`" in content
        assert "Add an entry for $ARGUMENTS under Unreleased." in content  # as written
        assert content.rstrip().endswith("2.1.0")


async def test_broken_skills_are_told_and_changes_reach_the_next_turn(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    where = Path(workspace) / ".agents" / "skills"
    skill(where, "first", "The first skill.")
    broken = skill(where, "broken", raw="---\nname: Broken\ndescription: x\n---\n")
    outside = tmp_path / "elsewhere"
    skill(outside, "linked", "Not ours.")
    os.symlink(outside / "linked", where / "linked")
    for _ in range(3):
        server.enqueue(Reply([Text("ok"), Finish("stop")]))
    async with agent_for(checker, state_dir, server, tmp_path) as agent:
        await agent.initialize({"session": {"notices": {}}})
        sid = await agent.new_session(workspace)
        await agent.prompt(sid, "one")
        told = {u["description"] for u in agent.updates_of(sid, "notice")
                if u["title"] == "Skill skipped"}  # fmt: skip
        assert any(str(broken) in d and "`Broken` may hold only" in d for d in told)
        assert any("linked" in d and "outside the session's roots" in d for d in told)
        assert len(told) == 2
        first_system = system_of(server.requests[-1].body)
        assert "- first: The first skill." in first_system and "linked" not in first_system
        skill(where, "second", "Added between turns.")
        (where / "first" / "SKILL.md").unlink()
        await agent.prompt(sid, "two")
        body = server.requests[-1].body
        assert system_of(body) == first_system  # the cached prefix is left alone
        message = body["messages"][-1]  # the note comes before the prompt's text
        assert message["role"] == "user"
        note, prompt = message["content"]
        assert note["text"].startswith("<system-reminder>") and prompt["text"] == "two"
        assert "added:\n- second: Added between turns." in note["text"]
        assert "removed: first" in note["text"]
        commands = agent.updates_of(sid, "available_commands_update")[-1]["availableCommands"]
        names = {c["name"] for c in commands}
        assert "second" in names and "first" not in names
        await agent.prompt(sid, "three")  # told once: no second note, no second notice
        assert "skills changed" not in text_of(server.requests[-1].body["messages"][-1])
        assert len([u for u in agent.updates_of(sid, "notice")
                    if u["title"] == "Skill skipped"]) == 2  # fmt: skip
