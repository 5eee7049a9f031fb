"""Subagents (``spawn_agent``) end to end over stdio, on the scripted offline model.

The offline script is shared by the parent and its children, one response per model
request in request order; each script below notes whose request takes which response.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from .harness import AgentProcess, ResponseError, Scripted, allow_first_option

Script = list[list[dict[str, Any]]]
Start = Callable[..., Awaitable[str]]  # the `session` fixture: initialize, session/new
SUBAGENTS: dict[str, Any] = {"subagents": {}}
SESSION_ID = re.compile(r"sess_[0-9a-f]{24}")


def spawn(title: str, prompt: str) -> dict[str, Any]:
    return {"tool_call": {"name": "spawn_agent", "arguments": {
        "title": title, "description": f"The {title.lower()} helper.", "prompt": prompt}}}


@pytest.fixture
async def session(workspace: str) -> AsyncIterator[Callable[..., Any]]:
    async def start(agent: AgentProcess, caps: dict[str, Any] | None = None) -> str:
        await agent.initialize(caps)
        return await agent.new_session(workspace)
    yield start


# ---------------------------------------------------------------------- helpers


def announced(agent: AgentProcess, parent: str) -> list[str]:
    """Children announced on ``parent``'s stream, in order."""
    seen: list[str] = []
    for u in agent.updates_of(parent, "subagent_update"):
        if u["sessionId"] not in seen:
            seen.append(u["sessionId"])
    return seen


def states(agent: AgentProcess, parent: str, child: str) -> list[dict[str, Any]]:
    return [u["state"] for u in agent.updates_of(parent, "subagent_update")
            if u["sessionId"] == child and "state" in u]


def names(message: dict[str, Any], child: str) -> bool:
    """Whether an agent message is traffic naming ``child`` (other than its announcement)."""
    params = message.get("params") or {}
    if params.get("sessionId") == child:
        return True
    update = params.get("update") or {}
    return update.get("sessionUpdate") in (
        "session_message",
        "session_message_chunk",
    ) and child in (update.get("senderSessionId"), update.get("recipientSessionId"))


def assert_announced_first(agent: AgentProcess, parent: str, child: str) -> None:
    """The announcing subagent_update precedes every message that names the child."""
    announce = next(i for i, m in enumerate(agent.messages)
                    if m.get("method") == "session/update"
                    and m["params"]["sessionId"] == parent
                    and m["params"]["update"]["sessionUpdate"] == "subagent_update"
                    and m["params"]["update"]["sessionId"] == child)
    first = next(i for i, m in enumerate(agent.messages) if names(m, child))
    assert announce < first


def tool_updates(agent: AgentProcess, sid: str, name: str = "spawn_agent") -> list[dict[str, Any]]:
    ids = {u["toolCallId"] for u in agent.updates_of(sid, "tool_call") if u.get("name") == name}
    return [u for u in agent.updates_of(sid) if u.get("toolCallId") in ids]


def final_status(agent: AgentProcess, sid: str, name: str = "spawn_agent") -> dict[str, str]:
    out: dict[str, str] = {}
    for u in tool_updates(agent, sid, name):
        if "status" in u:
            out[u["toolCallId"]] = u["status"]
    return out


def content_text(update: dict[str, Any]) -> str:
    return "".join(c["content"].get("text", "") for c in update.get("content") or []
                   if c.get("type") == "content")


def text_of(agent: AgentProcess, sid: str) -> str:
    return "".join(u["content"]["text"] for u in agent.updates_of(sid, "agent_message_chunk"))


async def wait_text(agent: AgentProcess, sid: str, text: str) -> None:
    await agent.wait_for(lambda: text in text_of(agent, sid))


def messages(agent: AgentProcess, sid: str) -> list[dict[str, Any]]:
    """The session-directed messages on ``sid``'s transcript as a client keeps them: each
    ``session_message`` upsert with its ``session_message_chunk``\\ s appended."""
    out: dict[str, dict[str, Any]] = {}
    for u in agent.updates_of(sid):
        if u["sessionUpdate"] == "session_message":
            out.setdefault(u["messageId"], {}).update(u)
        elif u["sessionUpdate"] == "session_message_chunk":
            message = out.setdefault(u["messageId"], {"messageId": u["messageId"]})
            content = message.setdefault("content", [])
            if content and content[-1]["type"] == u["content"]["type"] == "text":
                content[-1] = {"type": "text", "text": content[-1]["text"] + u["content"]["text"]}
            else:
                content.append(u["content"])
    return list(out.values())


# ---------------------------------------------------------------------- tests


class TestExposed:
    async def test_child_announced_then_messages_then_idle(
        self, scripted: Scripted, session: Start, workspace: str
    ) -> None:
        """Announcement, instruction and answer on both transcripts, idle with usage."""
        agent = scripted([
            [{"text": "Delegating. "}, spawn("Investigator", "Where is X?")],  # parent
            [{"text": "X is in hello.txt."}],  # child
            [{"text": "Found it."}],  # parent
        ])
        async with agent:
            sid = await session(agent, SUBAGENTS)
            result = await agent.prompt(sid, "find X")
            assert result["stopReason"] == "end_turn"
            [child] = announced(agent, sid)
            assert child != sid and SESSION_ID.fullmatch(child)
            first, *patches = agent.updates_of(sid, "subagent_update")
            assert first == {
                "sessionUpdate": "subagent_update", "sessionId": child, "title": "Investigator",
                "description": "The investigator helper.", "state": {"state": "running"},
                "capabilities": {"cancel": {}}, "cwd": workspace}
            # patches carry only what changed; nothing is ever null
            assert [set(p) for p in patches] == [{"sessionUpdate", "sessionId", "state"}]
            idle = patches[-1]["state"]
            assert idle["state"] == "idle" and idle["stopReason"] == "end_turn"
            assert idle["usage"]["totalTokens"] > 0
            assert "null" not in json.dumps(agent.updates_of(sid, "subagent_update"))
            assert_announced_first(agent, sid, child)

            # the instruction: outgoing on the parent, incoming on the child, linked
            out_p, in_p = messages(agent, sid)
            [in_c, out_c] = messages(agent, child)
            assert out_p["senderSessionId"] == sid and out_p["recipientSessionId"] == child
            assert out_p["content"] == [{"type": "text", "text": "Where is X?"}]
            assert in_c["senderSessionId"] == sid and in_c["recipientSessionId"] == child
            assert in_c["content"] == out_p["content"]
            assert in_c["senderMessageId"] == out_p["messageId"]
            assert out_p["recipientMessageId"] == in_c["messageId"]
            # the answer: outgoing on the child, incoming on the parent, linked
            assert out_c["senderSessionId"] == child and out_c["recipientSessionId"] == sid
            assert in_p["content"] == out_c["content"] == [
                {"type": "text", "text": "X is in hello.txt."}]
            assert in_p["senderMessageId"] == out_c["messageId"]
            assert out_c["recipientMessageId"] == in_p["messageId"]

            # the child's own stream; its answer is the tool's result; idle comes last
            assert text_of(agent, child) == "X is in hello.txt."
            assert "X is in hello.txt." not in text_of(agent, sid)
            [call] = agent.tool_calls(sid)
            assert call["kind"] == "other" and call["title"] == "Subagent: Investigator"
            done = tool_updates(agent, sid)[-1]
            assert done["status"] == "completed"
            assert content_text(done) == "X is in hello.txt."
            kinds = [u["sessionUpdate"] for u in agent.updates_of(sid)]
            assert kinds.index("session_message") < len(kinds) - 1 - kinds[::-1].index(
                "subagent_update")
            assert text_of(agent, sid).endswith("Found it.")

            # children are not standalone sessions
            listed = await agent.request("session/list", {})
            assert [s["sessionId"] for s in listed["sessions"]] == [sid]

    async def test_child_permission_request_under_its_id(
        self, scripted: Scripted, session: Start
    ) -> None:
        """A child's permission request: requires_action while it waits, then running."""
        agent = scripted([
            [spawn("Runner", "Run echo.")],  # parent
            [{"tool_call": {"name": "run_command", "arguments": {"command": "echo hi"}}}],  # child
            [{"text": "It printed hi."}],  # child
            [{"text": "Done."}],  # parent
        ])
        async with agent:
            sid = await session(agent, SUBAGENTS)
            assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
            [child] = announced(agent, sid)
            assert [s["state"] for s in states(agent, sid, child)] == [
                "running", "requires_action", "running", "idle"]
            [request] = [r for r in agent.client_requests
                         if r["method"] == "session/request_permission"]
            assert request["params"]["sessionId"] == child
            call_id = request["params"]["toolCall"]["toolCallId"]
            assert any(u["toolCallId"] == call_id for u in agent.updates_of(child, "tool_call"))
            assert_announced_first(agent, sid, child)
            assert final_status(agent, child, "run_command") == {call_id: "completed"}
            assert content_text(tool_updates(agent, sid)[-1]) == "It printed hi."

    async def test_parallel_spawns_run_side_by_side(
        self, scripted: Scripted, session: Start
    ) -> None:
        """Two spawns in one response run concurrently; a read in between runs too."""
        command = [{"tool_call": {"name": "run_command", "arguments": {"command": "true"}}}]
        answer = [{"text": "child answer"}]
        agent = scripted([
            [spawn("Alpha", "Do A."),
             {"tool_call": {"name": "read_file", "arguments": {"path": "hello.txt"}}},
             spawn("Beta", "Do B.")],  # parent
            command, command,  # the two children, in whichever order they ask
            answer, answer,  # the two children again
            [{"text": "Both done."}],  # parent
        ])
        asking: set[str] = set()
        both_ask = asyncio.Event()

        async def allow_once_both_ask(params: dict[str, Any]) -> dict[str, Any]:
            """Each child's permission request waits for the other's: they run at once."""
            asking.add(params["sessionId"])
            if len(asking) == 2:
                both_ask.set()
            await both_ask.wait()
            return allow_first_option(params)

        agent.handlers["session/request_permission"] = allow_once_both_ask
        async with agent:
            sid = await session(agent, SUBAGENTS)
            assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
            children = announced(agent, sid)
            assert len(children) == 2
            titles = {u["sessionId"]: u["title"] for u in agent.updates_of(sid, "subagent_update")
                      if "title" in u}
            assert sorted(titles.values()) == ["Alpha", "Beta"]
            seq = [(u["sessionId"], u["state"]["state"])
                   for u in agent.updates_of(sid, "subagent_update")]
            # both were running before either went idle
            first_idle = next(i for i, (_, s) in enumerate(seq) if s == "idle")
            assert {c for c, s in seq[:first_idle] if s == "running"} == set(children)
            for child in children:
                assert_announced_first(agent, sid, child)
                assert states(agent, sid, child)[-1]["stopReason"] == "end_turn"
                assert text_of(agent, child) == "child answer"
            statuses = final_status(agent, sid)
            assert len(statuses) == 2 and set(statuses.values()) == {"completed"}
            assert set(final_status(agent, sid, "read_file").values()) == {"completed"}
            ids = [u["toolCallId"] for u in agent.updates_of(sid, "tool_call")]
            assert len(ids) == len(set(ids)) == 3

    async def test_cancel_parent_cancels_descendants(
        self, scripted: Scripted, session: Start
    ) -> None:
        """Cancelling the parent cancels its child and grandchild; the prompt answers
        cancelled after their idle/cancelled states; the session still works."""
        agent = scripted([
            [spawn("Lead", "Delegate.")],  # parent
            [spawn("Worker", "Work.")],  # child
            [{"text": "working "}, {"hang": True}],  # grandchild
            [{"text": "Still here."}],  # parent, next prompt
        ])
        async with agent:
            sid = await session(agent, SUBAGENTS)
            task = agent.start_request("session/prompt", {
                "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
            await agent.wait_for(lambda: bool(announced(agent, sid))
                                 and bool(announced(agent, announced(agent, sid)[0])))
            [child] = announced(agent, sid)
            [grandchild] = announced(agent, child)  # announced on its immediate parent
            await wait_text(agent, grandchild, "working")
            await agent.notify("session/cancel", {"sessionId": sid})
            response = await task
            assert response["result"]["stopReason"] == "cancelled"
            last = states(agent, sid, child)[-1]  # with the usage of its one model request
            assert last["state"] == "idle" and last["stopReason"] == "cancelled"
            assert last["usage"]["totalTokens"] > 0
            assert states(agent, child, grandchild)[-1]["stopReason"] == "cancelled"
            answered = agent.messages.index(response)
            for parent, c in ((sid, child), (child, grandchild)):
                assert_announced_first(agent, parent, c)
                idle = max(i for i, m in enumerate(agent.messages)
                           if m.get("method") == "session/update"
                           and m["params"]["update"].get("sessionId") == c
                           and m["params"]["update"].get("state", {}).get("state") == "idle")
                assert idle < answered
            assert set(final_status(agent, sid).values()) == {"failed"}
            assert (await agent.prompt(sid, "again"))["stopReason"] == "end_turn"
            assert "Still here." in text_of(agent, sid)

    async def test_cancel_parent_during_parallel_spawns(
        self, scripted: Scripted, session: Start
    ) -> None:
        """Both parallel children end idle/cancelled before the parent's cancelled answer."""
        hang = [{"text": "working "}, {"hang": True}]
        agent = scripted([[spawn("Alpha", "A."), spawn("Beta", "B.")], hang, hang])
        async with agent:
            sid = await session(agent, SUBAGENTS)
            task = agent.start_request("session/prompt", {
                "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
            await agent.wait_for(lambda: len(announced(agent, sid)) == 2
                                 and all("working" in text_of(agent, c)
                                         for c in announced(agent, sid)))
            await agent.notify("session/cancel", {"sessionId": sid})
            response = await task
            assert response["result"]["stopReason"] == "cancelled"
            answered = agent.messages.index(response)
            for child in announced(agent, sid):
                assert states(agent, sid, child)[-1] == {"state": "idle", "stopReason": "cancelled"}
            last_update = max(i for i, m in enumerate(agent.messages)
                              if m.get("method") == "session/update")
            assert last_update < answered
            statuses = final_status(agent, sid)
            assert len(statuses) == 2 and set(statuses.values()) == {"failed"}

    async def test_nesting_is_limited(self, scripted: Scripted, session: Start) -> None:
        """A grandchild is announced on its own parent's stream; it may not spawn again."""
        agent = scripted([
            [spawn("Lead", "Delegate.")],  # parent
            [spawn("Worker", "Delegate again.")],  # child
            [spawn("Too deep", "Nope.")],  # grandchild: not offered, refused
            [{"text": "worker done"}],  # grandchild
            [{"text": "lead done"}],  # child
            [{"text": "all done"}],  # parent
        ])
        async with agent:
            sid = await session(agent, SUBAGENTS)
            assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
            [child] = announced(agent, sid)
            [grandchild] = announced(agent, child)
            assert announced(agent, grandchild) == []
            assert_announced_first(agent, child, grandchild)
            [refused] = [u for u in tool_updates(agent, grandchild) if u.get("status") == "failed"]
            assert refused.get("name") == "spawn_agent"  # not offered there: an unknown tool
            assert content_text(tool_updates(agent, sid)[-1]) == "lead done"
            assert content_text(tool_updates(agent, child)[-1]) == "worker done"

    async def test_cancel_only_the_child(self, scripted: Scripted, session: Start) -> None:
        """session/cancel with the child's id: the child stops, the parent goes on."""
        agent = scripted([
            [spawn("Slow", "Take your time.")],  # parent
            [{"text": "working "}, {"hang": True}],  # child
            [{"text": "The subagent was cancelled; carrying on."}],  # parent
        ])
        async with agent:
            sid = await session(agent, SUBAGENTS)
            task = agent.start_request("session/prompt", {
                "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
            await agent.wait_for(lambda: bool(announced(agent, sid)))
            [child] = announced(agent, sid)
            await wait_text(agent, child, "working")
            await agent.notify("session/cancel", {"sessionId": child})
            response = await task
            assert response["result"]["stopReason"] == "end_turn"
            last = states(agent, sid, child)[-1]
            assert last["state"] == "idle" and last["stopReason"] == "cancelled"
            failed = tool_updates(agent, sid)[-1]
            assert failed["status"] == "failed"
            assert "cancelled" in content_text(failed)
            assert "carrying on" in text_of(agent, sid)

    async def test_child_failures_reach_the_parent_model(
        self, scripted: Scripted, session: Start
    ) -> None:
        """A provider error and a refusal: failed tool calls, idle error/refusal states."""
        agent = scripted([
            [spawn("Broken", "Try.")],  # parent, prompt 1
            [{"error": {"status": 400, "message": "bad request"}}],  # child
            [{"text": "The subagent failed."}],  # parent
            [spawn("Shy", "Try.")],  # parent, prompt 2
            [{"text": "I can't."}, {"finish": "refusal"}],  # child
            [{"text": "It refused."}],  # parent
        ])
        async with agent:
            sid = await session(agent, SUBAGENTS)
            assert (await agent.prompt(sid, "one"))["stopReason"] == "end_turn"
            assert (await agent.prompt(sid, "two"))["stopReason"] == "end_turn"
            broken, shy = announced(agent, sid)
            error = states(agent, sid, broken)[-1]
            assert error["state"] == "idle" and error["stopReason"] == "error"
            assert "bad request" in error["error"]["message"]
            assert states(agent, sid, shy)[-1]["stopReason"] == "refusal"
            failures = [u for u in tool_updates(agent, sid) if u.get("status") == "failed"]
            assert len(failures) == 2
            assert "bad request" in content_text(failures[0])
            assert "refused" in content_text(failures[1])
            assert failures[0]["rawOutput"]["error"] == content_text(failures[0])
            assert "It refused." in text_of(agent, sid)

    async def test_child_sessions_are_restricted(
        self, scripted: Scripted, session: Start, workspace: str
    ) -> None:
        """Every client call naming a child but session/cancel is refused with -32602."""
        agent = scripted([
            [spawn("Busy", "Wait.")],  # parent
            [{"text": "working "}, {"hang": True}],  # child
        ])
        async with agent:
            sid = await session(agent, SUBAGENTS)
            task = agent.start_request("session/prompt", {
                "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
            await agent.wait_for(lambda: bool(announced(agent, sid)))
            [child] = announced(agent, sid)
            await wait_text(agent, child, "working")
            calls: dict[str, dict[str, Any]] = {
                "session/prompt": {"prompt": [{"type": "text", "text": "hi"}]},
                "session/set_mode": {"modeId": "plan"},
                "session/set_config_option": {"configId": "mode", "value": "plan"},
                "session/load": {"cwd": workspace, "mcpServers": []},
                "session/resume": {"cwd": workspace},
                "session/fork": {"cwd": workspace},
                "session/close": {},
                "session/delete": {},
                "_session/steering": {"prompt": [{"type": "text", "text": "steer"}]},
            }
            for method, params in calls.items():
                with pytest.raises(ResponseError) as err:
                    await agent.request(method, {"sessionId": child, **params})
                assert err.value.code == -32602, method
                assert "subagent" in str(err.value.message)
            assert text_of(agent, child) == "working "  # still running, untouched
            await agent.notify("session/cancel", {"sessionId": sid})
            assert (await task)["result"]["stopReason"] == "cancelled"
            with pytest.raises(ResponseError) as err:  # done, still a child
                await agent.prompt(child, "hi")
            assert err.value.code == -32602


class TestUnexposed:
    async def test_nothing_names_the_child(
        self, scripted: Scripted, session: Start, workspace: str
    ) -> None:
        """Without the capability only the answer reaches the parent; the child's
        permission request goes out under the parent's id, titled after the subagent."""
        agent = scripted([
            [spawn("Runner", "Run echo.")],  # parent
            [{"tool_call": {"name": "run_command", "arguments": {"command": "echo hi"}}}],  # child
            [{"text": "It printed hi."}],  # child
            [{"text": "Done."}],  # parent
        ])
        async with agent:
            sid = await session(agent)
            assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
            wire = json.dumps(agent.messages)
            assert set(SESSION_ID.findall(wire)) == {sid}
            kinds = {u["update"]["sessionUpdate"] for u in agent.updates}
            assert not kinds & {"subagent_update", "session_message", "session_message_chunk"}
            [request] = [r for r in agent.client_requests
                         if r["method"] == "session/request_permission"]
            assert request["params"]["sessionId"] == sid
            tool_call = request["params"]["toolCall"]
            assert "Runner" in tool_call["title"] and "echo hi" in tool_call["title"]
            parent_ids = {u["toolCallId"] for u in agent.updates_of(sid, "tool_call")}
            assert tool_call["toolCallId"] not in parent_ids
            done = tool_updates(agent, sid)[-1]
            assert done["status"] == "completed" and content_text(done) == "It printed hi."
            assert text_of(agent, sid) == "Done."  # the child's chunks stayed inside
            # the stored session replays nothing of the child either
            await agent.request("session/load", {"sessionId": sid, "cwd": workspace,
                                                 "mcpServers": []})
            assert set(SESSION_ID.findall(json.dumps(agent.messages))) == {sid}

    async def test_replay_keeps_the_parent_view_for_capable_clients(
        self, scripted: Scripted, session: Start, workspace: str
    ) -> None:
        """The parent's log holds what its stream showed; a load replays it."""
        agent = scripted([
            [spawn("Helper", "Help.")],  # parent
            [{"text": "helped"}],  # child
            [{"text": "ok"}],  # parent
        ])
        async with agent:
            sid = await session(agent, SUBAGENTS)
            await agent.prompt(sid, "go")
            live = agent.updates_of(sid, "subagent_update") + [
                {"sessionUpdate": "session_message", **m} for m in messages(agent, sid)]
            before = len(agent.updates)
            await agent.request("session/load", {"sessionId": sid, "cwd": workspace,
                                                 "mcpServers": []})
            replayed = [u["update"] for u in agent.updates[before:] if u["sessionId"] == sid
                        and u["update"]["sessionUpdate"] in ("subagent_update", "session_message")]
            # each message comes back as one session_message, its chunks folded in
            assert sorted(replayed, key=json.dumps) == sorted(live, key=json.dumps)
