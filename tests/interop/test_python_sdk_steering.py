"""Interop: steering (``_session/steering``, issue 28) through the official Python SDK
client, as an orchestrator would call it: ``ext_method`` after reading the capability
from the ``initialize`` result's top-level ``_meta``. Every message the agent sent is
schema-checked and every update must have been parsed by the SDK (``sdk_agent``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import acp

from ..schema_check import SchemaChecker
from .test_python_sdk import STEP_TIMEOUT, SdkAgent, initialize, sdk_agent

SCRIPT = [
    [{"tool_call": {"name": "run_command", "arguments": {"command": "echo hi"}}}],
    [{"text": "Briefly: hi."}],
    [{"text": "Started by a steer."}],
]


async def steer(agent: SdkAgent, sid: str, text: str, **meta: Any) -> Any:
    params: dict[str, Any] = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    if meta:
        params["_meta"] = {"steering": meta}
    # the SDK prefixes extension methods with "_": this is `_session/steering`
    return await asyncio.wait_for(agent.conn.ext_method("session/steering", params), STEP_TIMEOUT)


def said(agent: SdkAgent, sid: str) -> list[tuple[str, str, str]]:
    """(kind, messageId, text) of the session's messages, chunks folded."""
    out: list[tuple[str, str, str]] = []
    for session_id, u in agent.client.updates:
        kind = u.session_update
        if session_id != sid or kind not in ("agent_message_chunk", "user_message_chunk"):
            continue
        if out and out[-1][:2] == (kind, u.message_id):
            out[-1] = (kind, u.message_id, out[-1][2] + u.content.text)
        else:
            out.append((kind, u.message_id, u.content.text))
    return out


async def test_python_sdk_steers_a_running_turn(
    checker: SchemaChecker, tmp_path: Path, state_dir: str
) -> None:
    async with sdk_agent(checker, tmp_path, state_dir, SCRIPT) as agent:
        init = await initialize(agent.conn)
        assert init.field_meta == {
            "steering": {"supported": True, "idleBehaviors": ["promptRequired"]}}
        new = await asyncio.wait_for(
            agent.conn.new_session(cwd=agent.workspace, mcp_servers=[]), STEP_TIMEOUT
        )
        sid = new.session_id
        assert await steer(agent, sid, "psst", idleBehavior="promptRequired") == {
            "outcome": "promptRequired", "reason": "noRunningTurn"}

        gate = agent.client.permission_gate = asyncio.Event()
        turn = asyncio.ensure_future(
            agent.conn.prompt(session_id=sid, prompt=[acp.text_block("run it")]))
        await agent.client.wait_until(lambda: bool(agent.client.permission_requests),
                                      "the permission request")  # fmt: skip
        assert await steer(agent, sid, "briefly please") == {"outcome": "injected"}
        gate.set()
        assert (await asyncio.wait_for(turn, STEP_TIMEOUT)).stop_reason == "end_turn"
        messages = said(agent, sid)
        assert [(k, text) for k, _, text in messages] == [
            ("user_message_chunk", "briefly please"), ("agent_message_chunk", "Briefly: hi.")]
        assert messages[0][1] != messages[1][1]
        kinds = [u.session_update for _, u in agent.client.updates]
        assert kinds.index("tool_call") < kinds.index("user_message_chunk")

        assert await steer(agent, sid, "one more thing") == {"outcome": "startedNewTurn"}
        await agent.client.wait_until(
            lambda: said(agent, sid)[-1][2] == "Started by a steer.", "the started turn")
        assert [text for _, _, text in said(agent, sid)[-2:]] == [
            "one more thing", "Started by a steer."]
        bad = {"sessionId": sid, "prompt": [], "_meta": {"steering": {"idleBehavior": "x"}}}
        try:
            await agent.conn.ext_method("session/steering", bad)
        except acp.RequestError as exc:
            assert exc.code == -32602
        else:
            raise AssertionError("an empty steer was accepted")
