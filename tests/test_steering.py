"""Steering a running turn over ACP (``_session/steering``, issue 28): the agent process
driven over stdio, its model behind the real openai/anthropic SDKs and the local fake
server (OpenAI Chat Completions, Responses, Anthropic Messages), which refuses what the
real APIs refuse. A tool call is held in flight by the client's answer to its permission
request; a model stream by the fake server's ``hold``: every wait is on an event."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .fakes.api_rules import violation
from .fakes.llm_server import FakeLLMServer, Finish, RecordedRequest, Reply, Text, ToolCall
from .harness import AgentProcess, allow_first_option
from .limits import WAIT
from .schema_check import SchemaChecker
from .test_sessions import load

METHOD = "_session/steering"
ADVERTISED = {"steering": {"supported": True, "idleBehaviors": ["promptRequired"]}}
VENDORS = ("chat", "responses", "anthropic")
ECHO = ToolCall("call_a", "run_command", json.dumps({"command": "echo hi"}))
NOT_ACTED = "[Not acted upon:"


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def agent_for(
    checker: SchemaChecker, state_dir: str, tmp_path: Path, server: FakeLLMServer, vendor: str
) -> AgentProcess:
    """An agent on ``vendor``'s API at the fake server, asking permission for commands."""
    env = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}
    if vendor == "anthropic":
        args: tuple[str, ...] = ("--model", "anthropic:claude-sonnet-4-5", "--base-url", server.url)
    elif vendor == "responses":
        config = tmp_path / "responses.toml"
        config.write_text('[openai]\napi = "responses"\n')
        args = ("--model", "openai:gpt-5", "--base-url", server.openai_url, "--config", str(config))
    else:
        args = ("--model", "openai:gpt-4.1", "--base-url", server.openai_url)
    return AgentProcess(checker, "--state-dir", state_dir, *args, env=env)


class Gate:
    """The client's answer to a permission request, held until :meth:`release`: the
    tool call stays in flight meanwhile."""

    def __init__(self, agent: AgentProcess) -> None:
        self.asked = asyncio.Event()
        self._release = asyncio.Event()
        agent.handlers["session/request_permission"] = self

    async def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.set()
        await self._release.wait()
        return allow_first_option(params)

    async def wait(self) -> None:
        await asyncio.wait_for(self.asked.wait(), WAIT)

    def release(self) -> None:
        self._release.set()


def steering(sid: str, text: str, idle: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    if idle is not None:
        params["_meta"] = {"steering": {"idleBehavior": idle}}
    return params


async def steer(agent: AgentProcess, sid: str, text: str, idle: Any = None) -> Any:
    return await agent.request(METHOD, steering(sid, text, idle))


def prompting(agent: AgentProcess, sid: str, text: str) -> asyncio.Task[dict[str, Any]]:
    return agent.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    )


def conversation(vendor: str, request: RecordedRequest) -> list[tuple[str, str]]:
    """A request's history as (role, text), the same for every vendor: a tool's result
    is ``("tool", its output)``; each text block of a user turn is one ``("user", text)``."""
    body = request.body
    out: list[tuple[str, str]] = []
    if vendor == "chat":
        for m in body["messages"]:
            content = m.get("content")
            if isinstance(content, list):
                content = "".join(c.get("text", "") for c in content)
            if m["role"] != "system":
                out.append((m["role"], content or ""))
    elif vendor == "responses":
        for item in body["input"]:
            if item.get("type") == "function_call_output":
                out.append(("tool", str(item["output"])))
            elif item.get("type") == "message" and item["role"] == "user":
                out.extend(("user", c["text"]) for c in item["content"])
            elif item.get("type") == "message":
                out.append((item["role"], str(item["content"])))
            elif item.get("type") == "function_call":
                out.append(("assistant", ""))
    else:
        for m in body["messages"]:
            for block in m["content"]:
                if block["type"] == "tool_result":
                    inner = block.get("content") or []
                    out.append(("tool", "".join(c.get("text", "") for c in inner)))
                elif block["type"] == "text":
                    out.append((m["role"], block["text"]))
                elif block["type"] == "tool_use" and (not out or out[-1][0] != "assistant"):
                    out.append(("assistant", ""))
    return out


def said(agent: AgentProcess, sid: str) -> list[tuple[str, str, str]]:
    """The session's messages as the client was shown them: (kind, messageId, text),
    chunks of one message folded; tool calls as ("tool_call", id, status)."""
    out: list[tuple[str, str, str]] = []
    for u in agent.updates_of(sid):
        kind = u["sessionUpdate"]
        if kind in ("agent_message_chunk", "user_message_chunk"):
            text = u["content"].get("text", "")
            if out and out[-1][:2] == (kind, u["messageId"]):
                out[-1] = (kind, u["messageId"], out[-1][2] + text)
            else:
                out.append((kind, u["messageId"], text))
        elif kind == "tool_call":
            out.append(("tool_call", u["toolCallId"], u.get("status", "")))
    return out


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_steer_during_a_tool_call_joins_the_next_request(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer, vendor: str,
) -> None:  # fmt: skip
    """Injected while the call waits for permission; after its result the next request
    carries it as a user message; the prompt ends end_turn; shown under its own id, and
    replayed in its place by a new process."""
    server.enqueue(Reply([Text("Checking. "), ECHO, Finish("tool_calls")]),
                   Reply([Text("Done, briefly."), Finish("stop")]))  # fmt: skip
    async with agent_for(checker, state_dir, tmp_path, server, vendor) as agent:
        assert (await agent.initialize())["_meta"] == ADVERTISED
        sid = await agent.new_session(workspace)
        gate = Gate(agent)
        turn = prompting(agent, sid, "look around")
        await gate.wait()
        assert await steer(agent, sid, "be brief") == {"outcome": "injected"}
        assert not agent.updates_of(sid, "user_message_chunk")  # not before it joins
        gate.release()
        assert (await turn)["result"]["stopReason"] == "end_turn"
        first, second = conversation(vendor, server.requests[0]), conversation(
            vendor, server.requests[1])
        assert ("user", "be brief") not in first
        assert second[-2:] == [("tool", second[-2][1]), ("user", "be brief")]
        assert "hi" in second[-2][1]
        live = said(agent, sid)
        steer_id = next(i for k, i, text in live if text == "be brief")
        assert [k for k, _, _ in live] == [
            "agent_message_chunk", "tool_call", "user_message_chunk", "agent_message_chunk"]
        assert len({i for _, i, _ in live}) == 4  # its own messageId
        statuses = [u.get("status") for u in agent.updates_of(sid, "tool_call_update")]
        assert statuses[-1] == "completed"
    async with agent_for(checker, state_dir, tmp_path, server, vendor) as again:
        await again.initialize()
        _, replayed = await load(again, sid, workspace)
        shown = [(u["sessionUpdate"], u.get("messageId"), u.get("content", {}).get("text"))
                 for u in replayed if u["sessionUpdate"].endswith("message_chunk")]  # fmt: skip
        assert shown == [
            ("user_message_chunk", shown[0][1], "look around"),
            ("agent_message_chunk", shown[1][1], "Checking. "),
            ("user_message_chunk", steer_id, "be brief"),
            ("agent_message_chunk", shown[3][1], "Done, briefly."),
        ]
        kinds = [u["sessionUpdate"] for u in replayed]
        assert kinds.index("tool_call") < kinds.index("user_message_chunk", 1)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_steer_then_cancel_leaves_a_valid_history(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer, vendor: str,
) -> None:  # fmt: skip
    """The cancel takes the pending steer with it: shown, and kept in history marked as
    not acted upon; the next prompt's request is one the vendor's API accepts."""
    server.enqueue(Reply([Text("Checking. "), ECHO, Finish("tool_calls")]),
                   Reply([Text("Starting over."), Finish("stop")]))  # fmt: skip
    async with agent_for(checker, state_dir, tmp_path, server, vendor) as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        gate = Gate(agent)
        turn = prompting(agent, sid, "look around")
        await gate.wait()
        assert await steer(agent, sid, "use ls instead") == {"outcome": "injected"}
        await agent.notify("session/cancel", {"sessionId": sid})
        assert (await turn)["result"]["stopReason"] == "cancelled"
        gate.release()
        assert [u["content"]["text"] for u in agent.updates_of(sid, "user_message_chunk")] == [
            "use ls instead"]
        assert (await agent.prompt(sid, "never mind"))["stopReason"] == "end_turn"
        assert len(server.requests) == 2  # nothing refused, nothing retried
        history = conversation(vendor, server.requests[1])
        last_result = max(i for i, (role, _) in enumerate(history) if role == "tool")
        after = history[last_result + 1 :]
        assert after[-1] == ("user", "never mind") and {r for r, _ in after} == {"user"}
        kept = " ".join(text for _, text in after[:-1])
        assert kept.startswith(NOT_ACTED) and kept.endswith("use ls instead")
        assert violation("openai" if vendor == "chat" else vendor, server.requests[1].body,
                         None) is None  # fmt: skip


async def test_three_steers_keep_their_order(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer,
) -> None:  # fmt: skip
    """Sent back to back, without waiting for the answers."""
    server.enqueue(Reply([ECHO, Finish("tool_calls")]), Reply([Text("ok"), Finish("stop")]))
    async with agent_for(checker, state_dir, tmp_path, server, "chat") as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        gate = Gate(agent)
        turn = prompting(agent, sid, "go")
        await gate.wait()
        answers = [await agent.sent_request(METHOD, steering(sid, f"steer {n}")) for n in "123"]
        assert [(await a)["result"]["outcome"] for a in answers] == ["injected"] * 3
        gate.release()
        assert (await turn)["result"]["stopReason"] == "end_turn"
        assert conversation("chat", server.requests[1])[-3:] == [
            ("user", "steer 1"), ("user", "steer 2"), ("user", "steer 3")]
        shown = [(u["messageId"], u["content"]["text"])
                 for u in agent.updates_of(sid, "user_message_chunk")]  # fmt: skip
        assert [text for _, text in shown] == ["steer 1", "steer 2", "steer 3"]
        assert len({i for i, _ in shown}) == 3


@pytest.mark.parametrize("finish", ["stop", "length"])
async def test_a_steer_during_the_last_answer(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer, finish: str,
) -> None:  # fmt: skip
    """Sent while the model streams what would be its last answer: the stream is not cut.
    The model ending its turn: the turn asks it once more, with the steer after that
    answer. The answer cut by the token limit (no choice of the model's): no further
    request; the steer is shown and kept as not acted upon, and the next turn's request
    is valid."""
    hold = asyncio.Event()
    server.enqueue(Reply([Text("first "), Text("answer"), Finish(finish)], hold=hold,
                         hold_at="first"),
                   Reply([Text("second answer"), Finish("stop")]))  # fmt: skip
    async with agent_for(checker, state_dir, tmp_path, server, "chat") as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        turn = prompting(agent, sid, "go")
        await agent.wait_for(lambda: bool(agent.updates_of(sid, "agent_message_chunk")))
        assert await steer(agent, sid, "and then?") == {"outcome": "injected"}
        hold.set()
        stop = (await turn)["result"]["stopReason"]
        if finish == "stop":
            assert stop == "end_turn"
            assert conversation("chat", server.requests[1])[-3:] == [
                ("user", "go"), ("assistant", "first answer"), ("user", "and then?")]
            assert [text for k, _, text in said(agent, sid)] == [
                "first answer", "and then?", "second answer"]
            return
        assert stop == "max_tokens" and len(server.requests) == 1
        assert [text for k, _, text in said(agent, sid)] == ["first answer", "and then?"]
        assert (await agent.prompt(sid, "again"))["stopReason"] == "end_turn"
        history = conversation("chat", server.requests[1])
        assert history[-3] == ("assistant", "first answer")
        assert history[-2][1].startswith(NOT_ACTED) and history[-2][1].endswith("and then?")


async def test_no_running_turn_starts_one(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer,
) -> None:  # fmt: skip
    """startedNewTurn: the turn streams as usual (its prompt shown), is recorded, and the
    next steers of the same moment join it in order; session/load replays it."""
    server.enqueue(Reply([Text("On it."), Finish("stop")]), Reply([Text("ok"), Finish("stop")]))
    async with agent_for(checker, state_dir, tmp_path, server, "chat") as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        answers = [await agent.sent_request(METHOD, steering(sid, f"task {n}")) for n in "123"]
        assert [(await a)["result"]["outcome"] for a in answers] == [
            "startedNewTurn", "injected", "injected"]
        await agent.wait_for(lambda: bool(agent.updates_of(sid, "agent_message_chunk")))
        await server.wait_for_requests(1)
        assert conversation("chat", server.requests[0]) == [
            ("user", "task 1"), ("user", "task 2"), ("user", "task 3")]
        live = said(agent, sid)
        assert [(k, text) for k, _, text in live] == [
            ("user_message_chunk", "task 1"), ("user_message_chunk", "task 2"),
            ("user_message_chunk", "task 3"), ("agent_message_chunk", "On it.")]
        # the turn is over once the session takes the next prompt (it waits its turn)
        assert (await agent.prompt(sid, "and now?"))["stopReason"] == "end_turn"
        assert conversation("chat", server.requests[1])[-2:] == [
            ("assistant", "On it."), ("user", "and now?")]
        _, replayed = await load(agent, sid, workspace)
        assert [(u["sessionUpdate"], u.get("messageId")) for u in replayed[:3]] == [
            ("user_message_chunk", i) for _, i, _ in live[:3]]


async def test_prompt_required_starts_nothing(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer,
) -> None:  # fmt: skip
    server.enqueue(Reply([Text("fresh"), Finish("stop")]))
    async with agent_for(checker, state_dir, tmp_path, server, "chat") as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        before = len(agent.updates_of(sid))
        assert await steer(agent, sid, "psst", idle="promptRequired") == {
            "outcome": "promptRequired", "reason": "noRunningTurn"}
        assert (await agent.prompt(sid, "hello"))["stopReason"] == "end_turn"
        assert conversation("chat", server.requests[0]) == [("user", "hello")]
        assert "user_message_chunk" not in [u["sessionUpdate"]
                                            for u in agent.updates_of(sid)[before:]]  # fmt: skip


async def test_a_prompt_sent_during_a_turn_still_waits_for_it(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer,
) -> None:  # fmt: skip
    """session/prompt stays queued (standard ACP); a steer meanwhile joins the running
    turn, not the queued prompt."""
    server.enqueue(Reply([ECHO, Finish("tool_calls")]), Reply([Text("first done"), Finish("stop")]),
                   Reply([Text("second done"), Finish("stop")]))  # fmt: skip
    async with agent_for(checker, state_dir, tmp_path, server, "chat") as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        gate = Gate(agent)
        first = prompting(agent, sid, "first")
        await gate.wait()
        second = prompting(agent, sid, "second")
        assert await steer(agent, sid, "hurry") == {"outcome": "injected"}
        gate.release()
        assert (await first)["result"]["stopReason"] == "end_turn"
        assert (await second)["result"]["stopReason"] == "end_turn"
        assert conversation("chat", server.requests[1])[-1] == ("user", "hurry")
        assert ("user", "second") not in conversation("chat", server.requests[1])
        assert conversation("chat", server.requests[2])[-2:] == [
            ("assistant", "first done"), ("user", "second")]


async def test_a_steer_pending_when_the_agent_dies_is_kept(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer,
) -> None:  # fmt: skip
    """Accepted, then the process is killed before the turn's next request: a new process
    replays it where it was sent and keeps it in history, not acted upon."""
    server.enqueue(Reply([ECHO, Finish("tool_calls")]), Reply([Text("ok"), Finish("stop")]))
    agent = agent_for(checker, state_dir, tmp_path, server, "chat")
    async with agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        gate = Gate(agent)
        prompting(agent, sid, "go")
        await gate.wait()
        assert await steer(agent, sid, "stop that") == {"outcome": "injected"}
        await _durable(agent, sid, state_dir)
        agent.kill()
    async with agent_for(checker, state_dir, tmp_path, server, "chat") as again:
        await again.initialize()
        _, replayed = await load(again, sid, workspace)
        assert [u["content"]["text"] for u in replayed
                if u["sessionUpdate"] == "user_message_chunk"] == ["go", "stop that"]
        assert (await again.prompt(sid, "again"))["stopReason"] == "end_turn"
        history = conversation("chat", server.requests[1])
        assert history[-3][0] == "tool" and history[-2][1].startswith(NOT_ACTED)
        assert history[-2][1].endswith("stop that") and history[-1] == ("user", "again")


async def _durable(agent: AgentProcess, sid: str, state_dir: str) -> None:
    """Wait until the session's log holds the accepted steer (the writer thread)."""
    log = Path(state_dir) / "sessions" / f"{sid}.jsonl"

    def written() -> bool:
        return log.is_file() and b'"r":"steer"' in log.read_bytes()

    from .limits import eventually

    await eventually(written, "the steer in the session log")


# --------------------------------------------------------------------------- bad input


async def test_bad_input_is_refused_as_for_a_prompt(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer,
) -> None:  # fmt: skip
    """-32002 for an unknown session, -32602 for what session/prompt refuses and for an
    idle behaviour the agent does not know; nothing is started, the agent lives on."""
    agent = AgentProcess(checker, "--state-dir", state_dir, "--model", "openai:my-model",
                         "--base-url", server.openai_url, env={"OPENAI_API_KEY": "k"})  # fmt: skip
    server.enqueue(Reply([Text("fine"), Finish("stop")]), Reply([Text("ok"), Finish("stop")]))
    async with agent:
        before = await agent.request_raw(METHOD, steering("sess_x", "hi"))
        assert before["error"]["code"] == -32600  # not initialized
        init = await agent.initialize()
        assert init["agentCapabilities"]["promptCapabilities"]["image"] is False
        sid = await agent.new_session(workspace)

        async def code(params: dict[str, Any]) -> int:
            response = await agent.request_raw(METHOD, params)
            return int(response["error"]["code"])

        image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
        assert await code(steering("sess_unknown", "hi")) == -32002
        assert await code({"sessionId": sid, "prompt": []}) == -32602
        assert await code({"sessionId": sid}) == -32602
        assert await code({"sessionId": sid, "prompt": [{"type": "text"}]}) == -32602
        assert await code({"sessionId": sid, "prompt": [image]}) == -32602
        assert await code({"sessionId": sid, "prompt": [audio]}) == -32602
        assert await code(steering(sid, "hi", idle="startNewTurn")) == -32602
        assert await code(steering(sid, "hi", idle=3)) == -32602
        assert await code({**steering(sid, "hi"), "_meta": {"steering": "promptRequired"}}) == (
            -32602)
        assert not agent.updates_of(sid, "user_message_chunk") and not server.requests
        # what the request's _meta holds besides steering is none of the agent's business
        other = {**steering(sid, "hi"), "_meta": {"trace": 1, "steering": {"idleBehavior": None}}}
        assert (await agent.request(METHOD, other))["outcome"] == "startedNewTurn"
        await server.wait_for_requests(1)
        assert (await agent.prompt(sid, "next"))["stopReason"] == "end_turn"


async def test_a_client_that_never_steers_sees_no_steering(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer,
) -> None:  # fmt: skip
    """The advertisement aside, the wire is what it was: no user_message_chunk live, and
    the session's log holds no steering record."""
    server.enqueue(Reply([ECHO, Finish("tool_calls")]), Reply([Text("ok"), Finish("stop")]))
    async with agent_for(checker, state_dir, tmp_path, server, "chat") as agent:
        assert (await agent.initialize())["_meta"] == ADVERTISED
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
        assert {u["sessionUpdate"] for u in agent.updates_of(sid)}.isdisjoint(
            {"user_message_chunk"})
    log = (Path(state_dir) / "sessions" / f"{sid}.jsonl").read_bytes()
    assert b'"r":"steer"' not in log


def test_the_fake_refuses_text_before_the_tool_results() -> None:
    """Anthropic: the message after the calls begins with their results (text the user
    adds comes after them); the agent's own history passes."""
    calls = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}  # fmt: skip
    result = {"type": "tool_result", "tool_use_id": "t1"}
    text = {"type": "text", "text": "also this"}
    base = {"tools": [{"name": "f"}]}
    first = {"role": "user", "content": [{"type": "text", "text": "go"}]}
    good = {**base, "messages": [first, calls, {"role": "user", "content": [result, text]}]}
    bad = {**base, "messages": [first, calls, {"role": "user", "content": [text, result]}]}
    assert violation("anthropic", good, None) is None
    refused = violation("anthropic", bad, None)
    assert refused is not None and refused.status == 400
    assert "at the beginning of this message" in refused.body["error"]["message"]


async def test_a_session_owned_elsewhere_is_steered_once_its_owner_lets_go(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer,
) -> None:  # fmt: skip
    """Like a prompt: -32600 while another process owns it (promptRequired hands it back
    first), then the steer takes the session over and starts a turn."""
    server.enqueue(Reply([Text("one"), Finish("stop")]), Reply([Text("two"), Finish("stop")]))
    owner = agent_for(checker, state_dir, tmp_path, server, "chat")
    other = agent_for(checker, state_dir, tmp_path, server, "chat")
    async with owner, other:
        await owner.initialize()
        await other.initialize()
        sid = await owner.new_session(workspace)
        assert (await owner.prompt(sid, "mine"))["stopReason"] == "end_turn"
        await load(other, sid, workspace)
        refused = await other.request_raw(METHOD, steering(sid, "let me"))
        assert refused["error"]["code"] == -32600 and "another" in refused["error"]["message"]
        assert (await steer(other, sid, "let me", idle="promptRequired"))["outcome"] == (
            "promptRequired")
        await owner.request("session/close", {"sessionId": sid})
        assert await steer(other, sid, "let me") == {"outcome": "startedNewTurn"}
        await other.wait_for(lambda: any(text == "two" for _, _, text in said(other, sid)))
        await server.wait_for_requests(2)
        assert conversation("chat", server.requests[1])[-2:] == [
            ("assistant", "one"), ("user", "let me")]


async def test_the_agent_exits_cleanly_with_a_started_turn_running(
    scripted: Any, workspace: str
) -> None:
    """stdin closes while a turn a steer started still streams (and another steer waits
    in it): the turn is cancelled like any other and the process exits 0."""
    agent = scripted([[{"text": "working "}, {"hang": True}]])
    async with agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        assert await steer(agent, sid, "go on") == {"outcome": "startedNewTurn"}
        await agent.wait_for(lambda: bool(agent.updates_of(sid, "agent_message_chunk")))
        assert await steer(agent, sid, "and more") == {"outcome": "injected"}
        assert await agent.close() == 0
    assert b"Traceback" not in agent.stderr
