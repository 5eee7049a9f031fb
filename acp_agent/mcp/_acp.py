"""MCP over ACP (``"type": "acp"`` servers, unstable): the editor provides the MCP server
and carries its messages on the ACP connection itself, as the pinned schema has it.

The agent is the MCP client. Each inner MCP request is one ``mcp/message`` request to the
editor, ``{serverId, requestId, method, params}``, answered with the inner outcome,
``{result}`` or ``{error}``; an ACP error answer (a binding or runtime failure) becomes an
inner error with the same code. The editor's ``mcp/message`` notifications belong to an
active inner request (progress, a ``subscriptions/listen`` stream's acknowledgement and
change events) and are routed by their ``requestId``, which this side makes unique on the
connection (:func:`deliver`).

That is the 2026-07-28 MCP protocol's shape (every exchange hangs off a request; no
client-to-server notifications; list changes through ``subscriptions/listen``), so the
SDK's own era negotiation (``server/discover``) finds it. What the schema has no room for
is left out: the agent sends no inner notifications (a ``notifications/cancelled`` becomes
``$/cancel_request`` on the outer request instead), and the server cannot send requests
to the agent (no sampling, elicitation or roots over ACP).

The SDK is imported inside the functions: importing this module stays free of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from msgspec import UNSET, UnsetType

from .. import log
from ..errors import RemoteError
from ..protocol import types as t
from ..rpc.connection import ConnectionClosed
from ._transports import describe

if TYPE_CHECKING:
    from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

AcpRequest: TypeAlias = Callable[[t.MessageMcpRequest], Awaitable[t.MessageMcpResponseAny]]
"""Sends one ``mcp/message`` request to the editor and returns its answer."""

#: The key under which a ``subscriptions/listen`` stream's frames name their stream.
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

_ids = itertools.count(1)
_routes: dict[str, _Channel] = {}
"""Active outer request ids (one ACP connection per process) -> their channel."""


def deliver(note: t.MessageMcpNotification) -> None:
    """An ``mcp/message`` notification from the editor: to the inner request it is about.
    Notifications for no active request (or naming another server) are dropped."""
    channel = _routes.get(note.request_id)
    if channel is None or channel.server_id != note.server_id:
        log.info("mcp.acp_unrouted", server_id=note.server_id, request_id=note.request_id,
                 method=note.method)  # fmt: skip
        return
    channel.notification(note)


@dataclass(slots=True)
class _Active:
    inner_id: str | int
    method: str
    task: asyncio.Task[None]


class _Channel:
    """One connection to one ACP-provided server: the SDK's messages out, answers and
    notifications back in."""

    def __init__(self, server_id: str, request: AcpRequest, to_sdk: Any) -> None:
        self.server_id = server_id
        self._request = request
        self._to_sdk = to_sdk
        self._active: dict[str, _Active] = {}

    async def pump(self, from_sdk: Any) -> None:
        """Forward what the SDK writes until it closes its side."""
        # the MCP SDK (heavy): only once a server is configured
        from mcp_types import JSONRPCNotification, JSONRPCRequest

        async for item in from_sdk:
            message = item.message
            if isinstance(message, JSONRPCRequest):
                outer = str(next(_ids))
                task = asyncio.get_running_loop().create_task(self._forward(outer, message))
                self._active[outer] = _Active(message.id, message.method, task)
                _routes[outer] = self
            elif isinstance(message, JSONRPCNotification) and message.method == (
                "notifications/cancelled"
            ):
                self._cancel((message.params or {}).get("requestId"))
            else:  # no inner notifications on the wire; no server requests to answer
                log.debug("mcp.acp_dropped", server_id=self.server_id,
                          message=getattr(message, "method", type(message).__name__))  # fmt: skip

    def _cancel(self, inner_id: Any) -> None:
        for active in self._active.values():
            if active.inner_id == inner_id:
                active.task.cancel()  # the outer request gets its $/cancel_request

    async def _forward(self, outer: str, message: JSONRPCRequest) -> None:
        # the MCP SDK (heavy): only once a server is configured
        from mcp.shared.message import SessionMessage
        from mcp_types import INTERNAL_ERROR

        params: dict[str, Any] | UnsetType = message.params if message.params is not None else UNSET
        request = t.MessageMcpRequest(server_id=self.server_id, request_id=outer,
                                      method=message.method, params=params)  # fmt: skip
        try:
            try:
                answer = await self._request(request)
            except (asyncio.CancelledError, ConnectionClosed):
                return  # the SDK gave up on it, or the ACP connection is ending
            except RemoteError as exc:
                reply: JSONRPCResponse | JSONRPCError = _error(
                    message.id, exc.code, exc.message, exc.data
                )
            except Exception as exc:
                reply = _error(message.id, INTERNAL_ERROR, describe(exc))
            else:
                reply = _reply(message.id, answer)
            with contextlib.suppress(Exception):  # the connection closed meanwhile
                self._to_sdk.send_nowait(SessionMessage(reply))
        finally:
            self._active.pop(outer, None)
            _routes.pop(outer, None)

    def notification(self, note: t.MessageMcpNotification) -> None:
        # the MCP SDK (heavy): only once a server is configured
        from mcp.shared.message import SessionMessage
        from mcp_types import JSONRPCNotification

        active = self._active.get(note.request_id)
        if active is None:
            return
        params = dict(note.params) if isinstance(note.params, dict) else None
        if active.method == "subscriptions/listen":  # name the stream as the SDK knows it
            params = params or {}
            meta = params.get("_meta")
            params["_meta"] = {**(meta if isinstance(meta, dict) else {}),
                               SUBSCRIPTION_ID: active.inner_id}  # fmt: skip
        with contextlib.suppress(Exception):
            self._to_sdk.send_nowait(SessionMessage(
                JSONRPCNotification(jsonrpc="2.0", method=note.method, params=params)))  # fmt: skip

    def close(self) -> None:
        for outer, active in list(self._active.items()):
            active.task.cancel()
            _routes.pop(outer, None)
        self._to_sdk.close()


def _reply(inner_id: str | int, answer: t.MessageMcpResponseAny) -> JSONRPCResponse | JSONRPCError:
    # the MCP SDK (heavy): only once a server is configured
    from mcp_types import INTERNAL_ERROR, JSONRPCResponse

    if not isinstance(answer.result, UnsetType):
        result = answer.result if isinstance(answer.result, dict) else {}
        return JSONRPCResponse(jsonrpc="2.0", id=inner_id, result=result)
    if not isinstance(answer.error, UnsetType):
        data = None if isinstance(answer.error.data, UnsetType) else answer.error.data
        return _error(inner_id, answer.error.code, answer.error.message, data)
    return _error(inner_id, INTERNAL_ERROR, "the editor's answer carried no result and no error")


def _error(inner_id: str | int, code: int, message: str, data: Any = None) -> JSONRPCError:
    # the MCP SDK (heavy): only once a server is configured
    from mcp_types import ErrorData, JSONRPCError

    return JSONRPCError(jsonrpc="2.0", id=inner_id,
                        error=ErrorData(code=code, message=message, data=data))  # fmt: skip


@contextlib.asynccontextmanager
async def acp_transport(server_id: str, request: AcpRequest) -> AsyncIterator[Any]:
    """An SDK transport to the editor-provided server ``server_id``."""
    # the MCP SDK (heavy): only once a server is configured
    import anyio

    to_sdk, sdk_reads = anyio.create_memory_object_stream[Any](math.inf)
    sdk_writes, from_sdk = anyio.create_memory_object_stream[Any](math.inf)
    channel = _Channel(server_id, request, to_sdk)
    pump = asyncio.get_running_loop().create_task(channel.pump(from_sdk))
    try:
        yield sdk_reads, sdk_writes
    finally:
        pump.cancel()  # in memory only: nothing to wait for
        channel.close()
        from_sdk.close()
