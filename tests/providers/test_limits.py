"""Model limits: the table, what a compatible server says (vLLM's ``GET /v1/models``,
Ollama's ``/api/show``), the configuration's override on top, and ``max_tokens`` kept
within the output limit and what is left of the window."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio

from acp_agent.client import ClientProxy
from acp_agent.config import from_mapping
from acp_agent.conversation import TextPart, ToolSpec, UserMessage
from acp_agent.handlers.runtime import Runtime
from acp_agent.providers import make_provider
from acp_agent.providers._limits import fit_output
from acp_agent.providers._openai import OpenAIProvider
from acp_agent.providers.base import ModelRequest
from acp_agent.providers.models import ServerLimits, model_info, with_server_limits

from ..fakes.llm_server import FakeLLMServer, Finish, Hang, HttpError, Reply, Text, Usage
from ..harness import AgentProcess
from ..limits import eventually
from ..schema_check import SchemaChecker
from . import collect


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OLLAMA_BASE_URL", "OPENROUTER_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest_asyncio.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def compatible(server: FakeLLMServer, model: str = "qwen", **kw: Any) -> OpenAIProvider:
    return OpenAIProvider(model, base_url=server.openai_url, discover_limits=True, **kw)


def ask(text: str = "hi", max_tokens: int | None = 4096) -> ModelRequest:
    return ModelRequest(system="s", messages=[UserMessage([TextPart(text)])], max_tokens=max_tokens)


# --------------------------------------------------------------------------- discovery


async def test_vllm_max_model_len_is_the_window(server: FakeLLMServer) -> None:
    server.models = [{"id": "other", "max_model_len": 4096}, {"id": "qwen", "max_model_len": 8192}]
    provider = compatible(server)
    limits = await provider.server_limits()
    await provider.aclose()
    assert limits == ServerLimits(context_window=8192, source="GET /models max_model_len")
    (asked,) = server.model_requests
    assert (asked.method, asked.path) == ("GET", "/v1/models")
    assert server.requests == []  # no generation request was made or scripted reply taken


async def test_asked_once_however_many_turns_start_at_once(server: FakeLLMServer) -> None:
    server.models = [{"id": "qwen", "max_model_len": 8192}]
    provider = compatible(server)
    first, second = await asyncio.gather(provider.server_limits(), provider.server_limits())
    assert first == second and await provider.server_limits() == first
    await provider.aclose()
    assert len(server.model_requests) == 1


async def test_ollama_num_ctx_is_the_window_and_the_trained_length_a_bound(
    server: FakeLLMServer,
) -> None:
    """Ollama lists no lengths: ``/api/show`` at its root (beside ``/v1``) does."""
    server.models = [{"id": "llama3.2:latest"}]
    server.ollama = {
        "llama3.2:latest": {"parameters": "stop <eot>\nnum_ctx 32768",
                            "model_info": {"llama.context_length": 131072}},
        "qwen3:latest": {"parameters": "", "model_info": {"qwen3.context_length": 40960}},
    }  # fmt: skip
    sized = compatible(server, "llama3.2")
    trained = compatible(server, "qwen3")
    exact = ServerLimits(context_window=32768, source="Ollama num_ctx")
    assert await sized.server_limits() == exact
    bound = await trained.server_limits()
    await sized.aclose()
    await trained.aclose()
    assert bound == ServerLimits(context_window=40960, exact=False,
                                 source="Ollama qwen3.context_length")  # fmt: skip
    shown = [r for r in server.model_requests if r.path == "/api/show"]
    assert [r.body for r in shown] == [{"model": "llama3.2"}, {"model": "qwen3"}]


@pytest.mark.parametrize(
    "models",
    [
        None,  # no such route (404)
        [{"id": "another-model", "max_model_len": 2048}],  # not the model asked about
        [{"id": "qwen"}],  # listed without a length
        HttpError(500, {"error": {"message": "down"}}),
    ],
)
async def test_a_server_that_does_not_say(server: FakeLLMServer, models: Any) -> None:
    server.models = models
    provider = compatible(server)
    assert await provider.server_limits() is None
    await provider.aclose()


async def test_a_silent_server_is_given_up_on(server: FakeLLMServer) -> None:
    """The discovery has a short time limit of its own; then the turn goes ahead."""
    server.models = Hang()
    provider = compatible(server)
    provider.discovery_timeout = 0.2
    assert await provider.server_limits() is None
    await provider.aclose()


async def test_a_refused_connection_is_no_answer() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = sock.getsockname()[1]
        provider = OpenAIProvider("qwen", base_url=f"http://127.0.0.1:{port}/v1",
                                  discover_limits=True)  # fmt: skip
        assert await provider.server_limits() is None
        await provider.aclose()


async def test_openai_and_openrouter_are_not_asked(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenAI's own API says nothing of limits (the table knows its models); OpenRouter's
    list of every model is large, and its models are in the table too."""
    official = make_provider(from_mapping({"model": "openai:gpt-4.1"}))
    assert isinstance(official, OpenAIProvider) and await official.server_limits() is None
    monkeypatch.setenv("OPENROUTER_BASE_URL", server.openai_url)
    server.models = [{"id": "qwen/qwen3-coder", "max_model_len": 1000}]
    routed = make_provider(from_mapping({"model": "openrouter:qwen/qwen3-coder"}))
    assert isinstance(routed, OpenAIProvider) and await routed.server_limits() is None
    assert server.model_requests == []


# --------------------------------------------------------------------------- max_tokens


async def test_max_tokens_stays_within_what_the_window_leaves(server: FakeLLMServer) -> None:
    """Once the server's window is known, ``max_tokens`` never asks for more than the prompt
    leaves of it (vLLM refuses prompt + max_tokens beyond ``max_model_len``)."""
    server.models = [{"id": "qwen", "max_model_len": 2048}]
    provider = compatible(server)
    await provider.server_limits()
    server.enqueue(Reply([Text("a"), Finish("stop")]), Reply([Text("b"), Finish("stop")]))
    await collect(provider.stream(ask("x" * 3000)))  # about 1000 tokens, counted generously
    await collect(provider.stream(ask("short", max_tokens=500)))
    await provider.aclose()
    room = server.requests[0].body["max_tokens"]
    assert 0 < room <= 2048 - 750 and room < 4096
    assert server.requests[1].body["max_tokens"] == 500


def test_fit_output() -> None:
    exact = ServerLimits(context_window=10_000)
    tools = [ToolSpec("t", "d" * 3000, {"type": "object"})]
    fitted = fit_output(ModelRequest(system="s", messages=[], tools=tools, max_tokens=9_999), exact)
    assert fitted.max_tokens is not None and 8_900 < fitted.max_tokens < 9_000  # tools count
    assert fit_output(ask(max_tokens=None), exact).max_tokens is None  # the server fills the rest
    assert fit_output(ask(max_tokens=100), exact).max_tokens == 100
    assert fit_output(ask("x" * 60_000), exact).max_tokens == 1  # no room: never above it
    bound = ServerLimits(context_window=10_000, exact=False)  # Ollama truncates, never refuses
    assert fit_output(ask("x" * 60_000), bound).max_tokens == 4096
    assert fit_output(ask(), None).max_tokens == 4096


# --------------------------------------------------------------------------- precedence


def test_server_limits_refine_the_table() -> None:
    default = model_info("openai", "my-local-model")
    assert (default.context_window, default.max_output_tokens) == (128_000, 4_096)
    small = with_server_limits(default, ServerLimits(context_window=2048))
    assert (small.context_window, small.max_output_tokens) == (2048, 2048)
    large = with_server_limits(default, ServerLimits(context_window=262_144))
    assert (large.context_window, large.max_output_tokens) == (262_144, 4_096)
    bound = with_server_limits(default, ServerLimits(context_window=262_144, exact=False))
    assert bound.context_window == 128_000  # an upper bound only ever lowers


async def test_the_configuration_override_always_wins(server: FakeLLMServer) -> None:
    """Override > what the server said > the table > the conservative default."""
    server.models = [
        {"id": "qwen", "max_model_len": 32_768},
        {"id": "mistral", "max_model_len": 16_384},
    ]
    config = from_mapping({
        "model": "openai:qwen",
        "openai": {"base-url": server.openai_url},
        "model-overrides": {"openai:qwen": {"context-window": 20_000, "max-output-tokens": 1_000}},
    })  # fmt: skip
    runtime = Runtime(config, cast(ClientProxy, None))
    assert runtime.model_info_for("openai:qwen").context_window == 20_000  # not asked yet
    await runtime.learn_limits("openai:qwen")
    await runtime.learn_limits("openai:mistral")
    await runtime.learn_limits("openai:unknown")
    qwen = runtime.model_info_for("openai:qwen")
    assert (qwen.context_window, qwen.max_output_tokens) == (20_000, 1_000)
    assert runtime.model_info_for("openai:mistral").context_window == 16_384
    assert runtime.model_info_for("openai:unknown").context_window == 128_000
    await runtime.learn_limits("openai:qwen")  # asked once per model
    assert len(server.model_requests) == 3 + 1  # unknown: /models, then Ollama's /api/show
    for provider in runtime._providers.values():
        await provider.aclose()


async def test_the_agent_learns_the_window_when_the_session_opens(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer, tmp_path: Path
) -> None:
    """Through the agent: the server is asked once, when the session opens (the connection
    made ahead of the first prompt), and the first prompt goes over that connection; the
    window the client is shown is vLLM's, and ``max_tokens`` fits in it."""
    server.models = [{"id": "qwen", "max_model_len": 9000}]
    server.enqueue(Reply([Text("ok"), Usage(100, 1), Finish("stop")]))
    log = tmp_path / "agent.log"
    agent = AgentProcess(checker, "--state-dir", state_dir, "--model", "openai:qwen",
                         "--base-url", server.openai_url, "--mode", "bypass",
                         "--log-level", "debug", "--log-file", str(log))  # fmt: skip
    async with agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        await eventually(lambda: log.exists() and "connected ahead" in log.read_text(),
                         "the connection made ahead")  # fmt: skip
        assert server.requests == []
        assert (await agent.prompt(sid, "hi"))["stopReason"] == "end_turn"
        assert agent.updates_of(sid, "usage_update")[-1]["size"] == 9000
    (asked,) = server.model_requests
    assert asked.path == "/v1/models"
    assert server.requests[0].connection == asked.connection
    assert 0 < server.requests[0].body["max_tokens"] <= 4096


async def test_without_connect_ahead_the_first_turn_asks(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer, tmp_path: Path
) -> None:
    """``connect-ahead = false``: nothing reaches the server before the first prompt, which
    asks the window first."""
    server.models = [{"id": "qwen", "max_model_len": 9000}]
    server.enqueue(Reply([Text("ok"), Usage(100, 1), Finish("stop")]))
    config = tmp_path / "config.toml"
    config.write_text(f'[openai]\nbase-url = "{server.openai_url}"\nconnect-ahead = false\n')
    log = tmp_path / "agent.log"
    agent = AgentProcess(checker, "--config", str(config), "--state-dir", state_dir,
                         "--model", "openai:qwen", "--mode", "bypass", "--log-level", "debug",
                         "--log-file", str(log))  # fmt: skip
    async with agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        await eventually(lambda: log.exists() and "session prepared" in log.read_text(),
                         "the session prepared")
        assert server.model_requests == [] and server.connections == 0
        assert (await agent.prompt(sid, "hi"))["stopReason"] == "end_turn"
        assert agent.updates_of(sid, "usage_update")[-1]["size"] == 9000
    assert len(server.model_requests) == 1
    assert "connected ahead" not in log.read_text()  # asked by the turn, not ahead
