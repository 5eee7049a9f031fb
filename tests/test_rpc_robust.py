"""The JSON-RPC connection survives its input and its own handlers' bugs (issue 12).

A bare :class:`Connection` with a few extension routes, in-process over memory pipes:
the nesting limit at its exact boundary, deep answers to our own requests, and
exceptions raised while a line is being dispatched (which used to end ``serve()``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from acp_agent.errors import RemoteError
from acp_agent.rpc.connection import Route
from acp_agent.rpc.outline import MAX_DEPTH

from .inproc import InProcessAgent
from .schema_check import SchemaChecker

Message = dict[str, Any]


class Boom(msgspec.Struct):
    """Params whose decoding raises something that is not a validation error (a bug)."""

    x: int = 0

    def __post_init__(self) -> None:
        raise RuntimeError("a bug in the params type")


class Echo:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.cancel_calls = 0

    async def echo(self, params: object) -> Any:
        return {"params": params}

    async def boom(self, params: Boom) -> Any:
        return {}

    async def unencodable(self, params: object) -> Any:
        return {"value": object()}

    async def wait(self, params: object) -> Any:
        await self.release.wait()
        return {"waited": True}

    def bad_on_cancel(self, params: object, task: asyncio.Task[None]) -> None:
        self.cancel_calls += 1
        raise RuntimeError("a bug in on_cancel")

    def routes(self) -> dict[str, Route[Any]]:
        return {
            "_test/echo": Route(object, self.echo),
            "_test/boom": Route(Boom, self.boom),
            "_test/unencodable": Route(object, self.unencodable),
            "_test/wait": Route(object, self.wait, on_cancel=self.bad_on_cancel),
        }


@pytest.fixture
async def echo() -> Echo:
    return Echo()


@pytest.fixture
async def conn(checker: SchemaChecker, echo: Echo) -> AsyncIterator[InProcessAgent]:
    async with InProcessAgent(checker, routes=echo.routes()) as agent:
        yield agent
        assert not agent.serving.done(), "serve() ended before end of input"


async def still_serves(agent: InProcessAgent) -> None:
    assert (await agent.request("_test/echo", [1]))["params"] == [1]
    assert not agent.serving.done()


def nested(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


class TestNestingLimit:
    async def test_exactly_the_limit_is_accepted(self, conn: InProcessAgent) -> None:
        """The envelope is level 1, so params may nest ``MAX_DEPTH - 1`` levels."""
        line = (b'{"jsonrpc":"2.0","id":"edge","method":"_test/echo","params":'
                + nested(MAX_DEPTH - 1) + b"}\n")
        conn.checker.observe_inbound({"id": "edge", "method": "_test/echo"})
        before = len(conn.messages)
        await conn.send_raw(line)
        await conn.wait_for(lambda: len(conn.messages) > before)
        assert "result" in conn.messages[-1] and conn.messages[-1]["id"] == "edge"

    async def test_one_more_level_is_refused(self, conn: InProcessAgent) -> None:
        line = (b'{"jsonrpc":"2.0","id":"over","method":"_test/echo","params":'
                + nested(MAX_DEPTH) + b"}\n")
        before = len(conn.messages)
        await conn.send_raw(line)
        await conn.wait_for(lambda: len(conn.messages) > before)
        response = conn.messages[-1]
        assert response["id"] == "over" and response["error"]["code"] == -32600
        assert response["error"]["message"] == (
            f"Invalid request: nested more than {MAX_DEPTH} levels deep - at `$.params`")
        await still_serves(conn)

    async def test_a_deep_answer_fails_our_request(self, conn: InProcessAgent) -> None:
        """The client answers the connection's own request with a result too deep to
        read: the request raises (its caller moves on), nothing is sent back."""
        def no_answer(params: Any) -> Any:
            raise asyncio.CancelledError  # the test answers by hand
        conn.handlers["_test/ask"] = no_answer
        assert conn.connection is not None
        asking = asyncio.create_task(conn.connection.request("_test/ask", {}, object))
        await conn.wait_for(lambda: bool(conn.client_requests))
        request_id = conn.client_requests[0]["id"]
        before = len(conn.messages)
        await conn.send_raw(b'{"jsonrpc":"2.0","id":' + str(request_id).encode()
                            + b',"result":' + nested(100_000) + b"}\n")
        with pytest.raises(RemoteError) as caught:
            await asking
        assert caught.value.code == -32600 and "nested more than" in caught.value.message
        await still_serves(conn)
        assert [m for m in conn.messages[before:] if "error" in m] == []


class TestDispatchFailures:
    """Any exception while dispatching a line: logged, a request answered, serve() goes on."""

    async def test_params_that_raise_while_decoding(self, conn: InProcessAgent) -> None:
        response = await conn.request_raw("_test/boom", {"x": 1}, id="b")
        assert response["id"] == "b" and response["error"]["code"] == -32603
        await still_serves(conn)

    async def test_on_cancel_that_raises(self, conn: InProcessAgent, echo: Echo) -> None:
        await conn.send({"jsonrpc": "2.0", "id": "w", "method": "_test/wait", "params": {}})
        await conn.notify("$/cancel_request", {"requestId": "w"})
        await still_serves(conn)
        assert echo.cancel_calls == 1
        echo.release.set()  # the request itself is still answered
        await conn.wait_for(lambda: any(m.get("id") == "w" for m in conn.messages))
        assert next(m for m in conn.messages if m.get("id") == "w")["result"] == {"waited": True}

    async def test_result_that_cannot_be_encoded(self, conn: InProcessAgent) -> None:
        """Answered with an internal error (it used to be never answered). The echo sent
        after it runs after it, so its answer comes after the failed one's."""
        bad = conn.start_request("_test/unencodable", {}, id="u")
        await still_serves(conn)
        assert any(m.get("id") == "u" for m in conn.messages)
        response = await bad
        assert response["id"] == "u" and response["error"]["code"] == -32603
