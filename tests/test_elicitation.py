"""``ask_user`` end to end over stdio: the elicitation on the wire (form mode, scoped to
the session and the tool call), the answer as the tool's result, cancel of the turn
(``$/cancel_request`` for the open question), subagents that ask (under their own id
while exposed, under the parent's spawn_agent call otherwise), and the capability gate
(no tool, no request without ``elicitation.form``), on the scripted offline model and
through the vendors' SDKs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall, Usage
from .harness import AgentProcess, ResponseError
from .schema_check import SchemaChecker
from .test_subagents import spawn

Script = list[list[dict[str, Any]]]
FORM: dict[str, Any] = {"elicitation": {"form": {}}}
QUESTION: dict[str, Any] = {
    "message": "Which strategy?",
    "schema": {"properties": {
        "strategy": {"type": "string", "title": "Strategy", "enum": ["safe", "bold"]},
        "note": {"type": "string"},
    }, "required": ["strategy"]},
}


def ask(question: dict[str, Any] = QUESTION) -> dict[str, Any]:
    return {"tool_call": {"name": "ask_user", "arguments": question}}


def requests(agent: AgentProcess, method: str = "elicitation/create") -> list[dict[str, Any]]:
    return [r for r in agent.client_requests if r["method"] == method]


def call_of(agent: AgentProcess, sid: str, name: str) -> dict[str, Any]:
    [call] = [c for c in agent.tool_calls(sid) if c.get("name") == name]
    return call


def content_text(call: dict[str, Any]) -> str:
    return "".join(c["content"].get("text", "") for c in call.get("content") or []
                   if c.get("type") == "content")


def states(agent: AgentProcess, parent: str) -> list[str]:
    return [u["state"]["state"] for u in agent.updates_of(parent, "subagent_update")
            if "state" in u]


async def test_the_answer_is_the_tools_result(scripted: Callable[[Script], AgentProcess],
                                              workspace: str) -> None:
    agent = scripted([[{"text": "Let me ask. "}, ask()], [{"text": "Going bold."}]])
    answered: list[dict[str, Any]] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        answered.append(params)
        return {"action": "accept", "content": {"strategy": "bold"}}

    agent.handlers["elicitation/create"] = answer
    async with agent:
        await agent.initialize(FORM)
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "refactor"))["stopReason"] == "end_turn"
        call = call_of(agent, sid, "ask_user")
        [params] = answered
        assert params["sessionId"] == sid and params["toolCallId"] == call["toolCallId"]
        assert params["mode"] == "form" and params["message"] == "Which strategy?"
        assert params["requestedSchema"] == {"type": "object", **QUESTION["schema"]}
        assert call["status"] == "completed" and call["kind"] == "think"
        assert call["title"] == "Ask the user: Which strategy?"
        assert call["rawOutput"] == {"action": "accept", "content": {"strategy": "bold"}}
        assert content_text(call) == "**Strategy**: bold"
        # asked while the call was in progress, answered before it completed
        def at(status: str) -> int:
            return next(i for i, m in enumerate(agent.messages)
                        if m.get("method") == "session/update"
                        and m["params"]["update"].get("toolCallId") == call["toolCallId"]
                        and m["params"]["update"].get("status") == status)

        [question] = requests(agent)
        assert at("in_progress") < agent.messages.index(question) < at("completed")


async def test_cancel_of_the_turn_cancels_the_question(
    scripted: Callable[[Script], AgentProcess], workspace: str
) -> None:
    """session/cancel while the user has the form: ``$/cancel_request`` for it, the call
    fails, the prompt answers cancelled; the editor's late -32800 is fine."""
    agent = scripted([[ask()], [{"text": "Next turn."}]])
    release = asyncio.Event()

    async def hold(params: dict[str, Any]) -> dict[str, Any]:
        await release.wait()
        raise ResponseError({"code": -32800, "message": "Request cancelled"})

    agent.handlers["elicitation/create"] = hold
    async with agent:
        await agent.initialize(FORM)
        sid = await agent.new_session(workspace)
        task = agent.start_request("session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        await agent.wait_for(lambda: bool(requests(agent)))
        await agent.notify("session/cancel", {"sessionId": sid})
        response = await task
        assert response["result"]["stopReason"] == "cancelled"
        [question] = requests(agent)
        cancels = [i for i, m in enumerate(agent.messages) if m.get("method") == "$/cancel_request"]
        assert [agent.messages[i]["params"] for i in cancels] == [{"requestId": question["id"]}]
        assert cancels[0] < agent.messages.index(response)
        assert call_of(agent, sid, "ask_user")["status"] == "failed"
        release.set()  # the editor answers the abandoned request after all
        assert (await agent.prompt(sid, "again"))["stopReason"] == "end_turn"


async def test_a_form_acp_does_not_allow_fails_before_it_runs(
    scripted: Callable[[Script], AgentProcess], workspace: str
) -> None:
    """The model reads which field is wrong; the call never runs, nothing is asked."""
    bad = {"message": "Where?", "schema": {"properties": {"place": {"type": "object"}}}}
    agent = scripted([[ask(bad)], [{"text": "Where should it go?"}]])
    async with agent:
        await agent.initialize(FORM)
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "move it"))["stopReason"] == "end_turn"
        call = call_of(agent, sid, "ask_user")
        assert call["status"] == "failed"
        assert content_text(call).startswith(
            "Invalid form schema at schema.properties.place.type: 'object' is not a field type")
        statuses = {u.get("status") for u in agent.updates_of(sid)
                    if u.get("toolCallId") == call["toolCallId"]}
        assert "in_progress" not in statuses
        assert requests(agent) == []


@pytest.mark.parametrize("caps", [{}, {"elicitation": {}}, {"elicitation": {"url": {}}},
                                  {"elicitation": {"form": None}}])
async def test_without_form_mode_there_is_no_tool(
    scripted: Callable[[Script], AgentProcess], workspace: str, caps: dict[str, Any]
) -> None:
    """Not offered, not runnable, and elicitation/create never sent."""
    agent = scripted([[ask()], [{"text": "Which strategy: safe or bold?"}]])
    async with agent:
        await agent.initialize(caps)
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "refactor"))["stopReason"] == "end_turn"
        call = call_of(agent, sid, "ask_user")
        assert call["status"] == "failed" and call["kind"] == "other"  # an unknown tool
        assert not any(m.get("method", "").startswith("elicitation/") for m in agent.messages)


class TestSubagents:
    async def test_an_exposed_child_asks_under_its_id(
        self, scripted: Callable[[Script], AgentProcess], workspace: str
    ) -> None:
        """After its announcement, with requires_action while the form is open."""
        agent = scripted([
            [spawn("Chooser", "Ask which.")],  # parent
            [ask()],  # child
            [{"text": "The user chose safe."}],  # child
            [{"text": "Done."}],  # parent
        ])
        agent.handlers["elicitation/create"] = lambda p: {
            "action": "accept", "content": {"strategy": "safe", "note": "careful"}}
        async with agent:
            await agent.initialize({"subagents": {}, **FORM})
            sid = await agent.new_session(workspace)
            assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
            [child] = {u["sessionId"] for u in agent.updates_of(sid, "subagent_update")}
            [question] = requests(agent)
            assert question["params"]["sessionId"] == child
            assert question["params"]["toolCallId"] == call_of(agent, child, "ask_user")[
                "toolCallId"]
            announced = next(i for i, m in enumerate(agent.messages)
                             if m.get("params", {}).get("update", {}).get("sessionId") == child)
            assert announced < agent.messages.index(question)
            assert states(agent, sid) == ["running", "requires_action", "running", "idle"]
            assert content_text(call_of(agent, sid, "spawn_agent")) == "The user chose safe."

    async def test_a_hidden_child_asks_under_the_parents_call(
        self, scripted: Callable[[Script], AgentProcess], workspace: str
    ) -> None:
        agent = scripted([
            [spawn("Chooser", "Ask which.")],  # parent
            [ask()],  # child
            [{"text": "Declined, so safe."}],  # child
            [{"text": "Done."}],  # parent
        ])
        agent.handlers["elicitation/create"] = lambda p: {"action": "decline"}
        async with agent:
            await agent.initialize(FORM)
            sid = await agent.new_session(workspace)
            assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
            [question] = requests(agent)
            spawn_call = call_of(agent, sid, "spawn_agent")
            assert question["params"]["sessionId"] == sid
            assert question["params"]["toolCallId"] == spawn_call["toolCallId"]
            assert question["params"]["message"] == "Subagent 'Chooser': Which strategy?"
            assert content_text(spawn_call) == "Declined, so safe."

    async def test_cancel_of_a_child_cancels_its_question(
        self, scripted: Callable[[Script], AgentProcess], workspace: str
    ) -> None:
        """session/cancel with the child's id: its open question is cancelled, it goes
        idle/cancelled, the parent carries on."""
        agent = scripted([
            [spawn("Chooser", "Ask which.")],  # parent
            [ask()],  # child
            [{"text": "Carrying on."}],  # parent
        ])
        release = asyncio.Event()

        async def hold(params: dict[str, Any]) -> dict[str, Any]:
            await release.wait()
            return {"action": "cancel"}

        agent.handlers["elicitation/create"] = hold
        async with agent:
            await agent.initialize({"subagents": {}, **FORM})
            sid = await agent.new_session(workspace)
            task = agent.start_request("session/prompt", {
                "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
            await agent.wait_for(lambda: bool(requests(agent)))
            child = requests(agent)[0]["params"]["sessionId"]
            await agent.notify("session/cancel", {"sessionId": child})
            response = await task
            assert response["result"]["stopReason"] == "end_turn"
            assert [m["params"] for m in agent.messages if m.get("method") == "$/cancel_request"
                    ] == [{"requestId": requests(agent)[0]["id"]}]
            assert states(agent, sid)[-2:] == ["requires_action", "idle"]
            last = agent.updates_of(sid, "subagent_update")[-1]["state"]
            assert last["stopReason"] == "cancelled"
            release.set()


@pytest.fixture
async def server() -> Any:
    async with FakeLLMServer() as s:
        yield s


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_through_the_vendors_sdks(checker: SchemaChecker, state_dir: str, workspace: str,
                                        server: FakeLLMServer, vendor: str) -> None:
    """The tool is in the request only with form mode; the answer goes back as the call's
    result."""
    model = "openai:gpt-4.1" if vendor == "openai" else "anthropic:claude-sonnet-4-5"
    key = "OPENAI_API_KEY" if vendor == "openai" else "ANTHROPIC_API_KEY"
    url = server.openai_url if vendor == "openai" else server.url
    server.enqueue(
        Reply([Text("plain"), Usage(10, 2), Finish("stop")]),
        Reply([ToolCall("call_q", "ask_user", json.dumps(QUESTION), pieces=3), Usage(10, 2),
               Finish("tool_calls")]),
        Reply([Text("bold it is"), Usage(10, 2), Finish("stop")]),
    )
    for caps in ({}, FORM):
        agent = AgentProcess(checker, "--state-dir", state_dir, "--model", model,
                             "--base-url", url, env={key: "test-key"})
        agent.handlers["elicitation/create"] = lambda p: {
            "action": "accept", "content": {"strategy": "bold"}}
        async with agent:
            await agent.initialize(caps)
            sid = await agent.new_session(workspace)
            assert (await agent.prompt(sid, "refactor"))["stopReason"] == "end_turn"
            if not caps:
                continue
            [question] = requests(agent)
            assert question["params"]["sessionId"] == sid
    plain, asking, answered = (r.body for r in server.requests)

    def names(body: dict[str, Any]) -> list[str]:
        return [tool.get("name") or tool["function"]["name"] for tool in body["tools"]]

    assert "ask_user" not in names(plain) and "ask_user" in names(asking)
    result = json.dumps(answered["messages"][-1])
    assert "The user answered" in result and "bold" in result
