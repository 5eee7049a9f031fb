"""No input crashes the agent (issue 12), over real stdio.

Messages nested arbitrarily deep, strings that cannot be decoded, NUL bytes in paths,
requests before ``initialize``: each gets a precise JSON-RPC error (with the request's
``id`` whenever it can be read), notifications get nothing, and the same process goes on
answering and running turns, including a turn that was in flight meanwhile.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from .harness import AgentProcess, Scripted, allow_first_option
from .limits import WAIT

TOO_DEEP = -32600
DEPTHS = [200, 1_000, 10_000, 100_000, 1_000_000]
"""Beyond the agent's limit (128), around Python's recursion limit, and far beyond."""

Message = dict[str, Any]


def deep(levels: int, kind: str = "array") -> bytes:
    """A JSON value nested ``levels`` deep (built as bytes: ``json`` itself would recurse)."""
    if kind == "array":
        return b"[" * levels + b"]" * levels
    return b'{"k":' * levels + b"0" + b"}" * levels


def with_raw(message: Message, **raw: bytes) -> bytes:
    """``message`` as a line, each ``"@name"`` string value replaced by ``raw[name]``."""
    line = json.dumps(message).encode()
    for name, value in raw.items():
        line = line.replace(json.dumps(f"@{name}").encode(), value)
    return line + b"\n"


def answers(agent: AgentProcess, before: int) -> list[Message]:
    """Responses (results and errors) the agent sent since message ``before``."""
    return [m for m in agent.messages[before:] if "method" not in m]


async def probe(agent: AgentProcess) -> None:
    """The connection still answers a valid request (and everything sent before it has
    been read: answers to earlier lines that come from reading them precede this one)."""
    result = await agent.request("initialize", {"protocolVersion": 1}, timeout=WAIT)
    assert result["protocolVersion"] == 1


async def answer_to(agent: AgentProcess, line: bytes, request_id: Any, before: int) -> Message:
    """Send ``line``; its one answer, which must carry ``request_id``."""
    await agent.send_raw(line)
    await agent.wait_for(lambda: bool(answers(agent, before)), timeout=WAIT)
    got = answers(agent, before)
    assert len(got) == 1 and "error" in got[0], got
    assert got[0]["id"] == request_id and type(got[0]["id"]) is type(request_id)
    return got[0]["error"]  # type: ignore[no-any-return]


class Busy:
    """An initialized agent whose session ``held`` has a turn waiting on a permission
    request; :meth:`finish` answers it and checks the turn ends normally."""

    def __init__(self, agent: AgentProcess, workspace: str) -> None:
        self.agent = agent
        self.workspace = workspace
        self.release = asyncio.Event()
        self.held = ""
        self.turn: asyncio.Task[Message] | None = None

    async def start(self) -> None:
        agent = self.agent

        async def permission(params: Message) -> Message:
            if params["sessionId"] != self.held:
                raise asyncio.CancelledError  # the test answers this one itself
            await self.release.wait()
            return allow_first_option(params)

        agent.handlers["session/request_permission"] = permission
        await agent.initialize()
        self.held = await agent.new_session(self.workspace)
        self.turn = agent.start_request("session/prompt", prompt(self.held, "go"))
        await agent.wait_for(lambda: self.permission_request(self.held) is not None)

    def permission_request(self, session_id: str) -> Message | None:
        return next((m for m in self.agent.client_requests
                     if m["method"] == "session/request_permission"
                     and m["params"]["sessionId"] == session_id), None)

    async def finish(self) -> None:
        """The held turn was not lost, and new turns still run."""
        assert self.turn is not None and not self.turn.done()
        self.release.set()
        response = await self.turn
        assert response["result"]["stopReason"] == "end_turn"
        assert (await self.agent.prompt(self.held, "again"))["stopReason"] == "end_turn"


async def asked(busy: Busy, session_id: str) -> Message:
    """The permission request the agent sent for ``session_id``'s turn (once it has)."""
    await busy.agent.wait_for(lambda: busy.permission_request(session_id) is not None)
    request = busy.permission_request(session_id)
    assert request is not None
    return request


def prompt(session_id: str, text: str) -> Message:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


TOOL = {"tool_call": {"name": "run_command", "arguments": {"command": "echo hi"}}}
TEXT = [{"text": "done"}]


@pytest.fixture
async def busy(scripted: Scripted, workspace: str) -> AsyncIterator[Busy]:
    agent = scripted([[TOOL], TEXT, TEXT])
    async with agent:
        b = Busy(agent, workspace)
        await b.start()
        yield b


# --------------------------------------------------------------------------- item 5


class TestDeepNesting:
    """Issue 12.5: a message nested ~1,000 levels deep killed the agent (RecursionError)."""

    @pytest.mark.parametrize("kind", ["array", "object"])
    async def test_deep_member_of_the_envelope(self, busy: Busy, kind: str) -> None:
        agent = busy.agent
        for n, levels in enumerate(DEPTHS):
            before = len(agent.messages)
            line = with_raw({"jsonrpc": "2.0", "id": f"deep-{n}", "method": "initialize",
                             "params": {"protocolVersion": 1}, "extra": "@deep"},
                            deep=deep(levels, kind))
            error = await answer_to(agent, line, f"deep-{n}", before)
            assert error["code"] == TOO_DEEP and "nested more than 128 levels" in error["message"]
            await probe(agent)
        await busy.finish()

    async def test_deep_id_is_answered_with_null(self, busy: Busy) -> None:
        agent = busy.agent
        for levels in DEPTHS:
            before = len(agent.messages)
            line = with_raw({"jsonrpc": "2.0", "id": "@deep", "method": "initialize",
                             "params": {"protocolVersion": 1}}, deep=deep(levels))
            error = await answer_to(agent, line, None, before)
            assert error["code"] == TOO_DEEP
            await probe(agent)
        await busy.finish()

    async def test_deep_params_of_known_methods(self, busy: Busy) -> None:
        """Deep inside ``_meta`` of initialize, and inside a prompt block on a second
        session (which keeps working)."""
        agent = busy.agent
        other = await agent.new_session(busy.workspace)
        for n, levels in enumerate(DEPTHS):
            for kind in ("array", "object"):
                before = len(agent.messages)
                line = with_raw({"jsonrpc": "2.0", "id": n, "method": "initialize",
                                 "params": {"protocolVersion": 1, "_meta": {"x": "@deep"}}},
                                deep=deep(levels, kind))
                error = await answer_to(agent, line, n, before)
                assert error["code"] == TOO_DEEP
                before = len(agent.messages)
                block = {"type": "text", "text": "hi", "_meta": {"x": "@deep"}}
                line = with_raw({"jsonrpc": "2.0", "id": f"p{n}", "method": "session/prompt",
                                 "params": {"sessionId": other, "prompt": [block]}},
                                deep=deep(levels, kind))
                error = await answer_to(agent, line, f"p{n}", before)
                assert error["code"] == TOO_DEEP
                assert "$.params" in error["message"]
            await probe(agent)
        await busy.finish()
        assert (await agent.prompt(other, "fine"))["stopReason"] == "end_turn"

    async def test_deep_notification_is_ignored(self, busy: Busy) -> None:
        """A deep ``session/cancel`` naming the busy session: never answered, and not
        acted on (the held turn is not cancelled)."""
        agent = busy.agent
        for levels in DEPTHS:
            before = len(agent.messages)
            await agent.send_raw(with_raw(
                {"jsonrpc": "2.0", "method": "session/cancel",
                 "params": {"sessionId": busy.held, "_meta": {"x": "@deep"}}},
                deep=deep(levels)))
            await probe(agent)
            assert len(answers(agent, before)) == 1  # the probe's
        await busy.finish()

    async def test_deep_response_to_a_permission_request(
        self, scripted: Scripted, workspace: str
    ) -> None:
        """The client answers the agent's own request with a deep result: that request
        fails, which counts as a rejection (the call is not run, the turn goes on to its
        end), and the turn held on another session goes on."""
        agent = scripted([[TOOL], *[[TOOL], TEXT] * len(DEPTHS), TEXT, TEXT])
        async with agent:
            busy = Busy(agent, workspace)
            await busy.start()
            for levels in DEPTHS:
                sid = await agent.new_session(workspace)
                turn = agent.start_request("session/prompt", prompt(sid, "go"))
                request = await asked(busy, sid)
                await agent.send_raw(with_raw(
                    {"jsonrpc": "2.0", "id": request["id"],
                     "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"},
                                "_meta": {"x": "@deep"}}},
                    deep=deep(levels)))
                response = await turn
                assert response["result"]["stopReason"] == "end_turn", response
                (call,) = [u for u in agent.updates_of(sid, "tool_call_update")
                           if u.get("status") == "failed"]
                assert "Unreadable response" in json.dumps(call["content"])
                await probe(agent)
            await busy.finish()


# --------------------------------------------------------------------------- item 6


class TestUndecodable:
    """Issue 12.6: echo the id whenever it can be read; NUL bytes in paths are -32602."""

    @pytest.mark.parametrize(("params", "request_id"), [
        ('{"protocolVersion":1,"clientInfo":{"name":"\\ud800","version":"1"}}', 7),
        ('{"protocolVersion":1,"_meta":{"a":["\\udc00x"]}}', "s"),
        ('{"protocolVersion":1,"_meta":{"id":99,"a":"\\ud800\\ud800"}}', 0),
    ], ids=["high-in-field", "low-in-meta", "nested-id-ignored"])
    async def test_lone_surrogate_in_a_request_echoes_its_id(
        self, agent: AgentProcess, params: str, request_id: Any
    ) -> None:
        await agent.initialize()
        before = len(agent.messages)
        line = (f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"method":"initialize",'
                f'"params":{params}}}\n').encode()
        error = await answer_to(agent, line, request_id, before)
        assert error["code"] == -32700 and "surrogate" in error["message"]
        await probe(agent)

    async def test_id_after_the_undecodable_part_is_found(self, agent: AgentProcess) -> None:
        await agent.initialize()
        before = len(agent.messages)
        line = b'{"jsonrpc":"2.0","method":"initialize","params":{"x":"\\ud800"},"id":"late"}\n'
        error = await answer_to(agent, line, "late", before)
        assert error["code"] == -32700
        await probe(agent)

    @pytest.mark.parametrize("line", [
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"initialize","params":{"protocolVersion":1}}\n',
        b'{"jsonrpc":"2.0","id":{"id":3},"method":"initialize","params":{"x":"\\ud800"}}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"\\ud800"}} trailing\n',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"\\ud800"}\n',
    ], ids=["surrogate-id", "object-id", "trailing-garbage", "unclosed"])
    async def test_unreadable_id_is_null(self, agent: AgentProcess, line: bytes) -> None:
        await agent.initialize()
        before = len(agent.messages)
        error = await answer_to(agent, line, None, before)
        assert error["code"] in (-32700, -32600)
        await probe(agent)

    async def test_undecodable_notification_is_not_answered(self, agent: AgentProcess) -> None:
        """Not even when a nested value has an ``id``."""
        await agent.initialize()
        before = len(agent.messages)
        await agent.send_raw(b'{"jsonrpc":"2.0","method":"session/cancel",'
                             b'"params":{"sessionId":"s","id":5,"x":"\\ud800"}}\n')
        await agent.send_raw(b'{"jsonrpc":"2.0","method":"_vendor/x","params":["\xff"],'
                             b'"more":{"id":6}}\n')
        await probe(agent)
        assert len(answers(agent, before)) == 1

    @pytest.mark.parametrize(("method", "extra", "field"), [
        ("session/new", {"cwd": "@ws\0x", "mcpServers": []}, "$.cwd"),
        ("session/new", {"cwd": "@ws", "mcpServers": [],
                         "additionalDirectories": ["/tmp", "/a\0b"]}, "$.additionalDirectories[1]"),
        ("session/load", {"sessionId": "s", "cwd": "@ws\0", "mcpServers": []}, "$.cwd"),
        ("session/resume", {"sessionId": "s", "cwd": "\0/x"}, "$.cwd"),
        ("session/fork", {"sessionId": "s", "cwd": "@ws", "additionalDirectories": ["/\0"]},
         "$.additionalDirectories[0]"),
        ("session/list", {"cwd": "@ws\0"}, "$.cwd"),
    ], ids=["new-cwd", "new-additional", "load-cwd", "resume-cwd", "fork-additional", "list-cwd"])
    async def test_nul_byte_in_a_path_is_invalid_params(
        self, agent: AgentProcess, workspace: str, method: str, extra: Message, field: str
    ) -> None:
        await agent.initialize()
        params = json.loads(json.dumps(extra).replace("@ws", workspace))
        response = await agent.request_raw(method, params)
        assert response["error"]["code"] == -32602, response
        assert f"- at `{field}`" in response["error"]["message"]
        assert "NUL" in response["error"]["message"]
        await probe(agent)


# --------------------------------------------------------------------------- item 9


REQUESTS: dict[str, Callable[[str], Message]] = {
    "authenticate": lambda ws: {"methodId": "api-key"},
    "session/new": lambda ws: {"cwd": ws, "mcpServers": []},
    "session/load": lambda ws: {"sessionId": "s", "cwd": ws, "mcpServers": []},
    "session/resume": lambda ws: {"sessionId": "s", "cwd": ws},
    "session/fork": lambda ws: {"sessionId": "s", "cwd": ws},
    "session/list": lambda ws: {},
    "session/delete": lambda ws: {"sessionId": "s"},
    "session/close": lambda ws: {"sessionId": "s"},
    "session/set_title": lambda ws: {"sessionId": "s", "title": "A title"},
    "session/status": lambda ws: {"sessionId": "s"},
    "session/archive": lambda ws: {"sessionId": "s"},
    "session/unarchive": lambda ws: {"sessionId": "s"},
    "session/prompt": lambda ws: prompt("s", "hi"),
    "_session/steering": lambda ws: prompt("s", "hi"),
    "session/set_mode": lambda ws: {"sessionId": "s", "modeId": "ask"},
    "session/set_config_option": lambda ws: {"sessionId": "s", "configId": "mode", "value": "ask"},
    "logout": lambda ws: {},
    "auth/status": lambda ws: {},
    "providers/list": lambda ws: {},
    "providers/set": lambda ws: {"providerId": "openai", "apiType": "openai",
                                 "baseUrl": "http://127.0.0.1:9/v1"},
    "providers/disable": lambda ws: {"providerId": "openai"},
}


class TestBeforeInitialize:
    """Issue 12.9: requests other than ``initialize`` before it get an error."""

    async def test_every_request_is_refused_until_initialize(
        self, agent: AgentProcess, workspace: str
    ) -> None:
        for method, params in REQUESTS.items():
            response = await agent.request_raw(method, params(workspace))
            assert response["error"]["code"] == -32600, (method, response)
            assert "initialize" in response["error"]["message"]
        await agent.initialize()
        assert await agent.new_session(workspace)

    async def test_notifications_before_initialize_are_ignored(self, agent: AgentProcess) -> None:
        await agent.notify("session/cancel", {"sessionId": "s"})
        await agent.notify("_vendor/hello", {})
        response = await agent.request_raw("_vendor/probe", {})
        assert response["error"]["code"] == -32601
        assert [m for m in agent.messages if "method" not in m] == [response]

    async def test_routes_cover_every_request(self) -> None:
        """The list above is every routed request (so none slips past the check)."""
        from acp_agent.client import ClientProxy
        from acp_agent.config import Config
        from acp_agent.handlers.agent import Agent
        from acp_agent.rpc.connection import Connection
        from acp_agent.rpc.framing import LineReader, MemoryPipe

        connection = Connection(LineReader(), MemoryPipe(LineReader()))
        routes = Agent(Config(), ClientProxy(connection)).routes()
        requests = {m for m, r in routes.items() if not r.notification and m != "initialize"}
        assert requests == set(REQUESTS)
