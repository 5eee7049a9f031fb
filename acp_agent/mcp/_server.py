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
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO, TypeAlias

from .. import log
from .._version import __version__
from ..errors import ToolError
from ..protocol import types as t

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client import Transport
    from mcp.client.session import ClientRequestContext
    from mcp.types import CallToolResult, ErrorData, GetPromptResult, ListRootsResult, Prompt, Tool

State: TypeAlias = Literal["starting", "ready", "failed", "closed"]
TransportKind: TypeAlias = Literal["stdio", "http", "sse"]

#: Upper bound for one server's shutdown. The SDK closes a stdio server's stdin, sends
#: SIGTERM to its process group after 2 s, SIGKILL after 2 s more; well-behaved servers
#: exit at once.
CLOSE_TIMEOUT = 5.0

#: HTTP timeouts: connect/write (and the SSE stream's read gap, like the SDK's default).
HTTP_TIMEOUT = 30.0
HTTP_READ_TIMEOUT = 300.0

#: Environment passed to stdio servers besides the SDK's own short list (HOME, LOGNAME,
#: PATH, SHELL, TERM, USER) and the server's configured ``env``. The agent's API keys
#: are deliberately not among them.
EXTRA_ENV = (
    "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TMPDIR", "TMP", "TEMP",
    "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
    "no_proxy", "all_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
)  # fmt: skip

#: Lines of a stdio server's stderr kept for failure reports.
STDERR_TAIL = 12

_sdk_loaded = False


async def load_sdk() -> None:
    """Import the MCP SDK (about a second of imports) in a worker thread, once, so the
    event loop keeps answering the editor meanwhile."""
    global _sdk_loaded
    if not _sdk_loaded:
        await asyncio.to_thread(_import_sdk)
        _sdk_loaded = True


def _import_sdk() -> None:
    import httpx2  # noqa: F401
    import mcp.client.sse
    import mcp.client.streamable_http  # noqa: F401


def transport_kind(config: t.McpServerAny) -> TransportKind | None:
    kind = config.type if isinstance(config.type, str) else "stdio"
    if kind in ("stdio", "http", "sse"):
        return kind  # type: ignore[return-value]
    return None


def base_env() -> dict[str, str]:
    from mcp.client.stdio import get_default_environment

    env = get_default_environment()
    for key in EXTRA_ENV:
        value = os.environ.get(key)
        if value is not None and not value.startswith("()"):
            env[key] = value
    return env


def describe(exc: BaseException) -> str:
    """A one-line reason from an exception, looking through anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    if isinstance(exc, OSError | ValueError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _StderrTail:
    """A pipe for a stdio server's stderr: lines go to the log, the last few are kept for
    failure reports."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.lines: deque[str] = deque(maxlen=STDERR_TAIL)
        read_fd, write_fd = os.pipe()
        self._read = os.fdopen(read_fd, "rb", buffering=0)
        self.write: TextIO = os.fdopen(write_fd, "w")
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._pump())

    def spawned(self) -> None:
        """The child has its copy of the write end; drop ours so its exit reads as EOF."""
        self.write.close()

    async def _pump(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), self._read
        )
        try:
            while not reader.at_eof():
                try:
                    line = await reader.readline()
                except ValueError:  # a line over the reader's limit was dropped
                    continue
                text = line.decode("utf-8", "replace").rstrip()
                if text:
                    self.lines.append(text[:500])
                    log.info("mcp.stderr", server=self.server, line=text)
        finally:
            transport.close()

    async def tail(self, wait: float = 0.3) -> str:
        """The last lines, after giving an exiting server ``wait`` seconds to finish them."""
        if self._task is not None and self.write.closed:
            await asyncio.wait({self._task}, timeout=wait)
        return "\n".join(self.lines)

    async def close(self) -> None:
        self.write.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._read.close()


@contextlib.asynccontextmanager
async def _stdio(params: Any, stderr: _StderrTail) -> AsyncIterator[Any]:
    """The SDK's stdio transport, with the server's stderr going to ``stderr``."""
    from mcp.client.stdio import stdio_client

    async with stdio_client(params, errlog=stderr.write) as streams:
        stderr.spawned()
        yield streams


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
        self._stderr: _StderrTail | None = None

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
            self._stderr = _StderrTail(self.name)
            self._stderr.start()
            return _stdio(params, self._stderr)
        if self.kind in ("http", "sse"):
            if not isinstance(cfg.url, str) or not cfg.url:
                raise ValueError(f"an {self.kind} MCP server needs a url")
            pairs = cfg.headers if isinstance(cfg.headers, list) else []
            headers = {h.name: h.value for h in pairs}
            if self.kind == "sse":
                from mcp.client.sse import sse_client

                return sse_client(cfg.url, headers=headers, timeout=HTTP_TIMEOUT,
                                  sse_read_timeout=HTTP_READ_TIMEOUT)
            return _streamable_http(cfg.url, headers)
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


@contextlib.asynccontextmanager
async def _streamable_http(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP transport over an HTTP client carrying ``headers``."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(HTTP_TIMEOUT, read=HTTP_READ_TIMEOUT)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams

