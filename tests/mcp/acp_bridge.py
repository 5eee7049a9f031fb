"""The editor's side of MCP over ACP, for the harness: an MCP server the *client* provides
(``{"type": "acp", "serverId": …}`` in ``session/new``), backed by a real stdio MCP server.

Each ``mcp/message`` request the agent sends is written to the server as the inner
JSON-RPC request, with the outer ``requestId`` as its id; the server's answer goes back as
``{"result": …}`` or ``{"error": …}``. A notification from the server that belongs to an
active request (a ``subscriptions/listen`` stream's frames name it in ``_meta``, progress
by its token) goes to the agent as an ``mcp/message`` notification with that
``requestId``. Requests from the server are refused: the schema has no way to carry them.

:meth:`AcpBridge.for_agent` plugs it into a harness :class:`AgentProcess`; in-process
tests pass their own ``notify`` and call :meth:`AcpBridge.handle` themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from ..harness import AgentProcess
from ..limits import WAIT

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


class AcpBridge:
    def __init__(self, notify: Callable[[dict[str, Any]], Awaitable[None]], server_id: str,
                 script: str, *args: str) -> None:
        self.notify = notify
        """Sends an ``mcp/message`` notification (its params) to the agent."""
        self.server_id = server_id
        self.argv = [sys.executable, script, *args]
        self.requests: list[dict[str, Any]] = []
        """The ``mcp/message`` params the agent sent, in order."""
        self.cancelled: list[str] = []
        """The ``requestId``s the agent gave up on before their answer."""
        self.news = asyncio.Condition()
        """Notified whenever ``requests`` or ``cancelled`` grow."""
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}

    @classmethod
    def for_agent(cls, agent: AgentProcess, server_id: str, script: str, *args: str
                  ) -> AcpBridge:
        """A bridge answering ``agent``'s ``mcp/message`` requests."""
        async def notify(params: dict[str, Any]) -> None:
            await agent.notify("mcp/message", params)

        bridge = cls(notify, server_id, script, *args)
        agent.handlers["mcp/message"] = bridge.handle
        return bridge

    async def until(self, predicate: Callable[[], bool], timeout: float = WAIT) -> None:
        """Wait for ``predicate()`` (``timeout`` only guards against a hang)."""
        async def wait() -> None:
            async with self.news:
                await self.news.wait_for(predicate)

        await asyncio.wait_for(wait(), timeout)

    async def _tell(self) -> None:
        async with self.news:
            self.news.notify_all()

    def config(self, name: str) -> dict[str, Any]:
        """The ``mcpServers`` entry for ``session/new``."""
        return {"type": "acp", "name": name, "serverId": self.server_id}

    async def __aenter__(self) -> AcpBridge:
        self._proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        for future in self._pending.values():
            future.cancel()
        self._proc.stdin.close()
        await self._proc.wait()
        if self._reader is not None:
            await self._reader

    async def handle(self, params: dict[str, Any]) -> dict[str, Any]:
        """The client's answer to one ``mcp/message`` request."""
        assert self._proc is not None and self._proc.stdin is not None
        self.requests.append(params)
        await self._tell()
        assert params["serverId"] == self.server_id
        request_id = params["requestId"]
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        inner: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": params["method"]}
        if params.get("params") is not None:
            inner["params"] = params["params"]
        self._proc.stdin.write(json.dumps(inner).encode() + b"\n")
        await self._proc.stdin.drain()
        try:
            answer = await future
        except asyncio.CancelledError:
            self.cancelled.append(request_id)
            await asyncio.shield(self._tell())
            raise
        finally:
            self._pending.pop(request_id, None)
        return {"error": answer["error"]} if "error" in answer else {"result": answer["result"]}

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            message = json.loads(line)
            if "method" not in message:
                future = self._pending.get(message.get("id"))
                if future is not None and not future.done():
                    future.set_result(message)
            elif "id" in message:
                await self._refuse(message["id"])
            else:
                await self._forward(message)

    async def _forward(self, message: dict[str, Any]) -> None:
        params = message.get("params") or {}
        meta = params.get("_meta") or {}
        request_id = meta.get(SUBSCRIPTION_ID, params.get("progressToken"))
        if request_id not in self._pending:
            return  # belongs to no active request: nothing to carry it
        with contextlib.suppress(Exception):  # the agent may be gone
            await self.notify({"serverId": self.server_id, "requestId": request_id,
                               "method": message["method"], "params": params})  # fmt: skip

    async def _refuse(self, request_id: Any) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        error = {"code": -32601, "message": "no server requests over ACP"}
        self._proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id,
                                           "error": error}).encode() + b"\n")  # fmt: skip
        await self._proc.stdin.drain()
