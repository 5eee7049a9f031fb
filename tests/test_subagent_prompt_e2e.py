"""What a subagent is told: whom it answers (not "the user sees every call"), and no
spawn_agent at the last level of nesting, where it could only fail."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from acp_agent.engine.instructions import DELEGATE

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall
from .routes import CHAT
from .schema_check import SchemaChecker


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def spawn(call_id: str, title: str) -> Reply:
    args = {"title": title, "description": "A helper.", "prompt": f"{title}: do it."}
    return Reply([ToolCall(call_id, "spawn_agent", json.dumps(args)), Finish("tool_calls")])


async def test_subagents_are_told_whom_they_answer_and_the_last_cannot_spawn(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    server.enqueue(spawn("p1", "Lead"), spawn("c1", "Worker"),
                   Reply([Text("worker done"), Finish("stop")]),
                   Reply([Text("lead done"), Finish("stop")]),
                   Reply([Text("all done"), Finish("stop")]))  # fmt: skip
    async with CHAT.agent(checker, state_dir, server, tmp_path, "--mode", "bypass") as agent:
        await agent.initialize()
        assert (await agent.prompt(await agent.new_session(workspace), "go"))[
            "stopReason"] == "end_turn"
    parent, child, grandchild = (r.body for r in server.requests[:3])
    for body, depth in ((parent, 0), (child, 1), (grandchild, 2)):
        system = CHAT.system(body)
        assert ("the user sees every tool call" in system) is (depth == 0)
        assert ("you are a subagent: another agent gave you this task" in system) is (depth > 0)
        assert ("spawn_agent" in CHAT.tool_names(body)) is (depth < 2)
        assert (DELEGATE.strip() in system) is (depth < 2)
