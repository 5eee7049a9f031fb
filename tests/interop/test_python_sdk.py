"""Interop: drive ``python -m acp_agent`` with the official Python SDK client.

Uses ``acp.spawn_agent_process`` the way a Python editor integration would, with a
``Client`` that records ``session_update`` calls and answers ``request_permission``.
The SDK's stream observers hand us every JSON-RPC message in both directions; each one
the agent sent is replayed through the schema ``checker`` fixture. Lines the SDK could
not parse never reach observers, but the SDK logs them ("Error parsing JSON-RPC
message"), so any ERROR log record fails the test too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import acp
import pytest
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    AuthCapabilities,
    AuthMethodAgent,
    ClientCapabilities,
    DeniedOutcome,
    DisableProviderResponse,
    FileSystemCapabilities,
    Implementation,
    ListProvidersResponse,
    LogoutResponse,
    PermissionOption,
    RequestPermissionResponse,
    SetProviderResponse,
    TerminalAuthMethod,
    ToolCallUpdate,
)

from ..fakes.llm_server import FakeLLMServer, Finish, Reply, Text
from ..harness import ROOT, agent_env, coverage_env
from ..limits import WAIT
from ..schema_check import SchemaChecker

LINE_LIMIT = 64 * 1024 * 1024  # the SDK default (64 KiB) is too small for real tool output
STEP_TIMEOUT = WAIT
NEVER = "NEVER-REACHED-AFTER-CANCEL"
TURN_BOUND_KINDS = ("agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update")
SCRIPT = [
    [{"thinking": "The user greets me."}, {"text": "Hello from the scripted offline model!"}],
    [{"text": "partial answer "}, {"hang": True}, {"text": NEVER}],
    [{"text": "Still here after the cancel."}],
]


@dataclass
class RecordingClient:
    """A minimal editor: records updates, allows every permission request once."""

    updates: list[tuple[str, Any]] = field(default_factory=list)
    permission_requests: list[tuple[str, ToolCallUpdate, list[PermissionOption]]] = field(
        default_factory=list
    )
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    permission_gate: asyncio.Event | None = None
    """When set: each permission request is answered only once the gate opens (the tool
    call stays in flight meanwhile)."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.permission_requests.append((session_id, tool_call, options))
        self.changed.set()
        if self.permission_gate is not None:
            await self.permission_gate.wait()
        allow = next((o for o in options if o.kind == "allow_once"), None)
        if allow is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    async def wait_until(self, predicate: Callable[[], bool], what: str) -> None:
        async with asyncio.timeout(STEP_TIMEOUT):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

    def kinds(self, start: int = 0) -> list[str]:
        return [u.session_update for _, u in self.updates[start:]]

    def text(self, start: int = 0, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u.content.text for _, u in self.updates[start:]
            if u.session_update == kind and getattr(u.content, "type", None) == "text"
        )


@dataclass
class SdkAgent:
    conn: Any
    process: Any
    client: RecordingClient
    events: list[StreamEvent]
    workspace: str
    stderr_path: Path

    def wire(self, direction: StreamDirection) -> list[dict[str, Any]]:
        return [e.message for e in self.events if e.direction == direction]


@asynccontextmanager
async def sdk_agent(
    checker: SchemaChecker, tmp_path: Path, state_dir: str, script: Any = None,
    args: tuple[str, ...] = (),
) -> AsyncIterator[SdkAgent]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),  # no user config leaks in
        **coverage_env(),
    }
    if script is not None:
        script_path = tmp_path / "script.json"
        script_path.write_text(json.dumps(script))
        env["ACP_AGENT_OFFLINE_SCRIPT"] = str(script_path)
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "hello.txt").write_text("hello\nworld\n")
    stderr_path = tmp_path / "agent.stderr"
    client = RecordingClient()
    events: list[StreamEvent] = []
    # stderr goes to a file: the SDK would pipe it and never read it.
    with open(stderr_path, "wb") as stderr:
        agent: SdkAgent | None = None
        try:
            # the SDK calls only the two methods the agent uses
            async with acp.spawn_agent_process(
                cast(acp.Client, client),
                sys.executable,
                "-m",
                "acp_agent",
                "--state-dir",
                state_dir,
                *args,
                env=env,
                cwd=tmp_path,
                transport_kwargs={
                    "limit": LINE_LIMIT,
                    "stderr": stderr.fileno(),
                    "shutdown_timeout": WAIT,
                },
                observers=[events.append],
            ) as (conn, process):
                agent = SdkAgent(conn, process, client, events, str(workspace), stderr_path)
                yield agent
        finally:
            replay(checker, events)
    # Closing stdin (the SDK does on exit) must make the agent exit by itself, cleanly.
    assert agent is not None
    assert agent.process.returncode == 0, (
        f"agent exit status {agent.process.returncode} after stdin EOF; stderr:\n"
        + stderr_path.read_text()[-2000:]
    )
    incoming = agent.wire(StreamDirection.INCOMING)
    assert incoming and checker.checked == len(incoming)
    received = sum(1 for m in incoming if m.get("method") == "session/update")
    assert len(client.updates) == received, (
        f"the SDK delivered {len(client.updates)} of {received} session/update notifications"
    )


def replay(checker: SchemaChecker, events: list[StreamEvent]) -> None:
    """Schema-check everything the agent sent. Ids never repeat on one SDK connection, so
    all client requests are registered first (observers see a request only after it is
    written, which in theory races its response)."""
    for e in events:
        if e.direction == StreamDirection.OUTGOING:
            checker.observe_inbound(e.message)
    for e in events:
        if e.direction == StreamDirection.INCOMING:
            checker.check(e.message)


@pytest.fixture(autouse=True)
def no_sdk_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.WARNING)
    yield
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not bad, "the ACP SDK logged errors (unparsable line, failed handler?):\n" + "\n".join(
        f"{r.getMessage()} {r.exc_text or ''}" for r in bad[:5]
    )


async def initialize(conn: Any) -> Any:
    return await asyncio.wait_for(
        conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
                terminal=False,
            ),
            client_info=Implementation(name="acp-agent-interop-py", version="0"),
        ),
        STEP_TIMEOUT,
    )


async def prompt(agent: SdkAgent, session_id: str, text: str) -> Any:
    return await asyncio.wait_for(
        agent.conn.prompt(session_id=session_id, prompt=[acp.text_block(text)]), STEP_TIMEOUT
    )


def turn_bound_updates_after_response(agent: SdkAgent, prompt_id: int) -> list[str]:
    """Message/thought/tool updates that arrived after the response to ``prompt_id``."""
    seen_response = False
    late = []
    for e in agent.events:
        m = e.message
        is_response = e.direction == StreamDirection.INCOMING and "method" not in m
        if is_response and m.get("id") == prompt_id:
            seen_response = True
        elif (seen_response and e.direction == StreamDirection.OUTGOING
              and m.get("method") == "session/prompt"):
            break
        elif seen_response and m.get("method") == "session/update":
            kind = m["params"]["update"]["sessionUpdate"]
            if kind in TURN_BOUND_KINDS:
                late.append(kind)
    return late


async def test_python_sdk_prompt_cancel_and_recover(
    checker: SchemaChecker, tmp_path: Path, state_dir: str
) -> None:
    async with sdk_agent(checker, tmp_path, state_dir, SCRIPT) as agent:
        init = await initialize(agent.conn)
        assert init.protocol_version == 1

        new = await asyncio.wait_for(
            agent.conn.new_session(cwd=agent.workspace, mcp_servers=[]), STEP_TIMEOUT
        )
        sid = new.session_id
        assert sid

        # 1. a complete turn
        start = len(agent.client.updates)
        first = await prompt(agent, sid, "hello")
        assert first.stop_reason == "end_turn"
        assert "agent_message_chunk" in agent.client.kinds(start)
        assert "agent_thought_chunk" in agent.client.kinds(start)
        assert "Hello from the scripted offline model!" in agent.client.text(start)

        # 2. a long scripted turn, cancelled once its first chunk has arrived
        start = len(agent.client.updates)
        task = asyncio.create_task(
            agent.conn.prompt(session_id=sid, prompt=[acp.text_block("tell me a long story")])
        )
        try:
            await agent.client.wait_until(
                lambda: agent.client.text(start).startswith("partial"),
                "the first chunk of the long turn",
            )
            await agent.conn.cancel(session_id=sid)
            # The script hangs: only the cancel can end this turn.
            second = await asyncio.wait_for(asyncio.shield(task), STEP_TIMEOUT)
        finally:
            if not task.done():
                task.cancel()
        assert second.stop_reason == "cancelled"
        assert agent.client.text(start).startswith("partial answer")

        # 3. the session still works
        start = len(agent.client.updates)
        third = await prompt(agent, sid, "are you still there?")
        assert third.stop_reason == "end_turn"
        assert "Still here after the cancel." in agent.client.text(start)

        close = await asyncio.wait_for(agent.conn.close_session(session_id=sid), STEP_TIMEOUT)
        assert close is not None

    assert all(s == sid for s, _ in agent.client.updates)
    assert NEVER not in agent.client.text()
    assert agent.client.permission_requests == []
    prompt_ids = [m["id"] for m in agent.wire(StreamDirection.OUTGOING)
                  if m.get("method") == "session/prompt"]
    assert len(prompt_ids) == 3
    for pid in prompt_ids:
        late = turn_bound_updates_after_response(agent, pid)
        assert late == [], f"updates after the session/prompt response (id {pid}): {late}"


async def test_python_sdk_session_catalogue(
    checker: SchemaChecker, tmp_path: Path, state_dir: str
) -> None:
    """set_title, status, archive/unarchive and list's ``archived`` filter. The SDK (0.12)
    has no methods for the first four nor the filter, and its models drop the new
    capabilities: requests go through its connection's raw ``send_request``, capabilities
    are read on the wire; its typed ``list_sessions`` must still read sessions that now
    carry ``archived`` (which its model drops)."""
    script = [[{"text": "First answer."}], [{"text": "partial "}, {"hang": True}, {"text": NEVER}]]
    async with sdk_agent(checker, tmp_path, state_dir, script) as agent:
        await initialize(agent.conn)  # its model drops the capabilities it does not know:
        (caps,) = [m["result"]["agentCapabilities"]["sessionCapabilities"]  # read the wire
                   for m in agent.wire(StreamDirection.INCOMING)
                   if "agentCapabilities" in m.get("result", {})]  # fmt: skip
        assert {name: caps.get(name) for name in ("title", "status", "archive")} == {
            "title": {}, "status": {}, "archive": {}}  # fmt: skip
        raw = agent.conn._conn  # the SDK's JSON-RPC connection: any method, untyped

        async def call(method: str, **params: Any) -> Any:
            return await asyncio.wait_for(raw.send_request(method, params), STEP_TIMEOUT)

        new = await asyncio.wait_for(
            agent.conn.new_session(cwd=agent.workspace, mcp_servers=[]), STEP_TIMEOUT
        )
        titled = new.session_id
        assert await call("session/set_title", sessionId=titled, title=" Py\tSDK  title\n") == {
            "title": "Py SDK title"}  # fmt: skip
        assert (await prompt(agent, titled, "hello")).stop_reason == "end_turn"
        titles = [u.title for s, u in agent.client.updates
                  if s == titled and u.session_update == "session_info_update"]  # fmt: skip
        assert titles == ["Py SDK title"]
        assert await call("session/status", sessionId=titled) == {"status": "open"}

        busy = (await asyncio.wait_for(
            agent.conn.new_session(cwd=agent.workspace, mcp_servers=[]), STEP_TIMEOUT)).session_id
        start = len(agent.client.updates)
        turn = asyncio.create_task(
            agent.conn.prompt(session_id=busy, prompt=[acp.text_block("go")]))
        try:
            await agent.client.wait_until(
                lambda: agent.client.text(start).startswith("partial"), "the busy turn's chunk")
            assert await call("session/archive", sessionId=busy) == {}
            ended = await asyncio.wait_for(asyncio.shield(turn), STEP_TIMEOUT)
        finally:
            if not turn.done():
                turn.cancel()
        assert ended.stop_reason == "cancelled"
        assert await call("session/status", sessionId=busy) == {"status": "saved"}

        typed = await asyncio.wait_for(agent.conn.list_sessions(), STEP_TIMEOUT)
        assert [s.session_id for s in typed.sessions] == [titled]
        plain = await call("session/list")  # the SDK's SessionInfo drops `archived`
        assert [(s["sessionId"], s["archived"]) for s in plain["sessions"]] == [(titled, False)]
        only = await call("session/list", archived="only")
        assert [(s["sessionId"], s["archived"]) for s in only["sessions"]] == [(busy, True)]
        both = await call("session/list", archived="include")
        assert {s["sessionId"] for s in both["sessions"]} == {titled, busy}
        assert await call("session/unarchive", sessionId=busy) == {}
        assert {s["sessionId"] for s in (await call("session/list"))["sessions"]} == {titled, busy}
        for method, params, code in [
            ("session/status", {"sessionId": "sess_nope"}, -32002),
            ("session/archive", {"sessionId": "sess_nope"}, -32002),
            ("session/list", {"archived": "_custom"}, -32602),
            ("session/set_title", {"sessionId": titled, "title": "   "}, -32602),
        ]:
            with pytest.raises(acp.RequestError) as caught:
                await call(method, **params)
            assert caught.value.code == code, (method, params)


async def test_python_sdk_permission_round_trip(
    checker: SchemaChecker, tmp_path: Path, state_dir: str
) -> None:
    """``run echo hi`` on the demo model: any permission request is answered allow_once
    and the turn must complete. (While the agent has no run_command tool, it answers
    with a message and asks nothing; only the stable parts are asserted.)"""
    async with sdk_agent(checker, tmp_path, state_dir) as agent:
        await initialize(agent.conn)
        new = await asyncio.wait_for(
            agent.conn.new_session(cwd=agent.workspace, mcp_servers=[]), STEP_TIMEOUT
        )
        sid = new.session_id
        start = len(agent.client.updates)
        response = await prompt(agent, sid, "run echo hi")
        assert response.stop_reason == "end_turn"
        assert agent.client.kinds(start), "no session/update arrived during the turn"
        assert agent.client.text(start), "no agent message text during the turn"

    incoming = agent.wire(StreamDirection.INCOMING)
    announced: set[str] = set()
    for m in incoming:
        update = m["params"]["update"] if m.get("method") == "session/update" else {}
        if update.get("sessionUpdate") == "tool_call":
            announced.add(update["toolCallId"])
        elif m.get("method") == "session/request_permission":
            tool_call_id = m["params"]["toolCall"]["toolCallId"]
            assert tool_call_id in announced, (
                f"session/request_permission for {tool_call_id} before a tool_call update "
                "announcing it"
            )
    for session_id, tool_call, options in agent.client.permission_requests:
        assert session_id == sid
        assert tool_call.tool_call_id in announced
        assert any(o.kind == "allow_once" for o in options), options
    # Every permission request got our allow_once answer back on the wire.
    answers = {m["id"]: m for m in agent.wire(StreamDirection.OUTGOING) if "method" not in m}
    for m in incoming:
        if m.get("method") == "session/request_permission":
            outcome = answers[m["id"]]["result"]["outcome"]
            assert outcome["outcome"] == "selected" and outcome["optionId"], outcome


async def test_python_sdk_sign_in_logout_and_provider_routing(
    checker: SchemaChecker, tmp_path: Path, state_dir: str
) -> None:
    """A key stored by ``acp-agent login`` signs the SDK client in; ``logout`` signs it
    out; ``providers/*`` route the model through the client's endpoint. The SDK (0.12) has
    the types of these methods but no calls for them: they go through its connection's
    ``send_request`` and come back through its models."""
    stored = subprocess.run(
        [sys.executable, "-m", "acp_agent", "login", "--provider", "openai", "--key-from-stdin",
         "--store", "file"], input="sk-stored-by-login\n", text=True, capture_output=True,
        env=agent_env({"XDG_CONFIG_HOME": str(tmp_path / "xdg-config")}), timeout=WAIT)  # fmt: skip
    assert stored.returncode == 0, stored.stderr
    async with FakeLLMServer() as server, sdk_agent(
        checker, tmp_path, state_dir, args=("--model", "openai:gpt-4.1")
    ) as agent:
        server.enqueue(Reply([Text("routed"), Finish("stop")]))
        conn, raw = agent.conn, agent.conn._conn
        init = await asyncio.wait_for(conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(auth=AuthCapabilities(terminal=True)),
            client_info=Implementation(name="acp-agent-interop-py", version="0"),
        ), STEP_TIMEOUT)  # fmt: skip
        caps = init.agent_capabilities
        assert isinstance(caps, AgentCapabilities) and caps.providers is not None
        assert caps.auth is not None and caps.auth.logout is not None
        api, terminal = init.auth_methods or []
        assert isinstance(api, AuthMethodAgent) and isinstance(terminal, TerminalAuthMethod)
        assert terminal.args == ["login"]
        await asyncio.wait_for(conn.authenticate(method_id=api.id), STEP_TIMEOUT)
        assert (await conn.new_session(cwd=agent.workspace, mcp_servers=[])).session_id

        LogoutResponse.model_validate(await raw.send_request("logout", {}))
        with pytest.raises(acp.RequestError) as refused:
            await conn.new_session(cwd=agent.workspace, mcp_servers=[])
        assert refused.value.code == -32000

        listed = ListProvidersResponse.model_validate(await raw.send_request("providers/list", {}))
        by_id = {p.provider_id: p for p in listed.providers}
        assert by_id["openai"].required and by_id["openai"].current is not None
        assert by_id["openai"].current.base_url == "https://api.openai.com/v1"
        with pytest.raises(acp.RequestError) as bad:
            await raw.send_request("providers/set", {
                "providerId": "openai", "apiType": "openai", "baseUrl": "ftp://x"})
        assert bad.value.code == -32602
        with pytest.raises(acp.RequestError) as required:
            await raw.send_request("providers/disable", {"providerId": "openai"})
        assert required.value.code == -32602
        DisableProviderResponse.model_validate(
            await raw.send_request("providers/disable", {"providerId": "anthropic"}))
        SetProviderResponse.model_validate(await raw.send_request("providers/set", {
            "providerId": "openai", "apiType": "openai", "baseUrl": server.openai_url,
            "headers": {"Authorization": "Bearer py-editor"}}))  # fmt: skip
        listed = ListProvidersResponse.model_validate(await raw.send_request("providers/list", {}))
        by_id = {p.provider_id: p for p in listed.providers}
        assert by_id["anthropic"].current is None
        assert by_id["openai"].current is not None
        assert by_id["openai"].current.base_url == server.openai_url

        sid = (await conn.new_session(cwd=agent.workspace, mcp_servers=[])).session_id
        assert (await prompt(agent, sid, "hi")).stop_reason == "end_turn"
        assert agent.client.text() == "routed"
        (request,) = server.requests
        assert request.headers["authorization"] == "Bearer py-editor"
        # Asked last, so no auth/status_update follows (this SDK would not know it).
        status = await raw.send_request("auth/status", {})
        assert status == {"state": "authenticated", "accounts": [
            {"label": "OpenAI: credentials in its endpoint's headers", "active": True}]}
