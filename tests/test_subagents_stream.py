"""Subagents' streams (issue 16): session-directed messages as ``session_message`` +
``session_message_chunk``\\ s.

Over stdio on the scripted offline model (one shared script, one response per model
request in request order), plus the replay and chunking units in process."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acp_agent.childstream import split

from .harness import AgentProcess
from .schema_check import SchemaChecker

Script = list[list[dict[str, Any]]]
SUBAGENTS: dict[str, Any] = {"subagents": {}}
SESSION_ID = re.compile(r"sess_[0-9a-f]{24}")
LONG = "\n".join(f"Line {i}: " + " ".join(["finding"] * 12) for i in range(60))  # ~6 kB


def spawn(title: str, prompt: str) -> dict[str, Any]:
    return {"tool_call": {"name": "spawn_agent", "arguments": {
        "title": title, "description": f"The {title.lower()} helper.", "prompt": prompt}}}


READ = {"tool_call": {"name": "read_file", "arguments": {"path": "hello.txt"}}}
ECHO = {"tool_call": {"name": "run_command", "arguments": {"command": "echo hi"}}}


@pytest.fixture
def script_file(tmp_path: Path) -> Callable[[Script], str]:
    def write(script: Script) -> str:
        path = tmp_path / f"script{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps(script))
        return str(path)
    return write


def start(checker: SchemaChecker, state_dir: str, script: str | None = None) -> AgentProcess:
    env = {"ACP_AGENT_OFFLINE_SCRIPT": script} if script else {}
    return AgentProcess(checker, "--state-dir", state_dir, env=env)


def announced(agent: AgentProcess, parent: str) -> list[str]:
    seen: list[str] = []
    for u in agent.updates_of(parent, "subagent_update"):
        if u["sessionId"] not in seen:
            seen.append(u["sessionId"])
    return seen


def states(agent: AgentProcess, parent: str, child: str) -> list[dict[str, Any]]:
    return [u["state"] for u in agent.updates_of(parent, "subagent_update")
            if u["sessionId"] == child and "state" in u]


def text_of(agent: AgentProcess, sid: str) -> str:
    return "".join(u["content"]["text"] for u in agent.updates_of(sid, "agent_message_chunk"))


def shown(updates: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client keeps of one transcript: message texts by id, tool calls merged by
    id, session-directed messages folded by id, subagent patches in order."""
    texts: dict[str, str] = {}
    calls: dict[str, dict[str, Any]] = {}
    messages: dict[str, dict[str, Any]] = {}
    patches: list[dict[str, Any]] = []
    for u in updates:
        kind = u["sessionUpdate"]
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            texts[u["messageId"]] = texts.get(u["messageId"], "") + u["content"]["text"]
        elif kind in ("tool_call", "tool_call_update"):
            calls.setdefault(u["toolCallId"], {}).update(
                {k: v for k, v in u.items() if k != "sessionUpdate"})
        elif kind == "session_message":
            messages.setdefault(u["messageId"], {}).update(
                {k: v for k, v in u.items() if k != "sessionUpdate"})
        elif kind == "session_message_chunk":
            m = messages.setdefault(u["messageId"], {"messageId": u["messageId"]})
            content = m.setdefault("content", [{"type": "text", "text": ""}])
            content[-1] = {"type": "text", "text": content[-1]["text"] + u["content"]["text"]}
        elif kind == "subagent_update":
            patches.append(u)
    return {"texts": texts, "calls": calls, "messages": messages, "patches": patches}


def replayed(agent: AgentProcess, since: int) -> list[dict[str, Any]]:
    return agent.updates[since:]


async def load(agent: AgentProcess, sid: str, workspace: str) -> int:
    before = len(agent.updates)
    await agent.request("session/load", {"sessionId": sid, "cwd": workspace, "mcpServers": []})
    return before


# ---------------------------------------------------------------------- chunks


async def test_messages_stream_as_chunks(checker: SchemaChecker, state_dir: str, workspace: str,
                                         script_file: Callable[[Script], str]) -> None:
    """Each view: an upsert with participants and link, then its content in chunks of at
    most 2,048 characters; the long answer needs several."""
    script = script_file([[spawn("Writer", "Report.")], [{"text": LONG}], [{"text": "ok"}]])
    async with start(checker, state_dir, script) as agent:
        await agent.initialize(SUBAGENTS)
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
        [child] = announced(agent, sid)
        for transcript in (sid, child):
            kinds = [u for u in agent.updates_of(transcript)
                     if u["sessionUpdate"].startswith("session_message")]
            upserts = [u for u in kinds if u["sessionUpdate"] == "session_message"]
            assert len(upserts) == 2 and all("content" not in u for u in upserts)
            for upsert in upserts:  # the upsert first, then its chunks
                mine = [u for u in kinds if u["messageId"] == upsert["messageId"]]
                assert mine[0] is upsert and len(mine) > 1
                assert {u["sessionUpdate"] for u in mine[1:]} == {"session_message_chunk"}
                assert all(len(u["content"]["text"]) <= 2048 for u in mine[1:])
        answer = [m for m in shown(agent.updates_of(sid))["messages"].values()
                  if m["senderSessionId"] == child]
        [(received)] = answer
        assert received["content"] == [{"type": "text", "text": LONG}]
        chunks = [u for u in agent.updates_of(sid, "session_message_chunk")
                  if u["messageId"] == received["messageId"]]
        assert len(chunks) == len(split(LONG)) > 1
        assert all(c["content"]["text"].endswith("\n") for c in chunks[:-1])
        assert text_of(agent, child) == LONG  # streamed live on the child's own transcript


def test_split() -> None:
    assert split("") == [""]
    assert split("short") == ["short"]
    assert split("a" * 5000, 2048) == ["a" * 2048, "a" * 2048, "a" * 904]
    lines = "x" * 1500 + "\n" + "y" * 1500
    assert split(lines, 2048) == ["x" * 1500 + "\n", "y" * 1500]
    early = "x" * 10 + "\n" + "y" * 3000  # a newline in the first half is not worth it
    assert split(early, 2048) == [early[:2048], early[2048:]]
    assert "".join(split(LONG)) == LONG
