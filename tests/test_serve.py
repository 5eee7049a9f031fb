"""``acp-agent serve`` in this event loop, under the real hypercorn: both profiles through
the same conversation (tests/remote.py's clients check every message against the schema),
sessions held by one connection at a time, reattached after a disconnect, the server's
file system, and the gate (token, origins, /healthz)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from acp_agent.config import Config
from acp_agent.protocol import UNSET
from acp_agent.protocol import types as t
from acp_agent.transports.hub import Hub, Limits, Settings

from .harness import ResponseError
from .remote import AUTH, TOKEN, Client, HttpClient, WsClient, serving
from .schema_check import SchemaChecker

NEVER = "NEVER-REACHED"
HANG = [{"text": "partial answer "}, {"hang": True}, {"text": NEVER}]


def write_script(tmp_path: Path, script: list[Any]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return str(path)


@pytest.fixture
def config(tmp_path: Path, state_dir: str) -> Config:
    script = [[{"text": "Hello over the network!"}], HANG, [{"text": "Back again."}]]
    return Config(state_dir=state_dir, offline_script=write_script(tmp_path, script))


Served = tuple[str, Hub]


@pytest.fixture
async def served(config: Config) -> AsyncIterator[Served]:
    async with serving(config, Settings(token=TOKEN)) as found:
        yield found


Connect = Callable[..., Any]


@pytest.fixture(params=["ws", "http"])
async def connect(request: pytest.FixtureRequest, checker: SchemaChecker) -> AsyncIterator[Connect]:
    """A connected client of the profile (its own schema checker, its failures the
    test's)."""
    made: list[Client] = []

    async def make(url: str, **kw: Any) -> Client:
        own = SchemaChecker()
        client: Client
        if request.param == "ws":
            client = await WsClient(url, own, **kw).connect()
        else:
            client = HttpClient(url, own, **kw)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()
        checker.failures.extend(client.checker.failures)


async def test_a_conversation(served: Served, connect: Connect, workspace: str) -> None:
    url, hub = served
    client = await connect(url)
    init = await client.initialize()
    assert init["agentCapabilities"]["loadSession"] is True
    assert client.connection_id in hub.peers
    sid = await client.new_session(workspace)
    result = await client.prompt(sid, "hello")
    assert result["stopReason"] == "end_turn"
    assert client.text(sid) == "Hello over the network!"
    await client.close()


# ---------------------------------------------------------------------- sessions


async def test_a_session_is_held_by_one_connection_and_reattached_after_it_goes(
    served: Served, connect: Connect, workspace: str
) -> None:
    url, hub = served
    a, b = await connect(url), await connect(url)
    await a.initialize()
    await b.initialize()
    sid = await a.new_session(workspace)
    assert hub.holds.holder(sid) == a.connection_id
    await a.prompt(sid, "hello")
    turn = a.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    await a.wait_for(lambda: "partial" in a.text(sid))
    load = {"sessionId": sid, "cwd": workspace, "mcpServers": []}
    with pytest.raises(ResponseError) as refused:
        await b.request("session/load", load)
    assert "open on another connection" in str(refused.value.message)
    with pytest.raises(ResponseError):  # nor prompt it, nor close it
        await b.prompt(sid, "mine now?")
    # status and fork only look
    assert (await b.request("session/status", {"sessionId": sid}))["status"] in ("saved", "open")
    fork = await b.request("session/fork", {"sessionId": sid, "cwd": workspace, "mcpServers": []})
    assert hub.holds.holder(fork["sessionId"]) == b.connection_id
    # A goes away mid-turn: the turn is cancelled, everything persisted, the hold released
    peer = hub.peers[a.connection_id]
    if isinstance(a, HttpClient):
        assert await a.delete() == 202
    else:
        await a.close()
    await peer.closed.wait()
    assert hub.holds.holder(sid) is None
    if isinstance(a, HttpClient):  # its stream carried the answer before it ended
        answer = await turn
        assert answer["result"]["stopReason"] == "cancelled"
    else:
        turn.cancel()
    await b.request("session/load", load)
    users = [u["update"]["content"]["text"] for u in b.updates
             if u["sessionId"] == sid and u["update"]["sessionUpdate"] == "user_message_chunk"]
    assert users == ["hello", "go"]
    assert b.text(sid) == "Hello over the network!partial answer "
    assert hub.holds.holder(sid) == b.connection_id
    assert (await b.prompt(sid, "again"))["stopReason"] == "end_turn"
    # closing releases it; deleting it too
    await b.request("session/close", {"sessionId": sid})
    assert hub.holds.holder(sid) is None
    await b.close()
    await a.close()


async def test_a_load_waits_for_a_departing_holder(
    served: Served, connect: Connect, workspace: str
) -> None:
    url, hub = served
    a, b = await connect(url), await connect(url)
    await a.initialize()
    await b.initialize()
    sid = await a.new_session(workspace)
    peer = hub.peers[a.connection_id]
    closing = hub.close(peer, "test: going away")  # not awaited: B asks meanwhile
    assert hub.holds.is_leaving(a.connection_id)
    await b.request("session/load", {"sessionId": sid, "cwd": workspace, "mcpServers": []})
    assert closing.done() and hub.holds.holder(sid) == b.connection_id
    await b.close()


async def test_cwd_is_a_directory_of_the_server(
    served: Served, connect: Connect, tmp_path: Path
) -> None:
    url, _ = served
    client = await connect(url)
    await client.initialize()
    missing = str(tmp_path / "on-the-client-only")
    with pytest.raises(ResponseError) as refused:
        await client.new_session(missing)
    assert refused.value.code == -32602
    assert "not a directory on the agent's machine" in str(refused.value.message)
    with pytest.raises(ResponseError) as extra:
        await client.request("session/new", {"cwd": str(tmp_path), "mcpServers": [],
                                             "additionalDirectories": [missing]})  # fmt: skip
    assert extra.value.code == -32602 and "additionalDirectories[0]" in str(extra.value.message)
    await client.close()


@pytest.mark.parametrize("client_fs", [False, True])
async def test_the_client_files_are_used_only_when_shared(
    config: Config, checker: SchemaChecker, client_fs: bool
) -> None:
    async with serving(config, Settings(token=TOKEN, client_fs=client_fs)) as (url, hub):
        client = await WsClient(url, checker).connect()
        init = await client.initialize(fs={"readTextFile": True, "writeTextFile": True},
                                       terminal=True, auth={"terminal": True})  # fmt: skip
        caps = hub.peers[str(client.connection_id)].agent.client.capabilities
        if client_fs:
            assert isinstance(caps.fs, t.FileSystemCapabilities) and caps.fs.read_text_file
        else:
            assert caps.fs is UNSET
        assert caps.terminal is (True if client_fs else UNSET)
        methods = [m["id"] for m in init["authMethods"]]
        assert ("login" in methods) is client_fs  # a terminal on the client's machine
        await client.close()


# ---------------------------------------------------------------------- the gate


async def test_the_token_is_required(served: Served) -> None:
    url, _ = served
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    async with httpx.AsyncClient() as http:
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"},
                        {"Authorization": f"Basic {TOKEN}"}):  # fmt: skip
            r = await http.post(url, json=body, headers=headers)
            assert (r.status_code, r.text, r.headers["www-authenticate"]) == (
                401, "Unauthorized\n", "Bearer")
        r = await http.get(url, headers={"accept": "text/event-stream"})
        assert r.status_code == 401
        health = await http.get(url.replace("/acp", "/healthz"))
        assert (health.status_code, health.text) == (200, "ok\n")
        elsewhere = await http.get(url.replace("/acp", "/"), headers=AUTH)
        assert elsewhere.status_code == 404 and "/acp" in elsewhere.text
    with pytest.raises(Exception, match="401"):
        await WsClient(url, headers={}).connect()


async def test_browsers_are_refused_unless_allowed(config: Config) -> None:
    allowed = "https://ide.example.com"
    settings = Settings(token=TOKEN, allow_origins=frozenset({allowed}))
    async with serving(config, settings) as (url, _), httpx.AsyncClient() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
        r = await http.post(url, json=body, headers={**AUTH, "origin": "https://evil.example"})
        assert r.status_code == 403 and "origin" in r.text
        with pytest.raises(Exception, match="403"):
            await WsClient(url, headers={**AUTH, "origin": "https://evil.example"}).connect()
        pre = await http.options(url, headers={"origin": allowed,
                                               "access-control-request-method": "POST"})
        assert pre.status_code == 204
        assert pre.headers["access-control-allow-origin"] == allowed
        assert "acp-session-id" in pre.headers["access-control-allow-headers"]
        r = await http.post(url, json=body, headers={**AUTH, "origin": allowed})
        assert r.status_code == 200
        assert r.headers["access-control-expose-headers"] == "acp-connection-id"


# ---------------------------------------------------------------------- bad input


async def test_bad_http_requests_get_clear_errors_and_the_server_lives_on(
    served: Served, workspace: str, checker: SchemaChecker
) -> None:
    url, hub = served
    a = HttpClient(url, SchemaChecker())
    await a.initialize()
    sid = await a.new_session(workspace)
    conn = {"acp-connection-id": str(a.connection_id)}
    json_ = {"content-type": "application/json"}
    ping = {"jsonrpc": "2.0", "id": 7, "method": "session/status", "params": {"sessionId": sid}}
    async with httpx.AsyncClient(headers=AUTH) as http:

        async def post(body: Any, headers: dict[str, str]) -> httpx.Response:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            return await http.post(url, content=data, headers=headers)

        r = await post(b'{"jsonrpc": "2.0", "id": 1, "method": ', {**json_, **conn})
        assert r.status_code == 400 and r.text.startswith("Bad Request: invalid JSON")
        r = await post(b'"just a string"', {**json_, **conn})
        assert r.status_code == 400 and "JSON object" in r.text
        r = await post([ping, ping], {**json_, **conn})
        assert r.status_code == 501
        assert r.json()["error"]["code"] == -32600 and r.json()["id"] is None
        checker.check(r.json())  # a JSON-RPC error the schema accepts
        r = await post(ping, {**json_, "acp-session-id": sid})
        assert r.status_code == 400 and "missing Acp-Connection-Id" in r.text
        r = await post(ping, {**json_, "acp-connection-id": "nobody", "acp-session-id": sid})
        assert r.status_code == 404 and "unknown Acp-Connection-Id" in r.text
        r = await post(ping, {**json_, **conn})
        assert r.status_code == 400 and "Acp-Session-Id" in r.text
        r = await post(ping, {**json_, **conn, "acp-session-id": "sess_other"})
        assert r.status_code == 400 and "not the sessionId" in r.text
        r = await post(ping, {"content-type": "text/plain", **conn, "acp-session-id": sid})
        assert r.status_code == 415
        big = b'{"jsonrpc":"2.0","method":"x","params":"' + b"x" * hub.limits.max_message_bytes
        r = await post(big + b'"}', {**json_, **conn})
        assert r.status_code == 413 and str(hub.limits.max_message_bytes) in r.text
        r = await post({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {}},
                       {**json_, **conn})  # fmt: skip
        assert r.status_code == 400 and "without Acp-Connection-Id" in r.text
        r = await http.get(url, headers=conn)
        assert r.status_code == 406
        r = await http.get(url, headers={"accept": "text/event-stream"})
        assert r.status_code == 400
        r = await http.get(url, headers={"accept": "text/event-stream", **conn})
        assert r.status_code == 409 and "already has a reader" in r.text
        r = await http.put(url, headers=conn)
        assert r.status_code == 405 and r.headers["allow"] == "GET, POST, DELETE"
        # another connection naming A's session: 409, as the SDK expects of a lost session
        b = HttpClient(url, SchemaChecker())
        await b.initialize()
        prompt = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                  "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}}
        r = await post(prompt, {**json_, "acp-connection-id": str(b.connection_id),
                                "acp-session-id": sid})  # fmt: skip
        assert r.status_code == 409 and "open on another connection" in r.text
        # a malformed message that reaches the agent is answered on the stream
        before = len(a.messages)
        r = await post({"jsonrpc": "2.0", "id": 9, "method": "session/list", "params": 3},
                       {**json_, **conn})  # fmt: skip
        assert r.status_code == 202
        await a.wait_for(lambda: any(m.get("id") == 9 for m in a.messages[before:]))
        assert [m["error"]["code"] for m in a.messages[before:] if m.get("id") == 9] == [-32602]
        # and the server lives on
        assert (await a.prompt(sid, "still there?"))["stopReason"] == "end_turn"
        assert await a.delete() == 202
        r = await post(ping, {**json_, **conn, "acp-session-id": sid})
        assert r.status_code == 410 and "closed by the client" in r.text
        assert await a.delete() == 410
        await b.close()
    await a.close()
    checker.failures.extend(a.checker.failures)


async def test_bad_websocket_frames_get_clear_errors_and_the_server_lives_on(
    config: Config, checker: SchemaChecker, workspace: str
) -> None:
    limits = Limits(max_message_bytes=64 * 1024)
    async with serving(config, Settings(token=TOKEN, limits=limits)) as (url, _):
        ws = await WsClient(url, checker).connect()
        await ws.send_text("{not json")
        await ws.send_text('[{"jsonrpc": "2.0", "id": 1, "method": "session/list"}]')
        await ws.socket.send(b'{"jsonrpc": "2.0", "id": 2, "method": "session/list"}')
        await ws.send_text('{"jsonrpc": "2.0", "id": 3, "method": "session/list"}')
        await ws.wait_for(lambda: len(ws.messages) == 3)
        codes = [(m["id"], m["error"]["code"]) for m in ws.messages]
        assert codes == [(None, -32700), (None, -32600), (3, -32600)]  # 3: not initialized
        await ws.initialize()
        sid = await ws.new_session(workspace)
        assert (await ws.prompt(sid, "hello"))["stopReason"] == "end_turn"
        await ws.send_text('{"jsonrpc":"2.0","method":"x","params":"' + "x" * 70_000 + '"}')
        await ws.closed.wait()
        assert ws.socket.close_code == 1009
        other = await WsClient(url, checker).connect()  # the server lives on
        await other.initialize()
        await other.close()
        await ws.close()


# ---------------------------------------------------------------------- limits


async def test_connections_beyond_the_limit_are_refused(config: Config) -> None:
    async with serving(config, Settings(token=TOKEN, limits=Limits(max_connections=1))) as (
        url, _
    ):
        ws = await WsClient(url).connect()
        with pytest.raises(Exception, match="503"):
            await WsClient(url).connect()
        http = HttpClient(url)
        with pytest.raises(ResponseError) as full:
            await http.initialize()
        assert full.value.code == 503 and "at most 1" in str(full.value.message)
        await ws.close()
        await http.close()


async def test_idle_http_connections_are_ended(config: Config, workspace: str) -> None:
    limits = Limits(idle_timeout=0.2)
    async with (
        serving(config, Settings(token=TOKEN, limits=limits)) as (url, hub),
        httpx.AsyncClient(headers=AUTH) as http,
    ):
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": 1}}  # fmt: skip
        r = await http.post(url, json=body)
        connection = r.headers["acp-connection-id"]
        peer = hub.peers.get(connection)  # a busy machine may let the reaper win the race
        if peer is not None:
            await peer.closed.wait()  # no stream opened, no request: the reaper ends it
        r = await http.get(url, headers={"accept": "text/event-stream",
                                         "acp-connection-id": connection})  # fmt: skip
        assert r.status_code == 410 and "idle" in r.text


async def test_a_client_that_stops_reading_is_cut_off(config: Config, tmp_path: Path,
                                                      workspace: str) -> None:  # fmt: skip
    script = [[{"text": "w " * 400_000}]]
    config = Config(state_dir=config.state_dir, offline_script=write_script(tmp_path, script))
    limits = Limits(high_water=64 * 1024, stall_timeout=0.3)
    async with serving(config, Settings(token=TOKEN, limits=limits)) as (url, hub):
        ws = await WsClient(url).connect()
        await ws.initialize()
        sid = await ws.new_session(workspace)
        peer = hub.peers[str(ws.connection_id)]
        ws.socket.transport.pause_reading()  # the client stops reading
        await ws.send({"jsonrpc": "2.0", "id": 99, "method": "session/prompt",
                       "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}})
        await peer.closed.wait()
        assert peer.reason is not None and peer.reason.startswith("slow reader")
        assert hub.holds.holder(sid) is None
        other = await WsClient(url).connect()  # another connection may have it now
        await other.initialize()
        await other.request("session/load", {"sessionId": sid, "cwd": workspace, "mcpServers": []})
        await other.close()
        ws.socket.transport.abort()  # (the server's socket waits for the client to read)
        await ws.closed.wait()
        await ws.close()


# ---------------------------------------------------------------------- the end


async def test_draining_cancels_turns_and_ends_connections(
    served: Served, connect: Connect, workspace: str
) -> None:
    url, hub = served
    client = await connect(url)
    await client.initialize()
    sid = await client.new_session(workspace)
    await client.prompt(sid, "hello")
    go = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
    turn = client.start("session/prompt", go)
    await client.wait_for(lambda: "partial" in client.text(sid))
    drained = asyncio.ensure_future(hub.drain())
    answer = await turn
    assert answer["result"]["stopReason"] == "cancelled"
    await drained
    assert hub.peers == {} and hub.draining
    async with httpx.AsyncClient() as http:
        health = await http.get(url.replace("/acp", "/healthz"))
        assert (health.status_code, health.text) == (503, "draining\n")
        r = await http.post(url, headers=AUTH, json={"jsonrpc": "2.0", "id": 1,
                            "method": "initialize", "params": {"protocolVersion": 1}})  # fmt: skip
        assert r.status_code == 503 and "shutting down" in r.text
    if isinstance(client, WsClient):
        await client.closed.wait()
        assert client.socket.close_code == 1001
    stored = Path(str(hub.config.state_dir), "sessions", f"{sid}.jsonl").read_text()
    assert "partial answer" in stored and NEVER not in stored
    await client.close()


# ---------------------------------------------------------------------- the streams


async def test_the_end_of_a_load_follows_its_replay() -> None:
    """``session/load``'s response (the connection's stream) waits until the replay
    written before it (the session's stream) has been sent, when that stream is read."""
    from acp_agent.transports.streams import Router

    router = Router(1 << 20, 1.0, lambda exc: None, 4)
    router.expect(1, None, after="s1")
    box = router.mailbox("s1")
    reader = object()
    assert box is not None and box.attach(reader)
    update = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1"}}\n'
    response = b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    router.write_line(update)
    router.write_line(response)
    assert list(router.connection.lines) == [] and list(box.lines) == [update]
    assert router.take(box) == b"data: " + update + b"\n"
    router.sent(box)
    assert list(router.connection.lines) == [response]
    # with nobody reading the session's stream, nothing waits for it
    router.expect(2, None, after="s1")
    box.detach(reader)
    router.write_line(update)
    router.write_line(b'{"jsonrpc":"2.0","id":2,"result":{}}\n')
    assert len(router.connection.lines) == 2 and len(box.lines) == 1
