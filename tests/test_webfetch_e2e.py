"""web_fetch through the agent: it asks as a read outside the workspace would, "always"
covers the host it was given for and no other; `[web] enabled = false` offers no such
tool."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall
from .fakes.web_server import WebServer
from .harness import select_kind
from .routes import CHAT, ROUTES, Route
from .schema_check import SchemaChecker


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def fetch(call_id: str, url: str) -> Reply:
    return Reply([ToolCall(call_id, "web_fetch", json.dumps({"url": url})), Finish("tool_calls")])


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.name)
async def test_permission_is_asked_per_host(
    route: Route, checker: SchemaChecker, state_dir: str, workspace: str,
    server: FakeLLMServer, tmp_path: Path,
) -> None:  # fmt: skip
    """On every provider route; the page comes gzipped (the fake server compresses as
    real ones do) and reaches the model as Markdown."""
    async with WebServer() as site:
        site.routes["/a"] = (200, {"content-type": "text/html"}, b"<p>page <b>A</b></p>")
        server.enqueue(fetch("c1", f"{site.url}/a"), fetch("c2", f"{site.url}/a?again"),
                       fetch("c3", f"http://localhost:{site.port}/a"),
                       Reply([Text("read"), Finish("stop")]))  # fmt: skip
        route = replace(route, config=route.config + "[web]\nallow-private = true\n")
        async with route.agent(checker, state_dir, server, tmp_path) as agent:
            agent.handlers["session/request_permission"] = select_kind("allow_always")
            await agent.initialize()
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "read the docs")
            asked = [r["params"] for r in agent.client_requests
                     if r["method"] == "session/request_permission"]  # fmt: skip
    assert [q["toolCall"]["title"] for q in asked] == [
        f"Fetch {site.url}/a", f"Fetch http://localhost:{site.port}/a"]
    assert [o["name"] for o in asked[0]["options"]] == [
        "Allow once", "Always allow fetches from 127.0.0.1", "Reject",
        "Always reject fetches from 127.0.0.1"]
    results = route.tool_results(server.requests[-1].body)
    assert len(results) == 3 and all(r.endswith("page **A**") for r in results), results
    assert len(site.requests) == 3 and all("gzip" in r.accept_encoding for r in site.requests)


async def test_web_fetch_is_not_offered_when_disabled(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    server.enqueue(Reply([Text("a"), Finish("stop")]), Reply([Text("b"), Finish("stop")]))
    for config, offered in (("", True), ("[web]\nenabled = false\n", False)):
        route = Route("chat", CHAT.model, config)
        async with route.agent(checker, state_dir, server, tmp_path) as agent:
            await agent.initialize()
            await agent.prompt(await agent.new_session(workspace), "hi")
        assert ("web_fetch" in CHAT.tool_names(server.requests[-1].body)) is offered
