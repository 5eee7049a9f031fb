"""Fixtures for the MCP hub tests: server configs, in-process HTTP/SSE servers on
127.0.0.1, a recorder for the hub's callbacks, and a tool context."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from acp_agent.protocol import types as t
from acp_agent.tools.base import ToolContext

from ..limits import WAIT, eventually

SERVERS = Path(__file__).parent / "servers"


@pytest.fixture(autouse=True)
def roomy_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounds on a server's speed get the room of a wait in this process (agent processes
    keep theirs): the SDK gives a server 10 s to answer its ``server/discover`` probe, then
    falls back to the ``initialize`` handshake (and re-probes once the server turns out to
    be modern), and a call waits 10 s at most for the lists its server said changed
    (``_server.REFRESH_WAIT``). A server on a busy machine (its SDK imported under
    coverage) can take longer; what the tests see must not depend on that."""
    monkeypatch.setattr("mcp.client.session.DISCOVER_TIMEOUT_SECONDS", WAIT)
    monkeypatch.setattr("acp_agent.mcp._server.REFRESH_WAIT", WAIT)
DEMO = str(SERVERS / "demo.py")
LIVE = str(SERVERS / "live.py")


def stdio(name: str, script: str = DEMO, *args: str, env: dict[str, str] | None = None,
          command: str = sys.executable) -> t.McpServerAny:
    """A stdio server entry as the editor sends it (no ``type`` field)."""
    return t.McpServerAny(
        name=name,
        command=command,
        args=[script, *args] if script else list(args),
        env=[t.EnvVariable(name=k, value=v) for k, v in (env or {}).items()],
    )


def http(name: str, url: str, *, kind: str = "http",
         headers: dict[str, str] | None = None) -> t.McpServerAny:
    return t.McpServerAny(
        name=name,
        type=kind,
        url=url,
        headers=[t.HttpHeader(name=k, value=v) for k, v in (headers or {}).items()],
    )


@dataclass
class Recorder:
    """Records ``on_problem`` and ``on_change`` calls."""

    problems: list[tuple[str, str, str | None]] = field(default_factory=list)
    changes: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    _news: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def on_problem(self, severity: str, title: str, description: str | None) -> None:
        self.problems.append((severity, title, description))
        async with self._news:
            self._news.notify_all()

    async def on_change(self) -> None:
        self.changes += 1
        self.changed.set()
        async with self._news:
            self._news.notify_all()

    def problem(self, title: str) -> tuple[str, str]:
        """``(severity, description)`` of the problem reported under ``title``."""
        found = [(sev, desc or "") for sev, tit, desc in self.problems if tit == title]
        assert len(found) == 1, (title, self.problems)
        return found[0]

    async def until(self, predicate: Callable[[], bool], timeout: float = WAIT) -> None:
        """Wait until ``predicate()`` holds, checked after each reported problem or change
        (``timeout`` only guards against a hang)."""
        async def wait() -> None:
            async with self._news:
                await self._news.wait_for(predicate)

        await asyncio.wait_for(wait(), timeout)

    async def reported(self, title: str, timeout: float = WAIT) -> tuple[str, str]:
        await self.until(lambda: any(tit == title for _, tit, _ in self.problems), timeout)
        return self.problem(title)


def tool_ctx(cwd: str) -> ToolContext:
    async def emit(update: Any) -> None:
        pass

    return ToolContext(session_id="s1", cwd=cwd, roots=[cwd], client=None,  # type: ignore[arg-type]
                       tool_call_id="call-1", emit=emit)


class LocalServer:
    """An ASGI app served by uvicorn on 127.0.0.1 (ephemeral port) in this event loop.
    Records the headers of every request it gets."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.headers: list[dict[str, str]] = []
        self.port = 0
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self._requests: set[asyncio.Task[Any]] = set()

    async def _record(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        task = asyncio.current_task()
        assert task is not None
        self._requests.add(task)
        try:
            await self.app(scope, receive, send)
        finally:
            self._requests.discard(task)

    def drop_connections(self) -> int:
        """Cut every request in progress (uvicorn closes their connections); the server
        goes on serving. Returns how many were cut."""
        for task in self._requests:
            task.cancel()
        return len(self._requests)

    async def __aenter__(self) -> LocalServer:
        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self._record, log_config=None, log_level="warning",
                                lifespan="on", interface="asgi3",
                                timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        task = self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        await eventually(lambda: self._server.started or task.done(), "uvicorn starts")
        assert not task.done(), "uvicorn did not start"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.should_exit = True
        assert self._task is not None
        await self._task

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def web() -> AsyncIterator[LocalServer]:
    """The demo server over streamable HTTP at ``/mcp``."""
    from .servers.demo import build_server

    async with LocalServer(build_server("web").streamable_http_app()) as server:
        yield server


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def legacy_sse() -> AsyncIterator[LocalServer]:
    """The demo server over the (deprecated) HTTP+SSE transport at ``/sse``."""
    from .servers.demo import build_server

    async with LocalServer(build_server("legacy").sse_app()) as server:
        yield server
