"""McpHub with servers that change and die: list changes reach the offer (both protocol
eras), a lost server comes back once and no more, and a call in flight when its server
dies fails clearly. Real servers (``servers/live.py``, ``servers/demo.py``); every wait
is on a fact (a reported problem, a change, a pid file), never on time."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from acp_agent.errors import ToolError
from acp_agent.mcp import McpHub
from acp_agent.protocol import types as t
from acp_agent.tools.base import Toolset

from ..limits import WAIT
from ..procs import alive
from .conftest import LIVE, LocalServer, Recorder, http, stdio, tool_ctx

pytestmark = pytest.mark.asyncio(loop_scope="module")


def tool_names(hub: McpHub) -> set[str]:
    return {tool.spec.name for tool in hub.tools()}


async def run(hub: McpHub, tool: str, cwd: str, /, **args: object) -> Any:
    found = {tool.spec.name: tool for tool in hub.tools()}[tool]
    return await found.run(args, tool_ctx(cwd))


def pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()]


# ------------------------------------------------------------------------ list changes


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_list_changes_reach_the_offer(era: str, tmp_path: Path) -> None:
    """A tool that adds a tool: the call returns with the new tool already offered (the
    toolset a turn holds sees it too); prompts likewise; each change calls on_change
    once. On 2026-07-28 the change comes on a subscriptions/listen stream, before it as
    an unasked notifications/*/list_changed."""
    cwd = str(tmp_path)
    rec = Recorder()
    flags = ["--legacy"] if era == "2025-11-25" else []
    hub = McpHub([stdio("live", LIVE, *flags)], cwd=cwd,
                 on_problem=rec.on_problem, on_change=rec.on_change)
    hub.start()
    try:
        await hub.wait_ready(WAIT)
        assert hub.status() == {"live": "ready"}
        live = hub._servers[0]
        assert live._client is not None and live._client.protocol_version == era
        toolset = hub.toolset(Toolset([]))
        assert "mcp__live__fresh" not in toolset and rec.changes == 1

        assert (await run(hub, "mcp__live__add_tool", cwd, name="fresh")).text == "added fresh"
        assert "mcp__live__fresh" in tool_names(hub) and rec.changes == 2
        assert "mcp__live__fresh" in toolset and "mcp__live__fresh" in toolset.names()
        assert (await run(hub, "mcp__live__fresh", cwd)).text == "I am fresh"

        await run(hub, "mcp__live__add_prompt", cwd, name="brief")
        assert "mcp:live:brief" in {p.name for p in hub.prompts()} and rec.changes == 3
        blocks = await hub.get_prompt("mcp:live:brief", "")
        assert blocks == [t.TextContent(text="Prompt brief speaking.")]

        await run(hub, "mcp__live__remove_tool", cwd, name="fresh")
        assert "mcp__live__fresh" not in tool_names(hub) and rec.changes == 4
        assert toolset.get("mcp__live__fresh") is None
        assert "mcp__live__echo" in toolset
        assert rec.problems == []
    finally:
        await hub.aclose()


async def test_list_changes_over_streamable_http(tmp_path: Path) -> None:
    """The same over streamable HTTP (the listen stream is a long-lived POST). The change
    and the call's answer come on two HTTP streams, in no order one can rely on: the call
    may return before the change is read (``_server``: only an answer read after the
    notification waits for the new list), so the test waits for the change itself."""
    from .servers.live import build_server

    cwd = str(tmp_path)
    rec = Recorder()
    async with LocalServer(build_server("web").streamable_http_app()) as web:
        hub = McpHub([http("web", web.url("/mcp"))], cwd=cwd,
                     on_problem=rec.on_problem, on_change=rec.on_change)
        hub.start()
        try:
            await hub.wait_ready(WAIT)
            await run(hub, "mcp__web__add_tool", cwd, name="fresh")
            await rec.until(lambda: rec.changes == 2)
            assert "mcp__web__fresh" in tool_names(hub)
            assert (await run(hub, "mcp__web__fresh", cwd)).text == "I am fresh"
            assert rec.problems == []
        finally:
            await hub.aclose()


# ------------------------------------------------------------------------ losing a server


async def test_a_lost_server_is_restarted_once_then_given_up(tmp_path: Path) -> None:
    """Dying during a call: the call fails saying so, the server is started again and
    reported, its tools are back. Dying again (idle, killed): reported, not restarted;
    the other server carries on; no process is left behind."""
    cwd = str(tmp_path)
    pid_file = tmp_path / "live.pids"
    rec = Recorder()
    hub = McpHub([stdio("live", LIVE, "--pid-file", str(pid_file)), stdio("other")], cwd=cwd,
                 on_problem=rec.on_problem, on_change=rec.on_change)
    hub.start()
    try:
        await hub.wait_ready(WAIT)
        first = int((await run(hub, "mcp__live__pid", cwd)).text)
        stale = {tool.spec.name: tool for tool in hub.tools()}["mcp__live__echo"]

        with pytest.raises(ToolError) as failed:
            await run(hub, "mcp__live__crash", cwd)
        assert failed.value.message == (
            "MCP server 'live' exited during a call to 'crash'; it is being restarted")
        severity, description = await rec.reported("MCP server 'live' stopped; restarted")
        assert severity == "warning"
        assert description.startswith("the server exited during a call to 'crash'")
        assert hub.status() == {"live": "ready", "other": "ready"}
        assert "mcp__live__echo" in tool_names(hub)
        second = int((await run(hub, "mcp__live__pid", cwd)).text)
        assert second != first and pids(pid_file) == [first, second]
        assert not alive(first)

        os.kill(second, signal.SIGKILL)  # idle: nobody is calling it
        severity, description = await rec.reported("MCP server 'live' stopped again")
        assert severity == "error"
        assert description.startswith("the server exited")
        assert "not restarted again" in description
        await rec.until(lambda: rec.changes == 5)  # 2 ready, lost, back, lost for good
        assert hub.status() == {"live": "failed", "other": "ready"}
        assert not any(name.startswith("mcp__live__") for name in tool_names(hub))
        with pytest.raises(ToolError, match="MCP server 'live' is not available"):
            await stale.run({"text": "x"}, tool_ctx(cwd))
        assert (await run(hub, "mcp__other__echo", cwd, text="ok")).text == "echo: ok"
        assert len(rec.problems) == 2
    finally:
        await hub.aclose()
    assert pids(pid_file) == [first, second]  # not restarted a second time
    assert not alive(second)


async def test_a_server_that_cannot_be_restarted_is_reported(tmp_path: Path) -> None:
    """The restart fails (the server refuses to start twice): one error names both the
    loss and why the restart failed, with the new process's stderr."""
    cwd = str(tmp_path)
    rec = Recorder()
    hub = McpHub([stdio("live", LIVE, "--once", str(tmp_path / "started"))], cwd=cwd,
                 on_problem=rec.on_problem, on_change=rec.on_change)
    hub.start()
    try:
        await hub.wait_ready(WAIT)
        with pytest.raises(ToolError, match="exited during a call to 'crash'; it is being"):
            await run(hub, "mcp__live__crash", cwd)
        severity, description = await rec.reported(
            "MCP server 'live' stopped; could not be restarted")
        assert severity == "error"
        assert description.startswith("the server exited during a call to 'crash'")
        assert "Restarting it failed: the server process exited before it was ready" in description
        assert "live: refusing to start again" in description
        assert hub.status() == {"live": "failed"}
        assert hub.tools() == [] and hub.prompts() == []
        assert rec.changes == 2  # ready, lost
    finally:
        await hub.aclose()


async def test_a_dropped_http_connection_is_reconnected(tmp_path: Path) -> None:
    """The HTTP server cuts its connections but keeps serving: the hub reconnects once and
    says so; then the server goes away for good: reported as not reconnected."""
    from .servers.live import build_server

    cwd = str(tmp_path)
    rec = Recorder()
    web = LocalServer(build_server("web").streamable_http_app())
    await web.__aenter__()
    hub = McpHub([http("web", web.url("/mcp"))], cwd=cwd,
                 on_problem=rec.on_problem, on_change=rec.on_change)
    hub.start()
    try:
        await hub.wait_ready(WAIT)
        assert web.drop_connections() >= 1  # the listen stream, at least
        severity, description = await rec.reported("MCP server 'web' stopped; reconnected")
        assert severity == "warning" and description.startswith("the connection was lost")
        assert (await run(hub, "mcp__web__echo", cwd, text="back")).text == "echo: back"

        await web.__aexit__(None, None, None)
        severity, description = await rec.reported("MCP server 'web' stopped again")
        assert severity == "error" and "not reconnected again" in description
        assert hub.status() == {"web": "failed"} and hub.tools() == []
    finally:
        await hub.aclose()
        if web._task is not None and not web._task.done():
            await web.__aexit__(None, None, None)


async def test_an_http_server_that_is_gone_is_not_reconnected(tmp_path: Path) -> None:
    """The HTTP server stops: the one reconnection fails and says why."""
    from .servers.live import build_server

    cwd = str(tmp_path)
    rec = Recorder()
    async with LocalServer(build_server("web").streamable_http_app()) as web:
        hub = McpHub([http("web", web.url("/mcp"))], cwd=cwd,
                     on_problem=rec.on_problem, on_change=rec.on_change)
        hub.start()
        await hub.wait_ready(WAIT)
    try:
        severity, description = await rec.reported(
            "MCP server 'web' stopped; could not be reconnected")
        assert severity == "error" and "Reconnecting it failed" in description
        assert hub.status() == {"web": "failed"} and hub.tools() == []
    finally:
        await hub.aclose()
