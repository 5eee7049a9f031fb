"""MCP over ACP in process: a hub whose ``acp`` server is reached through ``mcp/message``
requests answered by :class:`AcpBridge` (a real stdio server behind it), the editor's
``mcp/message`` notifications routed back with :func:`acp_agent.mcp.deliver`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import pytest_asyncio

from acp_agent.errors import RemoteError, ToolError
from acp_agent.mcp import McpHub, deliver
from acp_agent.mcp._acp import _reply, _routes
from acp_agent.protocol import types as t

from ..limits import WAIT
from .acp_bridge import AcpBridge
from .conftest import LIVE, Recorder, tool_ctx

pytestmark = pytest.mark.asyncio(loop_scope="module")

Request = Callable[[t.MessageMcpRequest], Awaitable[t.MessageMcpResponseAny]]


def acp_server(name: str, server_id: str = "srv-1") -> t.McpServerAny:
    return t.McpServerAny(name=name, type="acp", server_id=server_id)


def editor(bridge: AcpBridge) -> Request:
    """The agent's ``mcp/message`` request, as the bridge (the editor) answers it."""
    async def request(params: t.MessageMcpRequest) -> t.MessageMcpResponseAny:
        answer = await bridge.handle(msgspec.to_builtins(params))
        return msgspec.convert(answer, t.MessageMcpResponseAny)

    return request


async def to_agent(params: dict[str, Any]) -> None:
    deliver(msgspec.convert(params, t.MessageMcpNotification))


@pytest_asyncio.fixture(loop_scope="module")
async def bridge() -> AsyncIterator[AcpBridge]:
    async with AcpBridge(to_agent, "srv-1", LIVE) as bridge:
        yield bridge


async def ready_hub(request: Request, rec: Recorder, cwd: str) -> McpHub:
    hub = McpHub([acp_server("bridge")], cwd=cwd, on_problem=rec.on_problem,
                 on_change=rec.on_change, acp=request)
    hub.start()
    await hub.wait_ready(WAIT)
    return hub


async def run(hub: McpHub, tool: str, cwd: str, /, **args: object) -> Any:
    found = {tool.spec.name: tool for tool in hub.tools()}[tool]
    return await found.run(args, tool_ctx(cwd))


async def test_tools_and_list_changes_over_acp(bridge: AcpBridge, tmp_path: Path) -> None:
    """Tools are listed and called through mcp/message; a list change comes back on the
    listen stream as mcp/message notifications, routed by requestId."""
    cwd, rec = str(tmp_path), Recorder()
    hub = await ready_hub(editor(bridge), rec, cwd)
    try:
        assert hub.status() == {"bridge": "ready"} and rec.problems == []
        assert (await run(hub, "mcp__bridge__echo", cwd, text="hi")).text == "echo: hi"
        await run(hub, "mcp__bridge__add_tool", cwd, name="fresh")
        assert (await run(hub, "mcp__bridge__fresh", cwd)).text == "I am fresh"
        assert rec.changes == 2
        methods = [r["method"] for r in bridge.requests]
        assert methods[:2] == ["server/discover", "subscriptions/listen"]
        assert all(r["serverId"] == "srv-1" for r in bridge.requests)
    finally:
        await hub.aclose()
    assert _routes == {}  # nothing left routed to a closed connection


async def test_cancelling_a_call_cancels_its_outer_request(
    bridge: AcpBridge, tmp_path: Path
) -> None:
    """The SDK's notifications/cancelled becomes the cancellation of the outer mcp/message
    request (on the wire: $/cancel_request); the server stays usable."""
    cwd, rec = str(tmp_path), Recorder()
    hub = await ready_hub(editor(bridge), rec, cwd)
    try:
        call = asyncio.ensure_future(run(hub, "mcp__bridge__hang", cwd))

        def hanging() -> str | None:
            return next((r["requestId"] for r in bridge.requests if r["method"] == "tools/call"
                         and r["params"]["name"] == "hang"), None)  # fmt: skip

        await bridge.until(lambda: hanging() is not None)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await bridge.until(lambda: hanging() in bridge.cancelled)
        assert (await run(hub, "mcp__bridge__echo", cwd, text="ok")).text == "echo: ok"
        assert hub.status() == {"bridge": "ready"}
    finally:
        await hub.aclose()


async def test_the_editors_errors(bridge: AcpBridge, tmp_path: Path) -> None:
    """An inner error answer fails the call and keeps the server; an ACP error answer to the
    first requests (the editor serves no such server) fails the start, reported."""
    cwd, rec = str(tmp_path), Recorder()
    forward = editor(bridge)

    async def picky(params: t.MessageMcpRequest) -> t.MessageMcpResponseAny:
        if params.method == "tools/call" and isinstance(params.params, dict) and (
                params.params.get("arguments") == {"text": "boom"}):
            return t.MessageMcpResponseAny(error=t.McpError(code=-32603, message="editor broke"))
        return await forward(params)

    hub = await ready_hub(picky, rec, cwd)
    try:
        with pytest.raises(ToolError, match="MCP server 'bridge': editor broke"):
            await run(hub, "mcp__bridge__echo", cwd, text="boom")
        assert hub.status() == {"bridge": "ready"}
    finally:
        await hub.aclose()

    async def refusing(params: t.MessageMcpRequest) -> t.MessageMcpResponseAny:
        raise RemoteError(-32602, "Invalid params: unknown serverId")

    rec = Recorder()
    hub = await ready_hub(refusing, rec, cwd)
    try:
        severity, description = rec.problem("MCP server 'bridge' failed to start")
        assert severity == "error" and "unknown serverId" in description
    finally:
        await hub.aclose()


async def test_answers_become_inner_messages() -> None:
    """result (null included) -> a result object; error -> the inner error, data kept;
    neither -> an internal error."""
    ok = _reply(3, t.MessageMcpResponseAny(result={"tools": []}))
    assert ok.model_dump(exclude_none=True) == {"jsonrpc": "2.0", "id": 3, "result": {"tools": []}}
    assert _reply("x", t.MessageMcpResponseAny(result=None)).model_dump()["result"] == {}
    err = _reply(4, t.MessageMcpResponseAny(error=t.McpError(code=-32601, message="no", data=[1])))
    assert err.model_dump()["error"] == {"code": -32601, "message": "no", "data": [1]}
    assert _reply(5, t.MessageMcpResponseAny()).model_dump()["error"]["code"] == -32603


async def test_notifications_for_no_active_request_are_dropped() -> None:
    deliver(t.MessageMcpNotification(server_id="srv-1", request_id="no-such-request",
                                     method="notifications/progress", params={"progress": 1}))
    assert _routes == {}
