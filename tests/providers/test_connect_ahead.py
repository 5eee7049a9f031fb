"""Connections made ahead of a prompt (issue 17): when a session opens, the provider opens
the connection its first prompt will use, with one small read-only request through its
own SDK client (the model's description; a compatible server's model list, which also
gives the window; OpenRouter's key), and the prompt then goes over that connection. One
at a time, none while a recent one may still be in the pool, nothing without a key, and
a server that did not answer is asked again by the first turn."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from acp_agent.config import from_mapping
from acp_agent.providers import make_provider
from acp_agent.providers._anthropic import AnthropicProvider
from acp_agent.providers._openai import OpenAIProvider
from acp_agent.providers._responses import ResponsesProvider

from ..fakes.llm_server import FakeLLMServer, Finish, Hang, Reply, Text
from ..timeouts import LoopClock
from . import collect, hello


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def _provider(kind: str, server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> Any:
    if kind == "anthropic":
        return AnthropicProvider("claude-sonnet-4-5", api_key="k", base_url=server.url)
    if kind == "responses":
        return ResponsesProvider("gpt-5", api_key="k", base_url=server.openai_url)
    if kind == "compatible":  # a local server: its model list gives the window
        server.models = [{"id": "qwen", "max_model_len": 9000}]
        return OpenAIProvider("qwen", base_url=server.openai_url, discover_limits=True)
    if kind == "openrouter":
        monkeypatch.setenv("OPENROUTER_API_KEY", "k")
        monkeypatch.setenv("OPENROUTER_BASE_URL", server.openai_url)
        return make_provider(from_mapping({"model": "openrouter:qwen/qwen3-coder"}))
    return OpenAIProvider("gpt-4.1", api_key="k", base_url=server.openai_url)


ASKED = {
    "openai": "/v1/models/gpt-4.1",
    "responses": "/v1/models/gpt-5",
    "anthropic": "/v1/models/claude-sonnet-4-5",
    "compatible": "/v1/models",
    "openrouter": "/v1/key",
}


@pytest.mark.parametrize("kind", list(ASKED))
async def test_the_first_request_goes_over_the_connection_made_ahead(
    server: FakeLLMServer, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = _provider(kind, server, monkeypatch)
    await provider.connect()
    (asked,) = server.model_requests
    assert (asked.method, asked.path) == ("GET", ASKED[kind])
    if kind != "compatible":  # authenticated as any request of the SDK's
        key = asked.headers.get("x-api-key") or asked.headers["authorization"]
        assert key.removeprefix("Bearer ") == "k"
    assert server.requests == []  # no model request, no scripted reply taken
    server.enqueue(Reply([Text("hi"), Finish("stop")]))
    assert await collect(provider.stream(hello()))
    (sent,) = server.requests
    assert sent.connection == asked.connection and server.connections == 1
    if kind == "compatible":  # the window was learned on the way: not asked again
        limits = await provider.server_limits()
        assert limits is not None and limits.context_window == 9000
        assert len(server.model_requests) == 1
    await provider.aclose()


async def test_one_at_a_time_and_none_while_a_recent_one_may_be_open(
    server: FakeLLMServer,
) -> None:
    provider = OpenAIProvider("gpt-4.1", api_key="k", base_url=server.openai_url)
    await asyncio.gather(provider.connect(), provider.connect(), provider.connect())
    await provider.connect()  # just made: still in the pool
    assert len(server.model_requests) == 1
    provider._ahead.FRESH = 0.0  # as if the pool had let it go
    await provider.connect()
    assert len(server.model_requests) == 2
    await provider.aclose()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_request_under_way_makes_it_needless(
    server: FakeLLMServer, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = _provider(kind, server, monkeypatch)
    server.enqueue(Reply([Text("hi"), Finish("stop")]))
    assert await collect(provider.stream(hello()))
    await provider.connect()
    assert server.model_requests == [] and server.connections == 1
    await provider.aclose()


async def test_nothing_is_sent_without_a_key(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = AnthropicProvider("claude-sonnet-4-5", base_url=server.url)
    await provider.connect()
    assert server.connections == 0
    await provider.aclose()


async def test_a_server_that_did_not_answer_ahead_is_asked_by_the_first_turn() -> None:
    """Refused ahead (the server not up yet): not remembered as "the server does not
    say"; the first turn asks, and learns the window."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        server = FakeLLMServer(sock=sock)
        server.models = [{"id": "qwen", "max_model_len": 9000}]
        provider = OpenAIProvider("qwen", base_url=server.openai_url, discover_limits=True)
        await provider.connect()  # never raises
        await server.start()
        try:
            limits = await provider.server_limits()
            assert limits is not None and limits.context_window == 9000
            assert len(server.model_requests) == 1
        finally:
            await provider.aclose()
            await server.close()


async def test_a_turn_that_joined_an_unanswered_question_asks_again(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn that started while the question asked ahead was under way waits for it;
    unanswered, the turn asks again rather than go without the window for good."""
    clock = LoopClock(monkeypatch)
    server.models = Hang()
    provider = OpenAIProvider("qwen", base_url=server.openai_url, discover_limits=True)
    provider.discovery_timeout = 60.0  # the question's own limit, on the test's clock
    ahead = asyncio.ensure_future(provider.connect())
    await server.wait_for_requests(1, about_models=True)  # the question under way
    server.models = [{"id": "qwen", "max_model_len": 9000}]
    turn = asyncio.ensure_future(provider.server_limits())
    await asyncio.sleep(0)  # the turn joins the question
    clock.advance(60.0)  # no answer: given up
    limits = await turn
    assert limits is not None and limits.context_window == 9000
    assert len(server.model_requests) == 2
    await ahead
    await provider.aclose()


async def test_a_list_answered_is_an_answer_though_the_next_question_hangs(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server answered (no list: 404) and Ollama's question then got nothing in time:
    the server was reached, so the first turn does not ask again."""
    clock = LoopClock(monkeypatch)
    server.ollama = {"qwen": Hang()}
    provider = OpenAIProvider("qwen", base_url=server.openai_url, discover_limits=True)
    provider.discovery_timeout = 60.0
    connecting = asyncio.ensure_future(provider.connect())
    await server.wait_for_requests(2, about_models=True)  # the list answered, Ollama asked
    clock.advance(60.0)  # and no answer from Ollama in time
    await connecting
    assert await provider.server_limits() is None
    assert [r.path for r in server.model_requests] == ["/v1/models", "/api/show"]
    await provider.aclose()


async def test_a_refusal_seen_by_a_turn_is_remembered() -> None:
    """The turn's own discovery is asked once, answered or not (as before)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        server = FakeLLMServer(sock=sock)
        server.models = [{"id": "qwen", "max_model_len": 9000}]
        provider = OpenAIProvider("qwen", base_url=server.openai_url, discover_limits=True)
        assert await provider.server_limits() is None
        await server.start()
        try:
            assert await provider.server_limits() is None
            assert server.model_requests == []
        finally:
            await provider.aclose()
            await server.close()


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
async def test_the_fake_describes_a_model_as_the_vendor_does(
    server: FakeLLMServer, sdk: str
) -> None:
    """The descriptions the connection asks for parse with the SDKs' own models."""
    if sdk == "anthropic":
        import anthropic

        a = anthropic.AsyncAnthropic(api_key="k", base_url=server.url)
        described: Any = await a.models.retrieve("claude-sonnet-4-5")
        assert (described.type, described.id) == ("model", "claude-sonnet-4-5")
        await a.close()
    else:
        import openai

        o = openai.AsyncOpenAI(api_key="k", base_url=server.openai_url)
        described = await o.models.retrieve("gpt-4.1")
        assert (described.object, described.id) == ("model", "gpt-4.1")
        await o.close()
        server.models = [{"id": "qwen", "max_model_len": 9000}]  # a compatible server's
        o = openai.AsyncOpenAI(api_key="k", base_url=server.openai_url)
        with pytest.raises(openai.NotFoundError):
            await o.models.retrieve("gpt-4.1")
        await o.close()
