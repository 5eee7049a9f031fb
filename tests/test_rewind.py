"""``/rewind``: the turns listed, the workspace and the conversation taken back to before
the chosen one (the next model request is without those turns, and the model is told),
recorded so that ``session/load`` shows it and the reloaded history agrees; a form for a
client that takes them; the checkpoints deleted with the session."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall
from .harness import AgentProcess
from .schema_check import SchemaChecker


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def agent_of(checker: SchemaChecker, state_dir: str, server: FakeLLMServer) -> AgentProcess:
    return AgentProcess(checker, "--state-dir", state_dir, "--model", "openai:gpt-4.1",
                        "--base-url", server.openai_url, "--mode", "bypass",
                        env={"OPENAI_API_KEY": "k"})  # fmt: skip


def write(call_id: str, path: str, content: str) -> Reply:
    return Reply([ToolCall(call_id, "write_file", json.dumps({"path": path, "content": content})),
                  Finish("tool_calls")])  # fmt: skip


def said(agent: AgentProcess, sid: str) -> str:
    return "".join(u["content"]["text"] for u in agent.updates_of(sid, "agent_message_chunk"))


async def test_rewind_two_turns_with_both(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
) -> None:
    ws = Path(workspace)
    server.enqueue(
        write("c1", "a.txt", "alpha file"), Reply([Text("ALPHA-ANSWER"), Finish("stop")]),
        write("c2", "b.txt", "beta file"), Reply([Text("BETA-ANSWER"), Finish("stop")]),
        Reply([Text("GAMMA-ANSWER"), Finish("stop")]),
        Reply([Text("DELTA-ANSWER"), Finish("stop")]),
        Reply([Text("EPSILON-ANSWER"), Finish("stop")]),
    )  # fmt: skip
    async with agent_of(checker, state_dir, server) as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        for text in ("alpha request", "beta request", "gamma request"):
            await agent.prompt(sid, text)
        await agent.prompt(sid, "/rewind")
        listing = said(agent, sid)
        assert "3. " in listing and "\u201calpha request\u201d" in listing
        assert listing.index("alpha request") < listing.index("gamma request")
        assert "1. " in listing.split("gamma request")[0].rsplit("\n", 1)[-1]
        await agent.prompt(sid, "/rewind 2 both")
        assert (ws / "a.txt").read_text() == "alpha file" and not (ws / "b.txt").exists()
        assert ("\u21a9 Rewound the conversation (2 turn(s) taken back) and the workspace "
                "(1 file(s) put back) to before \u201cbeta request\u201d.") in said(agent, sid)
        await agent.prompt(sid, "delta request")
        sent = json.dumps(server.requests[-1].body["messages"], ensure_ascii=False)
        assert "alpha request" in sent and "ALPHA-ANSWER" in sent
        for gone in ("beta request", "BETA-ANSWER", "b.txt", "gamma request", "GAMMA-ANSWER"):
            assert gone not in sent.replace("\u201cbeta request\u201d", ""), gone
        assert "rewound the conversation to before their request" in sent  # told
        assert "/rewind" not in sent  # the commands themselves never reached the model
    async with agent_of(checker, state_dir, server) as again:
        await again.initialize()
        await again.request("session/load", {"sessionId": sid, "cwd": workspace,
                                             "mcpServers": []})  # fmt: skip
        shown = said(again, sid)
        assert "\u21a9 Rewound the conversation (2 turn(s) taken back)" in shown
        assert "BETA-ANSWER" in shown  # what happened stays in the transcript
        await again.prompt(sid, "epsilon request")
        sent = json.dumps(server.requests[-1].body["messages"], ensure_ascii=False)
        assert "BETA-ANSWER" not in sent and "DELTA-ANSWER" in sent
        checkpoints = Path(state_dir) / "checkpoints" / sid
        assert checkpoints.is_dir()
        await again.request("session/delete", {"sessionId": sid})
        assert not checkpoints.exists()  # deleted with the session


async def test_rewind_by_a_form_and_the_conversation_only(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
) -> None:
    ws = Path(workspace)
    server.enqueue(
        write("c1", "a.txt", "one"), Reply([Text("ONE"), Finish("stop")]),
        write("c2", "a.txt", "two"), Reply([Text("TWO"), Finish("stop")]),
        Reply([Text("THREE"), Finish("stop")]),
    )  # fmt: skip
    async with agent_of(checker, state_dir, server) as agent:
        forms: list[dict[str, Any]] = []

        def choose(params: dict[str, Any]) -> dict[str, Any]:
            forms.append(params)
            turn = params["requestedSchema"]["properties"]["turn"]["oneOf"][0]["const"]
            return {"action": "accept", "content": {"turn": turn, "restore": "conversation"}}

        agent.handlers["elicitation/create"] = choose
        await agent.initialize({"elicitation": {"form": {}}})
        sid = await agent.new_session(workspace)
        await agent.prompt(sid, "first")
        await agent.prompt(sid, "second")
        await agent.prompt(sid, "/rewind")
        options = forms[0]["requestedSchema"]["properties"]["turn"]["oneOf"]
        assert [o["const"] for o in options] == ["1", "2"]  # the latest first
        assert options[0]["title"].endswith("\u2014 second")
        assert (ws / "a.txt").read_text() == "two"  # the conversation only
        await agent.prompt(sid, "third")
        sent = json.dumps(server.requests[-1].body["messages"], ensure_ascii=False)
        assert "ONE" in sent and "TWO" not in sent and "The files were left as they are." in sent
