"""``session/new`` is answered before its session is opened (``handlers.opening``); what
the client sends next must not notice: every later request runs in the opened session,
a ``session/cancel`` reaches a prompt that waits for the opening, the end of input right
after the answer still stores the session, and the answer offers what the opened
session holds. Each test sends its next messages as soon as the answer arrives, while the
agent is still opening the session (the session stage loads in ~30 ms of imports)."""

from __future__ import annotations

from typing import Any

from .harness import AgentProcess, Scripted
from .schema_check import SchemaChecker


def _new(cwd: str, **kw: Any) -> dict[str, Any]:
    return {"cwd": cwd, "mcpServers": [], **kw}


def _prompt(sid: str, text: str) -> dict[str, Any]:
    return {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}


async def test_the_next_requests_run_in_the_opened_session(
    scripted: Scripted, workspace: str
) -> None:
    agent = scripted([[{"text": "hello there"}]])
    async with agent:
        await agent.initialize()
        sid = (await agent.request("session/new", _new(workspace)))["sessionId"]
        # sent at once, before anything else is awaited: the opening is under way
        listing = await agent.sent_request("session/list", {})
        prompt = await agent.sent_request("session/prompt", _prompt(sid, "hi"))
        title = await agent.sent_request("session/set_title", {"sessionId": sid, "title": "T"})
        listed = await listing
        assert "result" in listed, listed
        assert sid in [s["sessionId"] for s in listed["result"]["sessions"]]
        assert (await prompt)["result"]["stopReason"] == "end_turn"
        assert "error" not in await title
        said = "".join(u["content"]["text"]
                       for u in agent.updates_of(sid, "agent_message_chunk"))  # fmt: skip
        assert said == "hello there"


async def test_a_cancel_reaches_a_prompt_waiting_for_the_opening(
    scripted: Scripted, workspace: str
) -> None:
    """The prompt cannot begin until the session is open; the cancel, sent right after it,
    comes while it waits. Lost, the prompt would run its whole reply and end normally."""
    agent = scripted([[{"text": "a reply the user no longer wants"}], [{"text": "next"}]])
    async with agent:
        await agent.initialize()
        sid = (await agent.request("session/new", _new(workspace)))["sessionId"]
        prompt = await agent.sent_request("session/prompt", _prompt(sid, "go"))
        await agent.notify("session/cancel", {"sessionId": sid})
        assert (await prompt)["result"]["stopReason"] == "cancelled"
        assert agent.updates_of(sid, "agent_message_chunk") == []
        # the cancel was that prompt's only: the next one runs
        assert (await agent.prompt(sid, "again"))["stopReason"] == "end_turn"


async def test_the_end_of_input_right_after_the_answer_still_stores_the_session(
    checker: SchemaChecker, state_dir: str, workspace: str
) -> None:
    first = AgentProcess(checker, "--state-dir", state_dir)
    async with first:
        await first.initialize()
        sid = (await first.request("session/new", _new(workspace)))["sessionId"]
        assert first.proc is not None and first.proc.stdin is not None
        first.proc.stdin.close()  # at once: the session is still being opened
        assert await first.close() == 0
    second = AgentProcess(checker, "--state-dir", state_dir)
    async with second:
        await second.initialize()
        listed = (await second.request("session/list", {}))["sessions"]
        assert [s["sessionId"] for s in listed] == [sid]
        await second.request("session/load", {"sessionId": sid, "cwd": workspace,
                                              "mcpServers": []})  # fmt: skip


async def test_the_answer_offers_what_the_opened_session_holds(
    scripted: Scripted, workspace: str
) -> None:
    """Answered from the configuration before the session exists: the same modes and
    options the opened session reports when it is loaded, the configured mode and
    thinking level included."""
    agent = scripted(
        [[{"text": "ok"}]], "--mode", "plan", config='model = "offline"\nthinking = "high"\n'
    )
    async with agent:
        await agent.initialize()
        answer = await agent.request("session/new", _new(workspace, systemPrompt={
            "mode": "append", "content": [{"type": "text", "text": "Answer in French."}]}))
        sid = answer["sessionId"]
        assert answer["modes"]["currentModeId"] == "plan"
        current = {o["id"]: o["currentValue"] for o in answer["configOptions"]}
        assert current["mode"] == "plan" and current["model"] == "offline"
        loaded = await agent.request("session/load", {"sessionId": sid, "cwd": workspace,
                                                      "mcpServers": []})  # fmt: skip
        assert loaded["modes"] == answer["modes"]
        assert loaded["configOptions"] == answer["configOptions"]


async def test_a_refused_new_session_opens_nothing(
    checker: SchemaChecker, state_dir: str, workspace: str
) -> None:
    """Every check runs before the answer: a bad request gets its error and leaves no
    session behind."""
    agent = AgentProcess(checker, "--state-dir", state_dir)
    async with agent:
        await agent.initialize()
        bad = await agent.request_raw("session/new", _new("relative/path"))
        assert bad["error"]["code"] == -32602
        prompt = await agent.request_raw("session/new", _new(workspace, systemPrompt={
            "mode": "replace", "content": [{"type": "text", "text": "x"}]}))
        assert prompt["error"]["code"] == -32602
        assert (await agent.request("session/list", {}))["sessions"] == []
