"""Subagents' streams (issue 16): session-directed messages as ``session_message`` +
``session_message_chunk``\\ s, children's transcripts kept in the top-level session's log
and replayed under their ids by ``session/load`` (only to a client with ``subagents``),
and ``session/cancel`` of a child stopping it and its descendants only.

Over stdio on the scripted offline model (one shared script, one response per model
request in request order), plus the replay and chunking units in process."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acp_agent.engine.childstream import ChildLog, split
from acp_agent.protocol import types as t
from acp_agent.sessions.records import ChildUpdate, Prompt, Record, TurnEnd, Update
from acp_agent.sessions.transcript import transcripts

from .harness import AgentProcess, ResponseError
from .limits import WAIT
from .schema_check import SchemaChecker, validate_def
from .test_subagents import announced, spawn, states

Script = list[list[dict[str, Any]]]
SUBAGENTS: dict[str, Any] = {"subagents": {}}
SESSION_ID = re.compile(r"sess_[0-9a-f]{24}")
LONG = "\n".join(f"Line {i}: " + " ".join(["finding"] * 12) for i in range(60))  # ~6 kB


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


# ---------------------------------------------------------------------- replay


async def test_load_replays_children_under_their_ids(
    checker: SchemaChecker, state_dir: str, workspace: str, script_file: Callable[[Script], str]
) -> None:
    """A new process loads the parent: each child's transcript (and a grandchild's)
    comes back under its id, after its announcement, as a client kept it live; the
    replayed children are restricted sessions."""
    script = script_file([
        [spawn("Lead", "Look around.")],  # parent
        [{"thinking": "hm"}, {"text": "Reading. "}, READ],  # child
        [spawn("Worker", "Count.")],  # child
        [{"text": "Two lines."}],  # grandchild
        [{"text": "hello.txt has two lines."}],  # child
        [{"text": "Done."}],  # parent
    ])
    async with start(checker, state_dir, script) as agent:
        await agent.initialize(SUBAGENTS)
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
        [child] = announced(agent, sid)
        [grandchild] = announced(agent, child)
        live = {s: shown(agent.updates_of(s)) for s in (sid, child, grandchild)}
    assert live[child]["texts"] and live[child]["calls"] and live[grandchild]["messages"]

    async with start(checker, state_dir) as agent:
        await agent.initialize(SUBAGENTS)
        since = await load(agent, sid, workspace)
        updates = replayed(agent, since)
        for s in (sid, child, grandchild):
            again = shown([u["update"] for u in updates if u["sessionId"] == s])
            assert again["texts"] == live[s]["texts"], s
            assert again["calls"] == live[s]["calls"], s
            assert again["messages"] == live[s]["messages"], s
            assert again["patches"] == live[s]["patches"], s
        for parent, kid in ((sid, child), (child, grandchild)):
            owners = [u["sessionId"] for u in updates]
            announce = next(i for i, u in enumerate(updates) if u["sessionId"] == parent
                            and u["update"].get("sessionUpdate") == "subagent_update"
                            and u["update"]["sessionId"] == kid)
            assert announce < owners.index(kid)
        # each message comes back as one session_message with its whole content
        kinds = {u["update"]["sessionUpdate"] for u in updates}
        assert "session_message_chunk" not in kinds and "session_message" in kinds
        for kid in (child, grandchild):
            with pytest.raises(ResponseError) as err:
                await agent.prompt(kid, "hi")
            assert err.value.code == -32602 and "subagent" in str(err.value.message)


async def test_without_the_capability_nothing_of_children(
    checker: SchemaChecker, state_dir: str, workspace: str, script_file: Callable[[Script], str]
) -> None:
    """Stored with subagents, loaded by a client without: no child id, no subagent
    update. Run without subagents: nothing of the child is stored."""
    script = script_file([[spawn("Helper", "Help.")], [{"text": "helped"}], [{"text": "ok"}]])
    async with start(checker, state_dir, script) as agent:
        await agent.initialize(SUBAGENTS)
        exposed = await agent.new_session(workspace)
        await agent.prompt(exposed, "go")
    async with start(checker, state_dir, script) as agent:
        await agent.initialize({})
        hidden = await agent.new_session(workspace)
        await agent.prompt(hidden, "go")
        since = await load(agent, exposed, workspace)
        wire = json.dumps(replayed(agent, since))
        assert set(SESSION_ID.findall(wire)) == {exposed}
        assert "subagent_update" not in wire and "session_message" not in wire
    logs = {p.stem: p.read_text() for p in Path(state_dir).rglob("*.jsonl")}
    assert '"r":"child"' in logs[exposed] and '"r":"child"' not in logs[hidden]


def _child(sid: str, update: t.SessionUpdate) -> ChildUpdate:
    return ChildUpdate(session_id=sid, update=update)


def test_transcripts_unit() -> None:
    """Children after their announcements (a grandchild inside its parent's), chunks
    folded into messages, an unannounced child left out, nothing for plain clients."""
    text = t.TextContent
    records: list[Record] = [
        Prompt(message_id="p1", blocks=[text(text="go")], at="now"),
        Update(update=t.SubagentUpdate(session_id="kid", title="Kid")),
        _child("kid", t.SessionMessage(message_id="m1", sender_session_id="root",
                                       recipient_session_id="kid", sender_message_id="o1")),
        Update(update=t.SessionMessage(message_id="o1", sender_session_id="root",
                                       recipient_session_id="kid", recipient_message_id="m1")),
        Update(update=t.SessionMessageChunk(message_id="o1", content=text(text="do "))),
        _child("kid", t.SessionMessageChunk(message_id="m1", content=text(text="do "))),
        Update(update=t.SessionMessageChunk(message_id="o1", content=text(text="it"))),
        _child("kid", t.SessionMessageChunk(message_id="m1", content=text(text="it"))),
        _child("kid", t.AgentMessageChunk(message_id="a1", content=text(text="wor"))),
        _child("kid", t.AgentMessageChunk(message_id="a1", content=text(text="king"))),
        _child("kid", t.SubagentUpdate(session_id="grand")),
        _child("grand", t.AgentMessageChunk(message_id="g1", content=text(text="deep"))),
        _child("ghost", t.AgentMessageChunk(message_id="x", content=text(text="boo"))),
        Update(update=t.SubagentUpdate(session_id="kid", state=t.IdleStateUpdate())),
        TurnEnd(stop_reason="end_turn", at="now"),
    ]
    caps = t.ClientCapabilities(subagents=t.SubagentCapabilities())
    out = transcripts("root", records, caps)
    assert [(sid, type(u).__name__) for sid, u in out] == [
        ("root", "UserMessageChunk"),
        ("root", "SubagentUpdate"),
        ("kid", "SessionMessage"),
        ("kid", "AgentMessageChunk"),
        ("kid", "SubagentUpdate"),
        ("grand", "AgentMessageChunk"),
        ("root", "SessionMessage"),
        ("root", "SubagentUpdate"),
    ]
    incoming = out[2][1]
    assert isinstance(incoming, t.SessionMessage)
    assert incoming.content == [text(text="do it")] and incoming.sender_message_id == "o1"
    outgoing = out[6][1]
    assert isinstance(outgoing, t.SessionMessage)
    assert outgoing.content == [text(text="do it")] and outgoing.recipient_message_id == "m1"
    assert out[3][1] == t.AgentMessageChunk(message_id="a1", content=text(text="working"))
    for _, update in out:
        assert not validate_def("SessionUpdate", json.loads(_encode(update)))
    plain = transcripts("root", records, t.ClientCapabilities())
    assert {sid for sid, _ in plain} == {"root"}
    assert not any(isinstance(u, t.SubagentUpdate | t.SessionMessage) for _, u in plain)


def _encode(update: t.SessionUpdate) -> bytes:
    import msgspec

    return msgspec.json.encode(update)


class _Log:
    def __init__(self) -> None:
        self.records: list[Record] = []

    def append(self, record: Record) -> None:
        self.records.append(record)


def test_child_log_coalesces_chunks() -> None:
    """Consecutive text chunks of one message: one record; usage and notices: none."""
    from acp_agent.sessions.session import Session

    async def emit(sid: str, update: t.SessionUpdate) -> None:
        return None

    root = Session("sess_root", "/", emit)
    kid = Session("sess_kid", "/", emit)
    kid.parent = root
    log = _Log()
    root.log = log  # type: ignore[assignment]
    kept = ChildLog(kid)
    text = t.TextContent
    for piece in ("a", "b", "c"):
        kept.record(t.AgentMessageChunk(message_id="m1", content=text(text=piece)))
    kept.record(t.AgentThoughtChunk(message_id="m2", content=text(text="t")))
    kept.record(t.UsageUpdate(used=1, size=2))
    kept.record(t.Notice(severity="info", title="x"))
    kept.record(t.ToolCall(tool_call_id="c1", title="Read"))
    kept.record(t.AgentMessageChunk(message_id="m3", content=text(text="z" * 5000)))
    kept.record(t.AgentMessageChunk(message_id="m3", content=text(text="end")))
    kept.flush()
    assert [(r.session_id, r.update) for r in log.records if isinstance(r, ChildUpdate)] == [
        ("sess_kid", t.AgentMessageChunk(message_id="m1", content=text(text="abc"))),
        ("sess_kid", t.AgentThoughtChunk(message_id="m2", content=text(text="t"))),
        ("sess_kid", t.ToolCall(tool_call_id="c1", title="Read")),
        ("sess_kid", t.AgentMessageChunk(message_id="m3", content=text(text="z" * 5000))),
        ("sess_kid", t.AgentMessageChunk(message_id="m3", content=text(text="end"))),
    ]


# ---------------------------------------------------------------------- cancel


async def test_cancel_of_a_child_stops_its_descendants_only(
    checker: SchemaChecker, state_dir: str, workspace: str, script_file: Callable[[Script], str]
) -> None:
    """session/cancel naming the child: it and its grandchild end idle/cancelled; the
    parent carries on to end_turn. Advertised: the announcement's cancel capability."""
    script = script_file([
        [spawn("Lead", "Delegate.")],  # parent
        [spawn("Worker", "Work.")],  # child
        [{"text": "working "}, {"hang": True}],  # grandchild
        [{"text": "Lead was cancelled; carrying on."}],  # parent
    ])
    async with start(checker, state_dir, script) as agent:
        await agent.initialize(SUBAGENTS)
        sid = await agent.new_session(workspace)
        task = agent.start_request("session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        await agent.wait_for(lambda: bool(announced(agent, sid))
                             and bool(announced(agent, announced(agent, sid)[0]))
                             and "working" in text_of(agent, announced(agent, announced(
                                 agent, sid)[0])[0]))  # fmt: skip
        [child] = announced(agent, sid)
        [grandchild] = announced(agent, child)
        assert agent.updates_of(sid, "subagent_update")[0]["capabilities"] == {"cancel": {}}
        await agent.notify("session/cancel", {"sessionId": child})
        response = await task
        assert response["result"]["stopReason"] == "end_turn"
        assert states(agent, sid, child)[-1]["stopReason"] == "cancelled"
        assert states(agent, child, grandchild)[-1]["stopReason"] == "cancelled"
        assert "carrying on" in text_of(agent, sid)


async def test_cancel_of_a_child_leaves_its_sibling(
    checker: SchemaChecker, state_dir: str, workspace: str, script_file: Callable[[Script], str]
) -> None:
    """Two children side by side, both waiting on a permission question: cancelling one
    by its id leaves the other, which finishes; the parent reads both outcomes."""
    script = script_file([
        [spawn("Alpha", "Run echo."), spawn("Beta", "Run echo.")],  # parent
        [ECHO], [ECHO],  # the two children, in whichever order they ask
        [{"text": "child done"}],  # the child that goes on
        [{"text": "One was cancelled, one is done."}],  # parent
    ])
    asked: dict[str, asyncio.Future[dict[str, Any]]] = {}
    both = asyncio.Event()

    async def permission(params: dict[str, Any]) -> dict[str, Any]:
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        asked[params["sessionId"]] = fut
        if len(asked) == 2:
            both.set()
        return await fut

    async with start(checker, state_dir, script) as agent:
        agent.handlers["session/request_permission"] = permission
        await agent.initialize(SUBAGENTS)
        sid = await agent.new_session(workspace)
        task = agent.start_request("session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        await asyncio.wait_for(both.wait(), WAIT)
        doomed, survivor = announced(agent, sid)
        await agent.notify("session/cancel", {"sessionId": doomed})
        asked[doomed].set_result({"outcome": {"outcome": "cancelled"}})  # as the spec says
        await agent.wait_for(lambda: bool(states(agent, sid, doomed))
                             and states(agent, sid, doomed)[-1]["state"] == "idle")
        assert states(agent, sid, survivor)[-1]["state"] == "requires_action"
        request = next(r for r in agent.client_requests if r["params"].get("sessionId") == survivor)
        option = next(o["optionId"] for o in request["params"]["options"]
                      if o["kind"] == "allow_once")
        asked[survivor].set_result({"outcome": {"outcome": "selected", "optionId": option}})
        response = await task
        assert response["result"]["stopReason"] == "end_turn"
        last = states(agent, sid, doomed)[-1]
        assert last["state"] == "idle" and last["stopReason"] == "cancelled"
        assert states(agent, sid, survivor)[-1]["stopReason"] == "end_turn"
        assert text_of(agent, survivor) == "child done"
