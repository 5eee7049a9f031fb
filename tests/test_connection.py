"""The JSON-RPC connection in memory: cancelled and failing requests, notifications that
go wrong, our own requests and their answers, and closing. Every step waits for a line
the connection wrote or for a handler to be reached, never for time to pass."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest

from acp_agent.errors import InvalidParams, RemoteError
from acp_agent.rpc.connection import Connection, ConnectionClosed, Route
from acp_agent.rpc.framing import LineReader, MemoryPipe

from .limits import WAIT


class Params(msgspec.Struct):
    value: int = 0


@dataclass
class Peer:
    """The other end: writes lines to the connection, reads what it writes back."""

    conn: Connection
    inbox: LineReader  # what the connection reads
    outbox: LineReader  # what the connection wrote
    seen: list[str] = field(default_factory=list)  # handlers reached, in order
    reached: asyncio.Event = field(default_factory=asyncio.Event)

    def send(self, message: dict[str, Any]) -> None:
        self.inbox.feed(json.dumps(message).encode() + b"\n")

    async def next(self) -> dict[str, Any]:
        line = await asyncio.wait_for(self.outbox.readline(), WAIT)
        assert isinstance(line, bytes), line
        message: dict[str, Any] = json.loads(line)
        return message

    async def answer_to(self, request_id: object) -> dict[str, Any]:
        """The next line, which must answer ``request_id``."""
        message = await self.next()
        assert message.get("id") == request_id and "method" not in message, message
        return message

    async def wait_reached(self, name: str) -> None:
        while name not in self.seen:
            self.reached.clear()
            await asyncio.wait_for(self.reached.wait(), WAIT)

    def note(self, name: str) -> None:
        self.seen.append(name)
        self.reached.set()


Handler = Callable[[Params], Awaitable[Any]]


@pytest.fixture
async def peer() -> AsyncIterator[Peer]:
    inbox, outbox = LineReader(), LineReader()
    conn = Connection(inbox, MemoryPipe(outbox))
    p = Peer(conn, inbox, outbox)
    serving = asyncio.create_task(conn.serve())
    yield p
    inbox.feed_eof()
    await serving
    await conn.close(grace=0)


def route(
    peer: Peer,
    name: str,
    handler: Handler,
    on_cancel: Callable[[Params, asyncio.Task[None]], None] | None = None,
    notification: bool = False,
) -> None:
    peer.conn.routes[name] = Route(
        Params, handler, notification=notification, on_cancel=on_cancel)


def blocked(peer: Peer, name: str, release: asyncio.Event) -> Handler:
    """A handler that notes it was reached, then waits for ``release``."""

    async def handler(p: Params) -> dict[str, Any]:
        peer.note(name)
        try:
            await release.wait()
        except asyncio.CancelledError:
            peer.note(f"{name} cancelled")
            raise
        return {"value": p.value}

    return handler


# ---------------------------------------------------------------------- requests


async def test_a_request_cancelled_by_the_client_answers_32800(peer: Peer) -> None:
    """$/cancel_request on a request without its own cancel handling (any but a prompt):
    the handler is cancelled and the request answered -32800; the connection goes on."""
    route(peer, "slow", blocked(peer, "slow", asyncio.Event()))
    route(peer, "echo", lambda p: asyncio.sleep(0, {"value": p.value}))
    peer.send({"jsonrpc": "2.0", "id": "r1", "method": "slow", "params": {}})
    await peer.wait_reached("slow")
    peer.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "r1"}})
    error = (await peer.answer_to("r1"))["error"]
    assert error["code"] == -32800
    assert peer.seen == ["slow", "slow cancelled"]
    peer.send({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"value": 5}})
    assert (await peer.answer_to(2))["result"] == {"value": 5}


async def test_a_request_may_handle_its_own_cancel(peer: Peer) -> None:
    """With ``on_cancel`` the handler is told, not cancelled, and answers itself."""
    release = asyncio.Event()

    def on_cancel(p: Params, task: asyncio.Task[None]) -> None:
        peer.note("on_cancel")
        release.set()

    route(peer, "prompt", blocked(peer, "prompt", release), on_cancel=on_cancel)
    peer.send({"jsonrpc": "2.0", "id": 7, "method": "prompt", "params": {"value": 1}})
    await peer.wait_reached("prompt")
    peer.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 7}})
    assert (await peer.answer_to(7))["result"] == {"value": 1}
    assert peer.seen == ["prompt", "on_cancel"]


async def test_cancels_that_name_nothing_running_are_ignored(peer: Peer) -> None:
    """Bad params, an unknown id, a request already answered: nothing is sent."""
    route(peer, "echo", lambda p: asyncio.sleep(0, {"value": p.value}))
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"value": 1}})
    await peer.answer_to(1)
    for params in ({"requestId": 1}, {"requestId": "never"}, {"requestId": [1]}, None):
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": "$/cancel_request"}
        if params is not None:
            message["params"] = params
        peer.send(message)
    peer.send({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"value": 2}})
    assert (await peer.next())["id"] == 2  # the first line written since: nothing else


async def test_a_duplicate_id_in_flight_is_an_invalid_request(peer: Peer) -> None:
    release = asyncio.Event()
    route(peer, "slow", blocked(peer, "slow", release))
    peer.send({"jsonrpc": "2.0", "id": 3, "method": "slow", "params": {"value": 1}})
    await peer.wait_reached("slow")
    peer.send({"jsonrpc": "2.0", "id": 3, "method": "slow", "params": {"value": 2}})
    error = (await peer.answer_to(3))["error"]
    assert error["code"] == -32600 and "duplicate" in error["message"]
    release.set()
    assert (await peer.answer_to(3))["result"] == {"value": 1}


async def test_a_failing_handler_is_an_internal_error_without_details(peer: Peer) -> None:
    async def broken(p: Params) -> None:
        raise RuntimeError("secret internals")

    async def refuses(p: Params) -> None:
        raise InvalidParams("Invalid params: no")

    route(peer, "broken", broken)
    route(peer, "refuses", refuses)
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "broken", "params": {}})
    error = (await peer.answer_to(1))["error"]
    assert error == {"code": -32603, "message": "Internal error"}
    peer.send({"jsonrpc": "2.0", "id": 2, "method": "refuses", "params": {}})
    assert (await peer.answer_to(2))["error"] == {"code": -32602, "message": "Invalid params: no"}


async def test_a_notification_method_called_as_a_request_is_not_found(peer: Peer) -> None:
    route(peer, "note", lambda p: asyncio.sleep(0), notification=True)
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "note", "params": {}})
    assert (await peer.answer_to(1))["error"]["code"] == -32601


# ---------------------------------------------------------------------- notifications


async def test_notifications_that_fail_are_never_answered(peer: Peer) -> None:
    """Bad params or a failing handler: logged, not answered; later messages are served."""

    async def broken(p: Params) -> None:
        peer.note("broken")
        raise RuntimeError("boom")

    route(peer, "note", broken, notification=True)
    route(peer, "echo", lambda p: asyncio.sleep(0, {"value": p.value}))
    peer.send({"jsonrpc": "2.0", "method": "note", "params": {"value": "not a number"}})
    peer.send({"jsonrpc": "2.0", "method": "note", "params": {}})
    peer.send({"jsonrpc": "2.0", "method": "echo", "params": {}})  # a request route
    peer.send({"jsonrpc": "2.0", "id": 9, "method": "echo", "params": {"value": 9}})
    assert (await peer.next()) == {"jsonrpc": "2.0", "id": 9, "result": {"value": 9}}
    assert peer.seen == ["broken"]  # the bad params never reached it


# ---------------------------------------------------------------------- our requests


class Answer(msgspec.Struct):
    ok: bool


async def test_our_requests_and_every_kind_of_answer(peer: Peer) -> None:
    conn = peer.conn
    good = asyncio.create_task(conn.request("client/ask", {"q": 1}, Answer))
    request = await peer.next()
    assert request == {"jsonrpc": "2.0", "id": request["id"], "method": "client/ask",
                       "params": {"q": 1}}
    peer.send({"jsonrpc": "2.0", "id": request["id"], "result": {"ok": True}})
    assert await good == Answer(ok=True)

    answers: list[dict[str, Any]] = [
        {"result": {"ok": "yes"}},  # does not match the result type
        {"error": {"code": -32002, "message": "Resource not found", "data": {"uri": "x"}}},
        {"error": {"message": "no code"}},  # malformed
    ]
    failures: list[RemoteError] = []
    for answer in answers:
        task = asyncio.create_task(conn.request("client/ask", {}, Answer))
        request = await peer.next()
        peer.send({"jsonrpc": "2.0", "id": request["id"], **answer})
        with pytest.raises(RemoteError) as caught:
            await task
        failures.append(caught.value)
    assert [(f.code, f.data) for f in failures] == [
        (-32602, None), (-32002, {"uri": "x"}), (-32603, None)]
    assert "Invalid result for client/ask" in failures[0].message
    assert failures[2].message == "Malformed error response"


async def test_giving_up_on_our_request_tells_the_client(peer: Peer) -> None:
    task = asyncio.create_task(peer.conn.request("client/ask", {}, Answer))
    request = await peer.next()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await peer.next() == {"jsonrpc": "2.0", "method": "$/cancel_request",
                                 "params": {"requestId": request["id"]}}
    # a late answer, or one to an id never sent, is ignored
    peer.send({"jsonrpc": "2.0", "id": request["id"], "result": {"ok": True}})
    peer.send({"jsonrpc": "2.0", "id": 12345, "error": {"code": -1, "message": "?"}})
    route(peer, "echo", lambda p: asyncio.sleep(0, {"value": p.value}))
    peer.send({"jsonrpc": "2.0", "id": "after", "method": "echo", "params": {}})
    assert (await peer.next())["id"] == "after"


# ---------------------------------------------------------------------- closing


async def test_close_fails_our_requests_and_gives_handlers_their_grace(peer: Peer) -> None:
    """Outgoing requests fail at once; a handler still running may answer within the
    grace period; one that does not is cancelled; nothing new goes out after."""
    conn = peer.conn
    finishing = asyncio.Event()
    route(peer, "finishing", blocked(peer, "finishing", finishing))
    ours = asyncio.create_task(conn.request("client/ask", {}, Answer))
    await peer.next()
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "finishing", "params": {"value": 1}})
    await peer.wait_reached("finishing")
    closing = asyncio.create_task(conn.close(grace=WAIT))
    with pytest.raises(ConnectionClosed):
        await ours
    finishing.set()  # answers within its grace
    assert (await peer.answer_to(1))["result"] == {"value": 1}
    await closing
    with pytest.raises(ConnectionClosed):
        await conn.request("client/ask", {}, Answer)
    await conn.notify("client/note", {})  # dropped
    await conn.close()  # idempotent
    peer.outbox.feed(b'"the end"\n')
    assert await peer.outbox.readline() == b'"the end"'  # nothing was written before it


async def test_close_cancels_handlers_that_outlive_the_grace(peer: Peer) -> None:
    conn = peer.conn
    route(peer, "stuck", blocked(peer, "stuck", asyncio.Event()))
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "stuck", "params": {}})
    await peer.wait_reached("stuck")
    await conn.close(grace=0)
    assert peer.seen == ["stuck", "stuck cancelled"]
