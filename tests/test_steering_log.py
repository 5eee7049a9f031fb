"""Steering, below the wire (issue 28): how a steer lives in the session log (restored
history, replayed transcript), and the moments an agent over the wire cannot be made to
hit on purpose, reached in an in-process agent: a turn a steer started cancelled before
its first step, or while it waits for the turn before it; an internal failure."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from acp_agent.config import Config
from acp_agent.conversation import AssistantMessage as Assistant
from acp_agent.conversation import TextPart, ToolCallPart, ToolResultMessage, UserMessage
from acp_agent.handlers import steering as handler
from acp_agent.handlers.agent import Agent
from acp_agent.handlers.services import Services
from acp_agent.protocol import types as t
from acp_agent.sessions.records import (
    AddMessage,
    Header,
    Prompt,
    Record,
    Steer,
    TurnEnd,
    Update,
)
from acp_agent.sessions.replay import INTERRUPTED, restore
from acp_agent.sessions.session import Session
from acp_agent.sessions.steers import NOT_ACTED_UPON
from acp_agent.sessions.transcript import transcript

from .inproc import InProcessAgent
from .limits import WAIT, eventually
from .schema_check import SchemaChecker

AT = "2026-01-01T00:00:00.000Z"


def text(s: str) -> t.TextContent:
    return t.TextContent(text=s)


def shown(message_id: str, s: str) -> Update:
    return Update(update=t.UserMessageChunk(content=text(s), message_id=message_id))


def user(s: str) -> UserMessage:
    return UserMessage([TextPart(s)])


HEAD = Header(id="sess_steer", cwd="/w", created_at=AT)
CALL = Assistant([ToolCallPart("c1", "run_command", {"command": "ls"})])


class TestTheLog:
    def test_a_steer_that_joined_is_shown_once_where_it_joined(self) -> None:
        records: list[Record] = [
            HEAD,
            Prompt(message_id="msg_x_1", blocks=[text("go")], at=AT),
            AddMessage(message=user("go")),
            AddMessage(message=CALL),
            Steer(message_id="msg_x_2", blocks=[text("faster")], at=AT),
            Update(update=t.ToolCall(tool_call_id="call_1", title="ls", status="completed")),
            AddMessage(message=ToolResultMessage("c1", "run_command", [TextPart("a")])),
            shown("msg_x_2", "faster"),
            AddMessage(message=user("faster")),
            TurnEnd(stop_reason="end_turn", at=AT),
        ]
        updates = transcript(records)
        assert [type(u).__name__ for u in updates] == [
            "UserMessageChunk", "ToolCall", "UserMessageChunk"]
        assert updates[-1] == t.UserMessageChunk(content=text("faster"), message_id="msg_x_2")
        state = restore(records)
        assert state.history[-1] == user("faster") and len(state.history) == 4
        assert state.next_message_id == 3

    def test_a_steer_that_started_a_turn_is_its_prompt(self) -> None:
        """Accepted while the turn before was ending; joined by a second steer before the
        turn it started ran: each shown once, nothing marked as not acted upon."""
        records: list[Record] = [
            HEAD,
            Prompt(message_id="msg_x_1", blocks=[text("go")], at=AT),
            AddMessage(message=user("go")),
            Steer(message_id="msg_x_2", blocks=[text("next")], at=AT),
            Steer(message_id="msg_x_3", blocks=[text("and this")], at=AT),
            TurnEnd(stop_reason="end_turn", at=AT),
            Prompt(message_id="msg_x_2", blocks=[text("next")], at=AT),
            AddMessage(message=user("next")),
            shown("msg_x_3", "and this"),
            AddMessage(message=user("and this")),
            TurnEnd(stop_reason="end_turn", at=AT),
        ]
        said = [(u.message_id, u.content) for u in transcript(records)
                if isinstance(u, t.UserMessageChunk)]  # fmt: skip
        assert said == [
            ("msg_x_1", text("go")), ("msg_x_2", text("next")), ("msg_x_3", text("and this"))]
        assert restore(records).history == [user("go"), user("next"), user("and this")]

    def test_a_steer_pending_when_the_process_died(self) -> None:
        """Shown where it was sent; kept in history after the interrupted call's result,
        as not acted upon, before the next prompt."""
        crashed: list[Record] = [
            HEAD,
            Prompt(message_id="msg_x_1", blocks=[text("go")], at=AT),
            AddMessage(message=user("go")),
            AddMessage(message=CALL),
            Update(update=t.ToolCall(tool_call_id="call_1", title="ls", status="pending")),
            Steer(message_id="msg_x_2", blocks=[text("stop")], at=AT),
        ]
        later: list[Record] = [
            Prompt(message_id="msg_x_4", blocks=[text("again")], at=AT),
            AddMessage(message=user("again")),
            TurnEnd(stop_reason="end_turn", at=AT),
        ]
        kept = [user("go"), CALL,
                ToolResultMessage("c1", "run_command", [TextPart(INTERRUPTED)], True),
                UserMessage([TextPart(NOT_ACTED_UPON), TextPart("stop")])]  # fmt: skip
        for records, tail in ((crashed, []), ([*crashed, *later], [user("again")])):
            assert restore(records).history == [*kept, *tail]
            said = [u.content for u in transcript(records) if isinstance(u, t.UserMessageChunk)]
            assert said == [text("go"), text("stop"), *([text("again")] if tail else [])]
        assert restore(crashed).next_message_id == 4  # past m2, and the id the crash lost
        # another process still runs it: the steer may yet join, so it is not shown
        live = [u for u in transcript(crashed, live=True) if isinstance(u, t.UserMessageChunk)]
        assert live == [t.UserMessageChunk(content=text("go"), message_id="msg_x_1")]


# --------------------------------------------------------------------------- in process


@pytest.fixture
async def running(
    checker: SchemaChecker, tmp_path: Path, workspace: str
) -> AsyncIterator[tuple[InProcessAgent, Services, Session]]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([[{"text": "ok"}], [{"text": "ok"}]]))
    config = Config(state_dir=str(tmp_path / "state"), offline_script=str(script))
    async with InProcessAgent(checker, config) as client:
        await client.initialize()
        sid = await client.new_session(workspace)
        assert client.connection is not None
        agent = client.connection.routes["initialize"].handler.__self__  # type: ignore[attr-defined]
        assert isinstance(agent, Agent)
        sv = await agent.settled()  # (the session answered for is open)
        yield client, sv, sv.sessions.require(sid)


def not_acted(session: Session) -> list[str]:
    return [
        "".join(p.text for p in m.parts[1:] if isinstance(p, TextPart))
        for m in session.history
        if isinstance(m, UserMessage) and m.parts[0] == TextPart(NOT_ACTED_UPON)
    ]


async def steer_now(sv: Services, session: Session, s: str) -> str:
    steered = await handler.steer(sv, session.id, [text(s)], start_when_idle=True)
    assert steered.message_id is not None
    return steered.outcome


async def test_a_started_turn_cancelled_before_its_first_step(
    running: tuple[InProcessAgent, Services, Session],
) -> None:
    client, sv, session = running
    assert await steer_now(sv, session, "one") == "startedNewTurn"
    assert await steer_now(sv, session, "two") == "injected"
    (turn,) = session.turns
    assert turn.task is not None and inspect.getcoroutinestate(turn.task.get_coro()) == (  # type: ignore[arg-type]
        inspect.CORO_CREATED)
    session.cancel()  # no step of it has run
    await eventually(lambda: len(not_acted(session)) == 2, "both steers kept")
    assert not_acted(session) == ["one", "two"] and not session.turns
    shown = [u["update"]["content"]["text"] for u in client.updates
             if u["update"]["sessionUpdate"] == "user_message_chunk"]  # fmt: skip
    assert shown == ["one", "two"]
    assert (await client.prompt(session.id, "next"))["stopReason"] == "end_turn"


async def test_a_started_turn_cancelled_while_it_waits_for_the_turn_before(
    running: tuple[InProcessAgent, Services, Session],
) -> None:
    client, sv, session = running
    async with session.lock:  # a turn before it, still running
        assert await steer_now(sv, session, "one") == "startedNewTurn"
        (turn,) = session.turns
        assert turn.task is not None
        coro: Any = turn.task.get_coro()
        await eventually(lambda: inspect.getcoroutinestate(coro) == inspect.CORO_SUSPENDED,
                         "the turn waiting for the lock")  # fmt: skip
        assert await steer_now(sv, session, "two") == "injected"
        session.cancel()
        await asyncio.wait_for(asyncio.shield(turn.task), WAIT)
        assert not session.turns and not not_acted(session)  # in place: after the lock
    await eventually(lambda: len(not_acted(session)) == 2, "both steers kept")
    assert not_acted(session) == ["one", "two"]
    assert (await client.prompt(session.id, "next"))["stopReason"] == "end_turn"


async def test_an_internal_failure_answers_failed(
    running: tuple[InProcessAgent, Services, Session], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    client, _, session = running

    def broken(*args: object, **kwargs: object) -> list[Any]:
        raise RuntimeError("a bug")

    monkeypatch.setattr(handler, "user_parts", broken)
    params = {"sessionId": session.id, "prompt": [{"type": "text", "text": "x"}]}
    assert await client.request("_session/steering", params) == {"outcome": "failed"}
    assert not session.turns
