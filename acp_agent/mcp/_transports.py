"""How the SDK reaches a server: stdio (with the server's stderr kept for reports),
streamable HTTP, SSE; and :func:`watched`, which tells when a connection's incoming side
ends (a stdio server that exited, a stream the server closed) even while no call waits,
and which notifications come in, in wire order.

The SDK is imported inside the functions: importing this module stays free of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TextIO

from .. import IMPORTING, log

if TYPE_CHECKING:
    from mcp.client import Transport

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
    with IMPORTING:  # (one import at a time: never beside the warm-up's SDK import)
        import httpx2  # noqa: F401
        import mcp.client.sse
        import mcp.client.streamable_http
        import mcp.client.subscriptions  # noqa: F401


def base_env() -> dict[str, str]:
    # the MCP SDK (heavy): only once a server is configured
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


class StderrTail:
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
async def stdio(params: Any, stderr: StderrTail) -> AsyncIterator[Any]:
    """The SDK's stdio transport, with the server's stderr going to ``stderr``."""
    # the MCP SDK (heavy): only once a server is configured
    from mcp.client.stdio import stdio_client

    async with stdio_client(params, errlog=stderr.write) as streams:
        stderr.spawned()
        yield streams


@contextlib.asynccontextmanager
async def streamable_http(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP transport over an HTTP client carrying ``headers``."""
    # the MCP SDK (heavy): only once a server is configured
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(HTTP_TIMEOUT, read=HTTP_READ_TIMEOUT)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def sse(url: str, headers: dict[str, str]) -> Transport:
    # the MCP SDK (heavy): only once a server is configured
    from mcp.client.sse import sse_client

    return sse_client(
        url, headers=headers, timeout=HTTP_TIMEOUT, sse_read_timeout=HTTP_READ_TIMEOUT
    )


class _WatchedRead:
    """A transport's read stream that shows each incoming notification's method to
    ``on_notification`` (in wire order: before any later answer is read) and calls
    ``on_end`` once when the stream ends (how an idle connection's loss is seen)."""

    def __init__(
        self, inner: Any, on_end: Callable[[], None], on_notification: Callable[[str], None]
    ) -> None:
        self._inner = inner
        self._on_end: Callable[[], None] | None = on_end
        self._on_notification = on_notification

    def _ended(self) -> None:
        on_end, self._on_end = self._on_end, None
        if on_end is not None:
            on_end()

    def _seen(self, item: Any) -> Any:
        # the MCP SDK (heavy): only once a server is configured
        from mcp_types import JSONRPCNotification

        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCNotification):
            self._on_notification(message.method)
        return item

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        # the MCP SDK (heavy): only once a server is configured
        import anyio

        try:
            return self._seen(await self._inner.receive())
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._ended()
            raise

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        # the MCP SDK (heavy): only once a server is configured
        import anyio

        try:
            return self._seen(await self._inner.__anext__())
        except (StopAsyncIteration, anyio.ClosedResourceError):
            self._ended()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedRead:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._inner.__aexit__(*exc)  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def watched(
    transport: Transport, on_end: Callable[[], None], on_notification: Callable[[str], None]
) -> AsyncIterator[Any]:
    """``transport``, calling ``on_end()`` once when its incoming side ends and
    ``on_notification(method)`` for each notification as it arrives."""
    async with transport as (read, write):
        yield _WatchedRead(read, on_end, on_notification), write
