"""Chunk coalescing (``ACP_AGENT_COALESCE_CHUNKS``, issue 17): text chunks of one message
sent within one turn of the event loop leave as one ``session/update``; anything else ends
the merge and keeps its place; the first chunk of a burst waits for nothing but the loop
turn; without the variable every chunk is its own update. Through the agent, the text the
client is shown and the session's replay are the same either way."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from acp_agent.errors import InvalidParams
from acp_agent.protocol import types as t
from acp_agent.rpc.connection import Connection
from acp_agent.rpc.framing import LineReader
from acp_agent.server import COALESCE_ENV, ChunkMerger, merge_chunks

from .fakes.llm_server import Burst, FakeLLMServer
from .harness import AgentProcess
from .schema_check import SchemaChecker


def chunk(
    text: str, mid: str = "m1", sid: str = "s1", thought: bool = False
) -> t.SessionNotification:
    kind = t.AgentThoughtChunk if thought else t.AgentMessageChunk
    return t.SessionNotification(
        session_id=sid, update=kind(content=t.TextContent(text=text), message_id=mid)
    )


class Sink:
    """stdout as the agent has it: ``drain`` waits only for a slow reader (never here)."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def write_line(self, line: bytes) -> None:
        self.lines.append(line)

    async def drain(self) -> None:
        return None

    async def aclose(self, timeout: float = 1.0) -> None:
        return None


def lines_of(sink: Sink) -> list[dict[str, Any]]:
    out = [json.loads(line) for line in sink.lines]
    sink.lines.clear()
    return out


def texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["params"]["update"]["content"]["text"] for m in messages]


@pytest.fixture
def wire() -> tuple[Connection, Sink]:
    received = Sink()
    connection = Connection(LineReader(), received)
    connection.coalesce["session/update"] = ChunkMerger()
    return connection, received


async def test_chunks_of_one_loop_turn_leave_as_one(wire: tuple[Connection, Sink]) -> None:
    connection, received = wire
    for piece in ("Hel", "lo", " world"):
        await connection.notify("session/update", chunk(piece))
    await asyncio.sleep(0)  # the loop turns: the held chunk leaves
    assert texts(lines_of(received)) == ["Hello world"]


async def test_the_first_chunk_waits_for_nothing_but_the_loop_turn(
    wire: tuple[Connection, Sink],
) -> None:
    connection, received = wire
    await connection.notify("session/update", chunk("first"))
    await asyncio.sleep(0)
    assert texts(lines_of(received)) == ["first"]


async def test_what_does_not_merge_keeps_its_place(wire: tuple[Connection, Sink]) -> None:
    connection, received = wire
    tool = t.SessionNotification(
        session_id="s1", update=t.ToolCall(tool_call_id="call_1", title="Read")
    )
    sequence = [
        chunk("a"),
        chunk("b"),
        chunk("think", thought=True),  # another kind
        chunk("c", mid="m2"),  # another message
        chunk("d", sid="s2", mid="m2"),  # another session
        tool,
        chunk("e", mid="m2"),
        chunk("f", mid="m2"),
    ]
    for item in sequence:
        await connection.notify("session/update", item)
    connection._send_error(7, InvalidParams("x"))  # a response: after what came before
    await connection.notify("session/update", chunk("g", mid="m2"))
    await asyncio.sleep(0)
    got = lines_of(received)
    updates = [m.get("params", {}).get("update", {}) for m in got]
    shown = [u.get("content", {}).get("text") or u.get("toolCallId") or "error" for u in updates]
    assert shown == ["ab", "think", "c", "d", "call_1", "ef", "error", "g"]


async def test_annotated_chunks_never_merge() -> None:
    plain = chunk("a")
    annotated = t.SessionNotification(
        session_id="s1",
        update=t.AgentMessageChunk(
            content=t.TextContent(text="b", annotations=t.Annotations(priority=1.0)),
            message_id="m1",
        ),
    )
    assert merge_chunks(plain, annotated) is None
    assert merge_chunks(plain, chunk("b")) == chunk("ab")


async def test_without_coalescing_every_chunk_is_an_update() -> None:
    received = Sink()
    connection = Connection(LineReader(), received)
    for piece in ("a", "b", "c"):
        await connection.notify("session/update", chunk(piece))
    await asyncio.sleep(0)
    assert texts(lines_of(received)) == ["a", "b", "c"]


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer(default=Burst(400, "w ", per_event=True)) as s:
        yield s


@pytest.mark.parametrize("coalesce", [False, True])
async def test_through_the_agent(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer, coalesce: bool
) -> None:
    """The whole reply arrives at once: merged into fewer updates, or one per delta; the
    same text shown and the same replay either way."""
    env = {"OPENAI_API_KEY": "k", **({COALESCE_ENV: "1"} if coalesce else {})}
    agent = AgentProcess(checker, "--state-dir", state_dir, "--model", "openai:gpt-4.1",
                         "--base-url", server.openai_url, env=env)  # fmt: skip
    async with agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        await agent.prompt(sid, "go")
        shown = agent.updates_of(sid, "agent_message_chunk")
        assert "".join(u["content"]["text"] for u in shown) == "w " * 400
        assert (len(shown) < 400) if coalesce else (len(shown) == 400)
        await agent.request("session/close", {"sessionId": sid})
        before = len(agent.updates)
        await agent.request("session/load", {"sessionId": sid, "cwd": workspace, "mcpServers": []})
        replayed = [u["update"] for u in agent.updates[before:] if u["sessionId"] == sid]
        messages = [u for u in replayed if u["sessionUpdate"] == "agent_message_chunk"]
        assert [m["content"]["text"] for m in messages] == ["w " * 400]
