"""The HTTP clients under the SDK clients (``providers/_http.py``): one TLS context, built
once, beside the SDK's import, and verifying as the SDKs' own would (a server whose
certificate the trust store does not vouch for is refused, and ``SSL_CERT_FILE`` names
the trust store); idle connections kept 50 s; the SDKs' other defaults."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import trustme

from acp_agent.errors import ProviderConnectionError
from acp_agent.providers import _http
from acp_agent.providers._anthropic import AnthropicProvider
from acp_agent.providers._openai import OpenAIProvider
from acp_agent.providers.base import TextDelta

from ..fakes.llm_server import FakeLLMServer, Finish, Reply, Text
from . import collect, hello


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def fresh_context(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's shared context forgotten: the test builds its own."""
    monkeypatch.setattr(_http, "_context", None)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    yield


@pytest_asyncio.fixture
async def https(ca: trustme.CA) -> AsyncIterator[FakeLLMServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    async with FakeLLMServer(tls=context) as server:
        yield server


def _providers(server: FakeLLMServer) -> list[OpenAIProvider | AnthropicProvider]:
    return [
        OpenAIProvider("gpt-4.1", api_key="k", base_url=server.openai_url),
        AnthropicProvider("claude-sonnet-4-5", api_key="k", base_url=server.url),
    ]


@pytest.mark.usefixtures("fresh_context")
async def test_a_server_the_trust_store_vouches_for_is_reached(
    https: FakeLLMServer, ca: trustme.CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    _http.start()  # as the warm-up does, before any client
    for provider in _providers(https):
        https.enqueue(Reply([Text("hello"), Finish("stop")]))
        events = await collect(provider.stream(hello()))
        assert [e.text for e in events if isinstance(e, TextDelta)] == ["hello"]
        await provider.aclose()
    assert len(https.requests) == 2
    shared = _http.context()
    assert shared is not None and shared.cert_store_stats()["x509_ca"] == 1  # only ours


@pytest.mark.usefixtures("fresh_context")
async def test_a_server_it_does_not_vouch_for_is_refused(
    https: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)  # the system's trust store
    for provider in _providers(https):
        events = collect(provider.stream(hello()))
        with pytest.raises(ProviderConnectionError, match=r"(?i)certificate|ssl|tls"):
            await events
        await provider.aclose()
    assert https.requests == []


@pytest.mark.usefixtures("fresh_context")
def test_every_sdk_client_shares_the_one_context_and_keeps_idle_connections() -> None:
    import anthropic
    import openai

    first = openai.AsyncOpenAI(api_key="k", http_client=_http.http_client(openai))
    second = anthropic.AsyncAnthropic(api_key="k", http_client=_http.http_client(anthropic))
    for client in (first, second):
        transport: Any = client._client._transport  # httpx's pool holds the context
        assert transport._pool._ssl_context is _http.context()
        assert transport._pool._keepalive_expiry == _http.KEEP_IDLE  # not httpx's 5 s
        assert transport._pool._max_connections == 1000  # the SDK's other defaults
        assert client._client.follow_redirects


def test_a_context_that_cannot_be_built_leaves_it_to_the_sdk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import openai

    def fail() -> ssl.SSLContext:
        raise ssl.SSLError("no trust store")

    monkeypatch.setattr(_http, "_context", None)
    monkeypatch.setattr(_http, "_builder", lambda: fail)
    assert _http.context() is None
    transport: Any = _http.http_client(openai)._transport  # its own context, our limits
    assert transport._pool._ssl_context is not None
    assert transport._pool._keepalive_expiry == _http.KEEP_IDLE


def test_no_thread_to_be_had_leaves_no_one_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoThread:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def start(self) -> None:
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(_http, "_context", None)
    monkeypatch.setattr(_http, "Thread", NoThread)
    assert _http.context() is None  # at once, not blocked on a build that never starts


def test_an_sdk_that_does_not_name_its_defaults_builds_its_own() -> None:
    import types

    assert _http.http_client(types.SimpleNamespace()) is None
