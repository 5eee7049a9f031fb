"""Bad input gets a clear JSON-RPC error and the connection lives on (real stdio)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from .harness import AgentProcess
from .limits import limit
from .schema_check import SchemaChecker


async def _still_serves(agent: AgentProcess) -> None:
    """The same connection still answers a valid request."""
    result = await agent.request("initialize", {"protocolVersion": 1}, id="probe")
    assert result["protocolVersion"] == 1


async def _next_error(agent: AgentProcess, before: int) -> dict[str, Any]:
    await agent.wait_for(lambda: any("error" in m for m in agent.messages[before:]))
    return next(m for m in agent.messages[before:] if "error" in m)


@pytest.fixture
async def ready(agent: AgentProcess) -> AgentProcess:
    await agent.initialize()
    return agent


class TestMalformed:
    async def test_malformed_json_gets_parse_error_with_null_id(self, ready: AgentProcess) -> None:
        """A line that is not JSON answers -32700 with id null."""
        before = len(ready.messages)
        await ready.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
        err = await _next_error(ready, before)
        assert err["id"] is None and err["error"]["code"] == -32700
        await _still_serves(ready)

    async def test_invalid_utf8_is_a_parse_error(self, ready: AgentProcess) -> None:
        """Bytes that are not UTF-8 answer -32700, with the request's id (it can be read)."""
        before = len(ready.messages)
        await ready.send_raw(
            b'{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"x":"\xff\xfe"}}\n'
        )
        err = await _next_error(ready, before)
        assert err["error"]["code"] == -32700 and err["id"] == 5
        await _still_serves(ready)

    @pytest.mark.parametrize(
        ("line", "expected_id"),
        [
            (
                {
                    "jsonrpc": "1.0",
                    "id": 7,
                    "method": "initialize",
                    "params": {"protocolVersion": 1},
                },
                7,
            ),
            ({"id": 8, "method": "initialize", "params": {"protocolVersion": 1}}, 8),
            ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "initialize"}, None),
            ({"jsonrpc": "2.0", "id": [1], "method": "initialize"}, None),
            ({"jsonrpc": "2.0", "id": 1.5, "method": "initialize"}, None),
            ({"jsonrpc": "2.0", "id": True, "method": "initialize"}, None),
            ({"jsonrpc": "2.0", "id": 9, "method": 42}, 9),
            ({"jsonrpc": "2.0", "id": 10}, 10),
            ([{"jsonrpc": "2.0", "id": 11, "method": "initialize"}], None),
            ("just a string", None),
        ],
        ids=[
            "jsonrpc-1.0",
            "no-jsonrpc",
            "object-id",
            "array-id",
            "fractional-id",
            "bool-id",
            "numeric-method",
            "no-method",
            "batch",
            "string",
        ],
    )
    async def test_invalid_envelope_is_invalid_request(
        self, ready: AgentProcess, line: object, expected_id: object
    ) -> None:
        """Structurally invalid envelopes answer -32600 (with the id when it is usable)."""
        before = len(ready.messages)
        await ready.send_raw(json.dumps(line).encode() + b"\n")
        err = await _next_error(ready, before)
        assert err["error"]["code"] == -32600
        assert err["id"] == expected_id
        assert err["error"]["message"]
        await _still_serves(ready)


class TestParams:
    async def test_missing_params_is_invalid_params(self, ready: AgentProcess) -> None:
        """A known method without its params answers -32602."""
        response = await ready.request_raw("session/new")
        assert response["error"]["code"] == -32602
        await _still_serves(ready)

    async def test_wrong_type_names_the_field(self, ready: AgentProcess, workspace: str) -> None:
        """A wrongly typed field answers -32602 with the field path in the message."""
        response = await ready.request_raw("session/new", {"cwd": workspace, "mcpServers": "nope"})
        assert response["error"]["code"] == -32602
        assert "mcpServers" in response["error"]["message"]
        response = await ready.request_raw("session/prompt", {"sessionId": 5, "prompt": []})
        assert response["error"]["code"] == -32602 and "sessionId" in response["error"]["message"]
        await _still_serves(ready)

    async def test_relative_cwd_is_invalid_params(self, ready: AgentProcess) -> None:
        """session/new needs an absolute cwd."""
        response = await ready.request_raw("session/new", {"cwd": "relative/dir", "mcpServers": []})
        assert response["error"]["code"] == -32602 and "cwd" in response["error"]["message"]

    async def test_unknown_session_is_resource_not_found(self, ready: AgentProcess) -> None:
        """Requests naming an unknown session answer -32002 with data.sessionId."""
        for method, params in [
            ("session/prompt", {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}),
            ("session/set_mode", {"sessionId": "nope", "modeId": "ask"}),
            (
                "session/set_config_option",
                {"sessionId": "nope", "configId": "mode", "value": "ask"},
            ),
            ("session/close", {"sessionId": "nope"}),
        ]:
            response = await ready.request_raw(method, params)
            assert response["error"]["code"] == -32002, method
            assert response["error"]["data"] == {"sessionId": "nope"}
        await ready.notify("session/cancel", {"sessionId": "nope"})  # ignored, never answered
        await _still_serves(ready)


class TestMethods:
    async def test_unknown_method(self, ready: AgentProcess) -> None:
        """Unknown requests answer -32601 with the same id."""
        response = await ready.request_raw("session/teleport", {}, id="abc")
        assert response["id"] == "abc" and response["error"]["code"] == -32601

    async def test_extension_request_and_notification(self, ready: AgentProcess) -> None:
        """An unknown `_` request gets -32601; an unknown `_` notification gets nothing."""
        before = len(ready.messages)
        await ready.notify("_vendor/ping", {"x": 1})
        await ready.notify("unknown/notification", {})
        response = await ready.request_raw("_vendor/ping", {"x": 1})
        assert response["error"]["code"] == -32601
        # Only the answer to the request came back: notifications are never answered.
        assert [m for m in ready.messages[before:] if "error" in m or "result" in m] == [response]

    async def test_request_ids_echoed_exactly(self, ready: AgentProcess) -> None:
        """Ids of every JSON-RPC type come back unchanged (0, negative, strings, null)."""
        for request_id in [0, -3, 2**53, "0", "", "id with spaces", None]:
            response = await ready.request_raw("initialize", {"protocolVersion": 1}, id=request_id)
            assert response["id"] == request_id and type(response["id"]) is type(request_id)

    async def test_protocol_version_negotiation(self, ready: AgentProcess) -> None:
        """Any integer version is answered with 1; a non-integer is invalid params."""
        for version in [1, 2, 999, 0]:
            result = await ready.request("initialize", {"protocolVersion": version})
            assert result["protocolVersion"] == 1
        response = await ready.request_raw("initialize", {"protocolVersion": "1"})
        assert response["error"]["code"] == -32602


class TestResponsesFromClient:
    async def test_response_for_unknown_id_is_ignored(self, ready: AgentProcess) -> None:
        """A response for an id never sent, and an error with id null, are tolerated."""
        before = len(ready.messages)
        await ready.send({"jsonrpc": "2.0", "id": 424242, "result": {}})
        await ready.send(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
        )
        await _still_serves(ready)
        assert [m for m in ready.messages[before:] if "error" in m] == []


class TestSize:
    async def test_64_mib_prompt_works(self, ready: AgentProcess, workspace: str) -> None:
        """A 64 MiB message on one line (an embedded file) is processed normally."""
        sid = await ready.new_session(workspace)
        blob = base64.b64encode(b"\x89PNG" + b"\0" * (48 * 1024 * 1024)).decode()
        params = {
            "sessionId": sid,
            "prompt": [
                {"type": "text", "text": "hello"},
                {"type": "resource", "resource": {"uri": "file:///big.bin", "blob": blob,
                                                  "mimeType": "application/octet-stream"}},
            ],
        }
        assert len(json.dumps(params)) > 64 * 1024 * 1024
        result = await ready.request("session/prompt", params, timeout=limit(60))
        assert result["stopReason"] == "end_turn"
        await _still_serves(ready)

    async def test_oversized_message_is_rejected_and_connection_lives(
        self, checker: SchemaChecker, state_dir: str, tmp_path: Path
    ) -> None:
        """A line over the configured cap answers -32600 and is discarded as it streams."""
        config = tmp_path / "c.toml"
        config.write_text("[limits]\nmax-message-bytes = 65536\n")
        async with AgentProcess(
            checker, "--state-dir", state_dir, "--config", str(config)
        ) as agent:
            await agent.initialize()
            before = len(agent.messages)
            await agent.send_raw(b'{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"p":"'
                                 + b"x" * 200_000 + b'"}}\n')
            err = await _next_error(agent, before)
            assert err["error"]["code"] == -32600 and "too large" in err["error"]["message"]
            await _still_serves(agent)


class TestShutdown:
    async def test_eof_exits_promptly_during_a_turn(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        """stdin EOF while a turn hangs: the turn is cancelled and the process exits by
        itself, cleanly."""
        script = tmp_path / "s.json"
        script.write_text(json.dumps([[{"text": "start "}, {"hang": True}]]))
        async with AgentProcess(checker, "--state-dir", state_dir,
                                env={"ACP_AGENT_OFFLINE_SCRIPT": str(script)}) as agent:
            await agent.initialize()
            sid = await agent.new_session(workspace)
            agent.start_request("session/prompt", {"sessionId": sid,
                                                   "prompt": [{"type": "text", "text": "go"}]})
            await agent.wait_for(lambda: bool(agent.updates_of(sid, "agent_message_chunk")))
            # close() kills an agent that does not exit by itself (the code is then -9)
            assert await agent.close() == 0

    async def test_eof_while_streaming_leaves_only_complete_lines(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        """Closing stdin mid-stream: buffered output is flushed as whole lines, then exit."""
        script = tmp_path / "s.json"
        script.write_text(json.dumps([[{"text": "word " * 400_000}]]))
        async with AgentProcess(checker, "--state-dir", state_dir,
                                env={"ACP_AGENT_OFFLINE_SCRIPT": str(script)}) as agent:
            await agent.initialize()
            sid = await agent.new_session(workspace)
            agent.start_request("session/prompt", {"sessionId": sid,
                                                   "prompt": [{"type": "text", "text": "go"}]})
            await agent.wait_for(lambda: len(agent.updates_of(sid, "agent_message_chunk")) > 1000)
            assert await agent.close() == 0
        # the harness reports any line without its newline terminator to the checker
        assert not [f for f in checker.failures if "terminator" in f]
