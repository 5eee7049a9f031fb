"""One MCP server's connection: transport, handshake, listings, calls, shutdown.

Each :class:`ServerConnection` runs its whole life in one background task, because the
SDK's ``Client`` is an anyio context manager that must be entered and exited by the same
task. Calls (``tools/call``, ``prompts/get``) come from other tasks; a caller's
cancellation makes the SDK send ``notifications/cancelled`` and leaves the session usable.

States::

    starting --> ready --> failed (died, or the connection was lost)
        |          |
        +--> failed   +--> closed (aclose)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .. import log
from .._version import __version__
from ..errors import ToolError
from ..protocol import types as t
from ._transports import StderrTail, base_env, describe, load_sdk, sse, stdio, streamable_http

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client import Transport
    from mcp.client.session import ClientRequestContext
    from mcp.types import CallToolResult, ErrorData, GetPromptResult, ListRootsResult, Prompt, Tool

__all__ = ["ServerConnection", "base_env", "describe", "load_sdk", "transport_kind"]

State: TypeAlias = Literal["starting", "ready", "failed", "closed"]
TransportKind: TypeAlias = Literal["stdio", "http", "sse"]

#: Upper bound for one server's shutdown. The SDK closes a stdio server's stdin, sends
#: SIGTERM to its process group after 2 s, SIGKILL after 2 s more; well-behaved servers
#: exit at once.
CLOSE_TIMEOUT = 5.0

def transport_kind(config: t.McpServerAny) -> TransportKind | None:
    kind = config.type if isinstance(config.type, str) else "stdio"
    if kind in ("stdio", "http", "sse"):
        return kind  # type: ignore[return-value]
    return None


class ServerConnection:
    """One configured MCP server. Created by the hub; ``on_ready``/``on_failed`` report
    back to it (``on_failed`` gets whether the server had been ready)."""

    def __init__(
        self,
        config: t.McpServerAny,
        key: str,
        *,
        cwd: str,
        on_ready: Callable[[ServerConnection], Awaitable[None]],
        on_failed: Callable[[ServerConnection, bool], Awaitable[None]],
    ) -> None:
        self.config = config
        self.name = config.name
        self.key = key
        self.cwd = cwd
        self.kind = transport_kind(config)
        self.state: State = "starting"
        self.error: str | None = None
        self.tools: list[Tool] = []
        self.prompts: list[Prompt] = []
        self.settled = asyncio.Event()
        """Set once the server is ready or has failed."""
        self._on_ready = on_ready
        self._on_failed = on_failed
        self._stop = asyncio.Event()
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stderr: StderrTail | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"mcp-server:{self.key}"
            )
            self._task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("mcp.task_failed", server=self.name, error=describe(exc))

    async def _run(self) -> None:
        try:
            await load_sdk()
            async with self._make_client() as client:
                tools, prompts = await self._list(client)
                self.tools, self.prompts = tools, prompts
                self._client = client
                self.state = "ready"
                self.settled.set()
                log.info("mcp.ready", server=self.name, tools=len(tools), prompts=len(prompts))
                await self._on_ready(self)
                await self._stop.wait()
        except Exception as exc:
            if self.state in ("starting", "ready"):
                log.info("mcp.failed", server=self.name, error=describe(exc))
                await self._fail(await self._startup_reason(exc))
            else:
                log.debug("mcp.exit_error", server=self.name, error=describe(exc))
        finally:
            self._client = None
            self.settled.set()
            if self._stderr is not None:
                await self._stderr.close()

    async def _startup_reason(self, exc: BaseException) -> str:
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED

        leaf = exc
        while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
            leaf = leaf.exceptions[0]
        if isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED and self.kind == "stdio":
            reason = "the server process exited before it was ready"
        else:
            reason = describe(exc)
        return await self._with_stderr(reason)

    async def _with_stderr(self, reason: str) -> str:
        tail = await self._stderr.tail() if self._stderr is not None else ""
        return f"{reason}\n\nLast lines of its stderr:\n{tail}" if tail else reason

    async def _fail(self, reason: str) -> None:
        if self.state in ("failed", "closed"):
            return
        was_ready = self.state == "ready"
        self.state = "failed"
        self.error = reason
        self.settled.set()
        self._stop.set()
        await self._on_failed(self, was_ready)

    async def close(self) -> None:
        """Shut the server down (idempotent, bounded by :data:`CLOSE_TIMEOUT`)."""
        if self.state != "failed":
            self.state = "closed"
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        if self._client is None:  # still connecting: nothing to wait for
            task.cancel()
        done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
        if not done:
            log.warning("mcp.close_timeout", server=self.name)

    # ------------------------------------------------------------------ connecting

    def _make_client(self) -> Client:
        from mcp import Client
        from mcp.types import Implementation

        return Client(
            self._transport(),
            cache=None,
            client_info=Implementation(name="acp-reference-agent", version=__version__),
            list_roots_callback=self._list_roots,
        )

    def _transport(self) -> Transport:
        cfg = self.config
        if self.kind == "stdio":
            if not isinstance(cfg.command, str) or not cfg.command:
                raise ValueError("a stdio MCP server needs a command")
            from mcp import StdioServerParameters

            env = base_env()
            for var in cfg.env if isinstance(cfg.env, list) else []:
                env[var.name] = var.value
            params = StdioServerParameters(
                command=cfg.command,
                args=list(cfg.args) if isinstance(cfg.args, list) else [],
                env=env,
                cwd=self.cwd,
            )
            self._stderr = StderrTail(self.name)
            self._stderr.start()
            return stdio(params, self._stderr)
        if self.kind in ("http", "sse"):
            if not isinstance(cfg.url, str) or not cfg.url:
                raise ValueError(f"an {self.kind} MCP server needs a url")
            pairs = cfg.headers if isinstance(cfg.headers, list) else []
            headers = {h.name: h.value for h in pairs}
            if self.kind == "sse":
                return sse(cfg.url, headers)
            return streamable_http(cfg.url, headers)
        raise ValueError(f"unsupported MCP server type {cfg.type!r}")

    async def _list(self, client: Client) -> tuple[list[Tool], list[Prompt]]:
        caps = client.server_capabilities
        tools: list[Tool] = []
        prompts: list[Prompt] = []
        cursor: str | None = None
        for _ in range(100) if caps.tools is not None else ():
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            if (cursor := page.next_cursor) is None:
                break
        cursor = None
        for _ in range(100) if caps.prompts is not None else ():
            ppage = await client.list_prompts(cursor=cursor)
            prompts.extend(ppage.prompts)
            if (cursor := ppage.next_cursor) is None:
                break
        return tools, prompts

    async def _list_roots(self, context: ClientRequestContext) -> ListRootsResult | ErrorData:
        from mcp.types import ListRootsResult, Root

        uri = Path(self.cwd).resolve().as_uri()
        return ListRootsResult(roots=[Root(uri=uri, name=os.path.basename(self.cwd) or uri)])  # type: ignore[arg-type]

    # ------------------------------------------------------------------ calls

    def _ready_client(self) -> Client:
        client = self._client
        if client is None or self.state != "ready":
            why = f": {self.error.splitlines()[0]}" if self.error else ""
            raise ToolError(f"MCP server {self.name!r} is not available{why}")
        return client

    async def _lost(self, during: str, message: str) -> ToolError:
        """The connection closed under a call. A stdio (or SSE) connection does not come
        back: mark the server failed and report it. Streamable HTTP sends each request
        on its own, so one failed request leaves the server in place."""
        if self.state == "closed":
            return ToolError(f"MCP server {self.name!r} was shut down")
        if self.kind == "http":
            return ToolError(f"MCP server {self.name!r}: {message}")
        what = "exited" if self.kind == "stdio" else "closed the connection"
        await self._fail(await self._with_stderr(f"the server {what} during {during}"))
        return ToolError(f"MCP server {self.name!r} {what}; its tools are no longer available")

    async def call_tool(self, tool: str, args: Mapping[str, Any]) -> CallToolResult:
        """Call ``tool``; failures other than cancellation become :class:`ToolError`."""
        client = self._ready_client()
        async with self._translated(f"a call to {tool!r}"):
            return await client.call_tool(tool, dict(args))

    async def get_prompt(self, prompt: str, args: dict[str, str]) -> GetPromptResult:
        client = self._ready_client()
        async with self._translated(f"a request for prompt {prompt!r}"):
            return await client.get_prompt(prompt, args or None)

    @contextlib.asynccontextmanager
    async def _translated(self, during: str) -> AsyncIterator[None]:
        """The one place SDK errors become :class:`ToolError` (a closed connection also
        marks the server lost). Cancellation passes through untouched."""
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED

        try:
            yield
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise await self._lost(during, exc.message) from None
            raise ToolError(f"MCP server {self.name!r}: {exc.message}") from None
        except Exception as exc:
            raise ToolError(f"MCP server {self.name!r}: {describe(exc)}") from None
