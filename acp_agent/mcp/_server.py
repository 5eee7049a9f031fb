"""One MCP server's connection: transport, handshake, listings and their changes, calls,
losing the server (and trying once more), shutdown.

Each :class:`ServerConnection` runs its whole life in one background task, because the
SDK's ``Client`` is an anyio context manager that must be entered and exited by the same
task. Calls (``tools/call``, ``prompts/get``) come from other tasks; a caller's
cancellation makes the SDK send ``notifications/cancelled`` and leaves the session usable.

States::

    starting --> ready --(lost)--> restarting --> ready --(lost again)--> failed
        |                              |
        +--> failed                    +--> failed (could not be restarted)
    any --> closed (aclose)

A ready server is *lost* when its connection ends while nobody closed it: a stdio server
that exits (seen even while idle: its stdout ends), a connection that drops under a call
or a ``subscriptions/listen`` stream, a transport that fails. The first loss starts (or
reconnects) the server once more; a second one is final, so a server that keeps dying is
not restarted in a loop.

List changes: on the 2026-07-28 protocol the server tells only a ``subscriptions/listen``
stream, opened before the first listing so no change falls between the two; earlier
servers send ``notifications/tools/list_changed`` (``prompts``) unasked. Either way the
notification is seen as it is read off the wire, the list is fetched again and
``on_updated`` is called; a call whose answer came after such a notification returns
once the new list is in (bounded by :data:`REFRESH_WAIT`), so the model's next request
already offers it.
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
from ._acp import AcpRequest, acp_transport
from ._transports import StderrTail, base_env, describe, load_sdk, sse, stdio, streamable_http
from ._transports import watched as _watched

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client import Transport
    from mcp.client.session import ClientRequestContext
    from mcp.types import CallToolResult, ErrorData, GetPromptResult, ListRootsResult, Prompt, Tool

__all__ = ["ServerConnection", "base_env", "describe", "load_sdk", "transport_kind"]

State: TypeAlias = Literal["starting", "ready", "restarting", "failed", "closed"]
TransportKind: TypeAlias = Literal["stdio", "http", "sse", "acp"]
Kind: TypeAlias = Literal["tools", "prompts"]

#: Upper bound for one server's shutdown. The SDK closes a stdio server's stdin, sends
#: SIGTERM to its process group after 2 s, SIGKILL after 2 s more; well-behaved servers
#: exit at once.
CLOSE_TIMEOUT = 5.0

#: How often a lost server is started again (or reconnected) over the hub's lifetime.
MAX_RESTARTS = 1

#: How long a call's answer waits for a list change announced before it to be fetched.
REFRESH_WAIT = 10.0

_CHANGES: dict[str, Kind] = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
}


def transport_kind(config: t.McpServerAny, *, acp: bool = False) -> TransportKind | None:
    """The transport for ``config``; ``acp`` servers need the editor's channel."""
    kind = config.type if isinstance(config.type, str) else "stdio"
    if kind in ("stdio", "http", "sse") or (kind == "acp" and acp):
        return kind  # type: ignore[return-value]
    return None


class ServerConnection:
    """One configured MCP server. Created by the hub, which the callbacks report to:
    ``on_ready`` (ready, first or after a restart), ``on_updated`` (a list changed),
    ``on_lost(server, restarting)`` and ``on_failed(server, was_lost)`` (did not start,
    or could not be restarted after a loss)."""

    def __init__(
        self,
        config: t.McpServerAny,
        key: str,
        *,
        cwd: str,
        on_ready: Callable[[ServerConnection], Awaitable[None]],
        on_updated: Callable[[ServerConnection], Awaitable[None]],
        on_lost: Callable[[ServerConnection, bool], Awaitable[None]],
        on_failed: Callable[[ServerConnection, bool], Awaitable[None]],
        acp: AcpRequest | None = None,
        environ: Callable[[dict[str, str]], dict[str, str]] | None = None,
    ) -> None:
        self.config = config
        self.environ = environ
        """What a stdio server's small base environment (``base_env``) becomes before its
        configured variables: the agent removes what looks like a secret (``childenv``)."""
        self.name = config.name
        self.key = key
        self.cwd = cwd
        self.kind = transport_kind(config, acp=acp is not None)
        self.state: State = "starting"
        self.error: str | None = None
        self.lost: str | None = None
        """Why the server was last lost (for the restart report)."""
        self.restarts = 0
        self.tools: list[Tool] = []
        self.prompts: list[Prompt] = []
        self.settled = asyncio.Event()
        """Set once the server is ready or has failed (the first start only)."""
        self._on_ready = on_ready
        self._on_updated = on_updated
        self._on_lost = on_lost
        self._on_failed = on_failed
        self._acp = acp
        self._closing = False
        self._wake = asyncio.Event()
        self._loss: str | None = None
        self._will_restart = True
        self._calls: dict[object, str] = {}
        self._stale: set[Kind] = set()
        self._stale_event = asyncio.Event()
        self._current = asyncio.Event()
        """Clear while a change was announced and its list is not fetched yet."""
        self._current.set()
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stderr: StderrTail | None = None

    @property
    def restarted(self) -> str:
        return "restarted" if self.kind == "stdio" else "reconnected"

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
            while not self._closing:
                self._loss, self._wake = None, asyncio.Event()
                try:
                    await self._serve()
                except Exception as exc:
                    if self.state in ("starting", "restarting") and not self._closing:
                        log.info("mcp.failed", server=self.name, error=describe(exc))
                        await self._start_failed(exc)
                        return
                    self._lose()
                    if self._loss is not None:  # the transport failed: say how
                        self._loss = f"{self._loss} ({describe(exc)})"
                finally:
                    self._client = None
                if self._closing or self._loss is None:
                    return
                await self._after_loss(self._loss)
        finally:
            self._client = None
            self.settled.set()
            if self._stderr is not None:
                await self._stderr.close()

    async def _serve(self) -> None:
        """Connect, list, offer; return once closed or lost."""
        self._stale.clear()
        self._stale_event.clear()
        self._current.set()
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(self._make_client())
            subscription = await self._subscribe(client, stack)
            self.tools, self.prompts = await self._list(client, {"tools", "prompts"})
            if self._closing:
                return
            self._client, self.state, self.error = client, "ready", None
            self.settled.set()
            log.info("mcp.ready", server=self.name, tools=len(self.tools),
                     prompts=len(self.prompts), restarts=self.restarts)  # fmt: skip
            watchers = [asyncio.get_running_loop().create_task(self._refresh(client))]
            if subscription is not None:
                watchers.append(asyncio.get_running_loop().create_task(self._events(subscription)))
            try:
                await self._on_ready(self)
                await self._wake.wait()
            finally:
                self._client = None
                self._current.set()  # nobody waits for a list that will not come
                for watcher in watchers:
                    watcher.cancel()

    async def _after_loss(self, loss: str) -> None:
        self.lost = await self._with_stderr(loss)
        restarting = self._will_restart and not self._closing
        self.state, self.error = ("restarting" if restarting else "failed"), self.lost
        self.tools, self.prompts = [], []
        log.info("mcp.lost", server=self.name, reason=self.lost, restarting=restarting)
        if self._stderr is not None:
            await self._stderr.close()
            self._stderr = None
        if restarting:
            self.restarts += 1
        await self._on_lost(self, restarting)
        if not restarting:
            self._closing = True  # this server is done

    async def _start_failed(self, exc: BaseException) -> None:
        was_lost = self.state == "restarting"
        self.state, self.error = "failed", await self._startup_reason(exc)
        try:  # told first: a turn waiting for the servers learns of it before it goes on
            await self._on_failed(self, was_lost)
        finally:
            self.settled.set()

    async def _startup_reason(self, exc: BaseException) -> str:
        # the MCP SDK (heavy): only once a server is configured
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

    def _gone(self) -> str:
        return "the server exited" if self.kind == "stdio" else "the connection was lost"

    def _lose(self, reason: str | None = None) -> None:
        """The connection ended under a ready server (first reason wins)."""
        if self.state != "ready" or self._closing or self._loss is not None:
            return
        during = next(iter(self._calls.values()), None)
        self._loss = reason or (f"{self._gone()} during {during}" if during else self._gone())
        self._will_restart = self.restarts < MAX_RESTARTS  # decided now: callers say so
        self._wake.set()

    async def close(self) -> None:
        """Shut the server down (idempotent, bounded by :data:`CLOSE_TIMEOUT`)."""
        self._closing = True
        if self.state != "failed":
            self.state = "closed"
        self._wake.set()
        task = self._task
        if task is None or task.done():
            return
        if self._client is None:  # connecting, or between two lives: nothing to wait for
            task.cancel()
        done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
        if not done:
            log.warning("mcp.close_timeout", server=self.name)

    # ------------------------------------------------------------------ connecting

    def _make_client(self) -> Client:
        # the MCP SDK (heavy): only once a server is configured
        from mcp import Client
        from mcp.types import Implementation

        return Client(
            _watched(self._transport(), self._lose, self._notified),
            cache=None,
            client_info=Implementation(name="acp-reference-agent", version=__version__),
            list_roots_callback=self._list_roots,
        )

    def _transport(self) -> Transport:
        cfg = self.config
        if self.kind == "stdio":
            if not isinstance(cfg.command, str) or not cfg.command:
                raise ValueError("a stdio MCP server needs a command")
            # the MCP SDK (heavy): only once a server is configured
            from mcp import StdioServerParameters

            env = base_env() if self.environ is None else self.environ(base_env())
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
        if self.kind == "acp" and self._acp is not None:
            if not isinstance(cfg.server_id, str) or not cfg.server_id:
                raise ValueError("an acp MCP server needs a serverId")
            return acp_transport(cfg.server_id, self._acp)
        raise ValueError(f"unsupported MCP server type {cfg.type!r}")

    async def _subscribe(self, client: Client, stack: contextlib.AsyncExitStack) -> Any:
        """Open a ``subscriptions/listen`` stream for list changes (2026-07-28 servers
        that offer it); ``None`` otherwise, or when the server refuses."""
        # the MCP SDK (heavy): only once a server is configured
        from mcp.shared.exceptions import MCPError
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        caps = client.server_capabilities
        wanted: set[Kind] = set()
        if caps.tools is not None and caps.tools.list_changed:
            wanted.add("tools")
        if caps.prompts is not None and caps.prompts.list_changed:
            wanted.add("prompts")
        if not wanted or client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None  # earlier protocols send list changes unasked
        listen = client.listen(
            tools_list_changed="tools" in wanted, prompts_list_changed="prompts" in wanted
        )
        try:
            subscription = await stack.enter_async_context(listen)
        except MCPError as exc:
            log.info("mcp.listen_refused", server=self.name, error=exc.message)
            return None
        return subscription

    async def _events(self, subscription: Any) -> None:
        """Keep the listen stream read (its events were seen on the wire); its loss is the
        connection's."""
        # the MCP SDK (heavy): only once a server is configured
        from mcp.client.subscriptions import SubscriptionLost

        try:
            async for _ in subscription:
                pass
        except SubscriptionLost:
            self._lose()
            return
        log.info("mcp.listen_ended", server=self.name)

    def _notified(self, method: str) -> None:
        """A notification came in (called in wire order, before later answers are read)."""
        kind = _CHANGES.get(method)
        if kind is not None and not self._closing:
            self._stale.add(kind)
            self._stale_event.set()
            self._current.clear()

    async def _lists_current(self) -> None:
        """Wait (bounded) until announced list changes are fetched and offered."""
        if not self._current.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._current.wait(), REFRESH_WAIT)

    async def _refresh(self, client: Client) -> None:
        """Fetch the lists that changed again, one change after the other."""
        # the MCP SDK (heavy): only once a server is configured
        from mcp.shared.exceptions import MCPError

        while True:
            await self._stale_event.wait()
            self._stale_event.clear()
            kinds, self._stale = self._stale, set()
            try:
                tools, prompts = await self._list(client, kinds)
            except MCPError as exc:
                log.warning("mcp.relist_failed", server=self.name, error=exc.message)
            except Exception as exc:
                log.warning("mcp.relist_failed", server=self.name, error=describe(exc))
            else:
                if self.state != "ready" or self._client is not client:
                    return
                if "tools" in kinds:
                    self.tools = tools
                if "prompts" in kinds:
                    self.prompts = prompts
                log.info("mcp.lists_changed", server=self.name, changed=sorted(kinds))
                await self._on_updated(self)
            if not self._stale:
                self._current.set()

    async def _list(self, client: Client, kinds: set[Kind]) -> tuple[list[Tool], list[Prompt]]:
        caps = client.server_capabilities
        tools: list[Tool] = []
        prompts: list[Prompt] = []
        cursor: str | None = None
        for _ in range(100) if caps.tools is not None and "tools" in kinds else ():
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            if (cursor := page.next_cursor) is None:
                break
        cursor = None
        for _ in range(100) if caps.prompts is not None and "prompts" in kinds else ():
            ppage = await client.list_prompts(cursor=cursor)
            prompts.extend(ppage.prompts)
            if (cursor := ppage.next_cursor) is None:
                break
        return tools, prompts

    async def _list_roots(self, context: ClientRequestContext) -> ListRootsResult | ErrorData:
        # the MCP SDK (heavy): only once a server is configured
        from mcp.types import ListRootsResult, Root

        uri = Path(self.cwd).resolve().as_uri()
        return ListRootsResult(roots=[Root(uri=uri, name=os.path.basename(self.cwd) or uri)])  # type: ignore[arg-type]

    # ------------------------------------------------------------------ calls

    def _ready_client(self) -> Client:
        client = self._client
        if client is None or self.state != "ready":
            if self.state == "restarting":
                raise ToolError(f"MCP server {self.name!r} stopped and is being {self.restarted}")
            why = f": {self.error.splitlines()[0]}" if self.error else ""
            raise ToolError(f"MCP server {self.name!r} is not available{why}")
        return client

    def _lost_call(self, during: str) -> ToolError:
        """The connection closed under a call: the server is lost (it may come back)."""
        if self._closing and self.state == "closed":
            return ToolError(f"MCP server {self.name!r} was shut down")
        self._lose()
        what = "exited" if self.kind == "stdio" else "closed the connection"
        then = (f"it is being {self.restarted}" if self._will_restart
                else "its tools are no longer available")  # fmt: skip
        return ToolError(f"MCP server {self.name!r} {what} during {during}; {then}")

    async def call_tool(self, tool: str, args: Mapping[str, Any]) -> CallToolResult:
        """Call ``tool``; failures other than cancellation become :class:`ToolError`."""
        client = self._ready_client()
        async with self._translated(f"a call to {tool!r}"):
            result = await client.call_tool(tool, dict(args))
        await self._lists_current()
        return result

    async def get_prompt(self, prompt: str, args: dict[str, str]) -> GetPromptResult:
        client = self._ready_client()
        async with self._translated(f"a request for prompt {prompt!r}"):
            return await client.get_prompt(prompt, args or None)

    @contextlib.asynccontextmanager
    async def _translated(self, during: str) -> AsyncIterator[None]:
        """The one place SDK errors become :class:`ToolError` (a closed connection also
        marks the server lost). Cancellation passes through untouched."""
        # the MCP SDK (heavy): only once a server is configured
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED

        token = object()
        self._calls[token] = during
        try:
            yield
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise self._lost_call(during) from None
            raise ToolError(f"MCP server {self.name!r}: {exc.message}") from None
        except Exception as exc:
            raise ToolError(f"MCP server {self.name!r}: {describe(exc)}") from None
        finally:
            self._calls.pop(token, None)
