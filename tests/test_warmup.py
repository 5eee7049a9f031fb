"""Warm-up (issue 17): the configured provider is readied once the ``initialize`` reply is
out, in a worker thread, and no other vendor's SDK is imported; a provider readies its
first request (its client, a rehearsed request on a loopback server of its own) without a
byte to the model's server; a turn waits for the warm-up instead of importing on the event
loop; a system prompt built before the first turn follows a mode changed meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from acp_agent import IMPORTING
from acp_agent.client import ClientProxy
from acp_agent.config import from_mapping
from acp_agent.handlers.agent import Agent
from acp_agent.handlers.warmup import Warmup
from acp_agent.providers._anthropic import AnthropicProvider
from acp_agent.providers._openai import OpenAIProvider
from acp_agent.providers._responses import ResponsesProvider
from acp_agent.rpc.connection import Connection
from acp_agent.rpc.framing import LineReader, MemoryPipe

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text
from .harness import ROOT, AgentProcess
from .limits import WAIT, eventually
from .providers import hello
from .schema_check import SchemaChecker

#: Drives the agent in process over in-memory pipes: ``initialize``, then waits for the
#: warm-up (no clock involved) and says what got imported and built.
SCRIPT = """
import asyncio, json, sys
from acp_agent.config import from_mapping
from acp_agent.rpc.connection import Connection
from acp_agent.rpc.framing import LineReader, MemoryPipe
from acp_agent.server import wire

async def main():
    config = from_mapping({"model": sys.argv[1], "openai": {"base-url": sys.argv[2]},
                           "anthropic": {"base-url": sys.argv[2]}})
    replies = LineReader()
    connection = Connection(LineReader(), MemoryPipe(replies))
    agent = wire(config, connection)
    before = {m: m in sys.modules for m in ("openai", "anthropic")}
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}
    connection._dispatch(json.dumps(request).encode())
    reply = await replies.readline()
    while agent.warmup.started is None:
        await asyncio.sleep(0)
    await agent.warmup.started
    provider = agent.models._providers[config.model]
    from acp_agent.providers import _http
    shared = provider._client._client._transport._pool._ssl_context
    print(json.dumps({"before": before, "reply": json.loads(reply)["id"],
                      "tls": shared is _http.context() and _http._context.done(),
                      "openai": "openai" in sys.modules, "anthropic": "anthropic" in sys.modules,
                      "client": provider._client is not None}))

asyncio.run(main())
"""


def warm_in_process(model: str, url: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, model, url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


@pytest.mark.parametrize(("model", "sdk", "other"), [
    ("openai:gpt-4.1", "openai", "anthropic"),
    ("anthropic:claude-sonnet-4-5", "anthropic", "openai"),
])  # fmt: skip
async def test_initialize_warms_the_configured_provider_only(
    server: FakeLLMServer, model: str, sdk: str, other: str
) -> None:
    result = await asyncio.to_thread(warm_in_process, model, server.url)
    assert result["before"] == {"openai": False, "anthropic": False}
    assert result["reply"] == 1
    assert result[sdk] and not result[other]
    assert result["client"]  # the SDK client is built before any prompt
    assert result["tls"]  # with the TLS context built beside the imports
    assert server.requests == [] and server.model_requests == []


@pytest.mark.parametrize("kind", ["openai", "responses", "anthropic"])
async def test_prepare_rehearses_without_reaching_the_server(
    server: FakeLLMServer, kind: str
) -> None:
    provider: OpenAIProvider | AnthropicProvider
    if kind == "anthropic":
        provider = AnthropicProvider("claude-sonnet-4-5", api_key="k", base_url=server.url)
    elif kind == "responses":
        provider = ResponsesProvider("gpt-5", api_key="k", base_url=server.openai_url)
    else:
        provider = OpenAIProvider("gpt-4.1", api_key="k", base_url=server.openai_url)
    await asyncio.to_thread(provider.prepare)
    assert provider._client is not None
    assert server.requests == [] and server.model_requests == []
    server.enqueue(Reply([Text("hi"), Finish("stop")]))
    events = [e async for e in provider.stream(hello())]  # the prepared client works
    assert len(server.requests) == 1 and events
    await provider.aclose()


async def test_prepare_without_a_key_leaves_it_to_the_first_prompt() -> None:
    provider = AnthropicProvider("claude-sonnet-4-5")
    await asyncio.to_thread(provider.prepare)
    assert provider._client is None


async def test_a_turn_waits_for_the_warm_up_off_the_event_loop(state_dir: str) -> None:
    """While the warm-up thread imports, the loop goes on; a turn starts after it."""
    release = threading.Event()

    def importing() -> None:
        release.wait(WAIT)

    prepared = asyncio.Event()

    async def prepare() -> None:
        prepared.set()

    warmup = Warmup(importing, prepare)
    warmup.start()
    waiting = asyncio.ensure_future(warmup.warmed())
    for _ in range(20):  # the loop is free meanwhile
        await asyncio.sleep(0)
    assert not waiting.done() and warmup.waiting == 1 and not prepared.is_set()
    release.set()
    await waiting
    assert warmup.waiting == 0 and prepared.is_set()


async def test_a_turn_before_the_warm_up_started_starts_it_and_waits(state_dir: str) -> None:
    """A turn that comes before anything started the warm-up starts it and waits for it,
    never importing beside it: a package two threads import at once can fail in one of
    them."""
    release = threading.Event()
    started = threading.Event()

    def importing() -> None:
        started.set()
        release.wait(WAIT)

    async def prepare() -> None:
        pass

    warmup = Warmup(importing, prepare)
    assert warmup.started is None
    waiting = asyncio.ensure_future(warmup.warmed())
    await asyncio.to_thread(started.wait, WAIT)
    assert started.is_set() and warmup.started is not None and not waiting.done()
    release.set()
    await waiting


async def test_a_mode_changed_before_the_first_turn_is_in_its_system_prompt(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer, tmp_path: Path
) -> None:
    log = tmp_path / "agent.log"
    server.enqueue(Reply([Text("ok"), Finish("stop")]))
    agent = AgentProcess(checker, "--state-dir", state_dir, "--model", "openai:gpt-4.1",
                         "--base-url", server.openai_url, "--log-level", "debug",
                         "--log-file", str(log), env={"OPENAI_API_KEY": "k"})  # fmt: skip
    async with agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        await _logged(log, "session prepared")
        await agent.request("session/set_mode", {"sessionId": sid, "modeId": "plan"})
        await agent.prompt(sid, "hi")
    system = server.requests[0].body["messages"][0]["content"]
    assert "Permission mode: plan" in system
    notes = [m for m in server.requests[0].body["messages"] if "now plan" in str(m["content"])]
    assert notes == []  # told by the system prompt itself, as without the warm-up


async def _logged(log: Path, text: str) -> None:
    await eventually(lambda: log.exists() and text in log.read_text(), f"{text!r} logged")


async def test_a_session_opened_connects_its_model_ahead_of_the_prompt(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer, tmp_path: Path
) -> None:
    """When a session opens, the model's server gets one small read-only request (the
    model's description), and the first prompt goes over the connection it opened."""
    server.enqueue(Reply([Text("ok"), Finish("stop")]))
    log = tmp_path / "agent.log"
    agent = AgentProcess(checker, "--state-dir", state_dir, "--model",
                         "anthropic:claude-sonnet-4-5", "--base-url", server.url,
                         "--log-level", "debug", "--log-file", str(log),
                         env={"ANTHROPIC_API_KEY": "k"})  # fmt: skip
    async with agent:
        await agent.initialize()
        assert server.connections == 0  # initialize alone reaches no server
        sid = await agent.new_session(workspace)
        await _logged(log, "connected ahead")  # answer read
        assert (await agent.prompt(sid, "hi"))["stopReason"] == "end_turn"
    (asked,) = server.model_requests
    assert (asked.method, asked.path) == ("GET", "/v1/models/claude-sonnet-4-5")
    (prompted,) = server.requests
    assert prompted.connection == asked.connection and server.connections == 1


@contextlib.asynccontextmanager
async def in_process_agent(state_dir: str) -> AsyncIterator[Agent]:
    """An agent on the offline model over in-memory pipes, nothing sent to it yet."""
    config = from_mapping({"model": "offline", "state-dir": state_dir})
    agent = Agent(config, ClientProxy(Connection(LineReader(), MemoryPipe(LineReader()))))
    try:
        yield agent
    finally:
        await agent.shutdown()


async def test_the_late_stages_are_never_imported_beside_another_import(state_dir: str) -> None:
    """A request's worker thread asking for the session stage or the turn stage while
    another thread imports (the warm-up's SDK, say) waits for that import to end: two
    threads importing at once can each hold a module's lock the other needs, and Python
    then fails one of them (``_DeadlockError``, a turn answered -32603)."""
    built: list[object] = []
    async with in_process_agent(state_dir) as agent:
        stages = {"session": agent.services, "turn": lambda: agent.services().turns}
        for name, stage in stages.items():
            with IMPORTING:  # another thread is importing
                worker = threading.Thread(target=lambda s=stage: built.append(s()))
                worker.start()
                # (a wait that can only show the absence of a race, never fail a right one)
                worker.join(0.3)
                assert worker.is_alive() and built == [], name
            await asyncio.to_thread(worker.join, WAIT)
            assert len(built) == 1, name
            built.clear()


async def test_callers_waiting_for_the_turn_stage_go_on_in_their_order(state_dir: str) -> None:
    """Prompts and steers that wait for the turn stage go on in the order they came: the
    first steer of an idle session is the one that starts a turn (``startedNewTurn``)."""
    order: list[int] = []
    async with in_process_agent(state_dir) as agent:
        sv = await asyncio.to_thread(agent.services)

        async def caller(n: int) -> None:
            await sv.turns_ready()
            order.append(n)

        with IMPORTING:  # another import is under way: every caller waits
            callers = [asyncio.ensure_future(caller(n)) for n in range(8)]
            for _ in range(20):
                await asyncio.sleep(0)
            assert order == []
        await asyncio.wait_for(asyncio.gather(*callers), WAIT)
        assert order == list(range(8))
