"""Provider families: one spec each; keys, endpoints and configuration sections come from
the spec, and the presets (``ollama:``, ``openrouter:``) work through the real SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from acp_agent.config import ConfigError, from_mapping
from acp_agent.providers import FAMILIES, check, make_provider, missing_key, spec
from acp_agent.providers.base import ModelRequest, TextDelta
from acp_agent.providers.registry import endpoint

from ..fakes.llm_server import FakeLLMServer, Finish, Reply, Text
from ..harness import AgentProcess
from ..schema_check import SchemaChecker
from . import collect


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def test_every_family_has_its_spec() -> None:
    assert list(FAMILIES) == ["offline", "openai", "anthropic", "ollama", "openrouter"]
    for name in FAMILIES:
        assert spec(name).name == name


@pytest.mark.parametrize(("model", "env", "missing"), [
    ("offline", {}, None),
    ("openai:gpt-4.1", {}, "OPENAI_API_KEY"),
    ("openai:gpt-4.1", {"OPENAI_API_KEY": "k"}, None),
    ("openai:llama", {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}, None),  # a local server
    ("anthropic:claude-sonnet-4-5", {}, "ANTHROPIC_API_KEY"),
    ("anthropic:claude-sonnet-4-5", {"ANTHROPIC_AUTH_TOKEN": "t"}, None),
    ("ollama:qwen2.5-coder", {}, None),
    ("openrouter:anthropic/claude-sonnet-4.5", {}, "OPENROUTER_API_KEY"),
    ("openrouter:anthropic/claude-sonnet-4.5", {"OPENROUTER_API_KEY": "k"}, None),
])
def test_missing_key(model: str, env: dict[str, str], missing: str | None) -> None:
    assert missing_key(from_mapping({"model": model}), env=env) == missing


def test_a_configured_key_variable_replaces_the_familys() -> None:
    config = from_mapping({"model": "anthropic:claude-sonnet-4-5",
                           "anthropic": {"api-key-env": "MY_KEY"}})  # fmt: skip
    assert missing_key(config, env={"ANTHROPIC_AUTH_TOKEN": "t"}) == "MY_KEY"
    assert missing_key(config, env={"MY_KEY": "k"}) is None
    assert endpoint(config, "anthropic", env={"MY_KEY": "k"}).api_key == "k"


def test_endpoint_precedence_configuration_then_environment_then_default() -> None:
    env = {"OLLAMA_BASE_URL": "http://env:1/v1"}
    default = from_mapping({"model": "ollama:m"})
    assert endpoint(default, "ollama", env={}).base_url == "http://127.0.0.1:11434/v1"
    assert endpoint(default, "ollama", env=env).base_url == "http://env:1/v1"
    configured = from_mapping({"model": "ollama:m", "ollama": {"base-url": "http://cfg:2/v1"}})
    assert endpoint(configured, "ollama", env=env).base_url == "http://cfg:2/v1"
    assert endpoint(default, "openrouter", env={}).base_url == "https://openrouter.ai/api/v1"


def test_the_http_timeout_never_cuts_a_wait_the_limits_allow() -> None:
    """The SDK's read timeout is a backstop: the wrapper's first-event and idle timeouts
    end stalls (keep-alives aside) and name their limit, so it is never shorter."""
    config = from_mapping({"model": "openai:m", "openai": {"timeout": 5.0},
                           "limits": {"first-event-timeout": 900.0}})  # fmt: skip
    found = endpoint(config, "openai", env={"OPENAI_API_KEY": "k"})
    assert found.timeout == 900.0
    assert (found.family, found.title, found.key_env) == ("openai", "OpenAI", "OPENAI_API_KEY")
    roomy = from_mapping({"model": "openai:m", "openai": {"timeout": 1000.0}})
    assert endpoint(roomy, "openai", env={}).timeout == 1000.0
    ollama = endpoint(from_mapping({"model": "ollama:m"}), "ollama", env={})
    assert (ollama.title, ollama.key_env) == ("Ollama", None)


@pytest.mark.parametrize(("raw", "message"), [
    ({"model": "anthropic"}, "names no model; write anthropic:<model>"),
    ({"model": "gemini:pro"}, "a family among offline, openai, anthropic, ollama, openrouter"),
    ({"models": ["openai:"]}, "names no model"),
    ({"nonesuch": {"base-url": "x"}}, "`nonesuch` is not a setting"),
])
def test_configuration_errors_name_the_problem(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_mapping(raw, check=check)


def test_the_families_are_the_registrys_to_check() -> None:
    """The configuration stands on nothing of ours: without the registry's check it takes
    any family, and the check is what refuses it."""
    config = from_mapping({"model": "gemini:pro"})
    with pytest.raises(ConfigError, match="a family among"):
        check(config)


async def test_ollama_needs_no_key(server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_BASE_URL", server.openai_url)
    provider = make_provider(from_mapping({"model": "ollama:qwen2.5-coder:7b"}))
    server.enqueue(Reply([Text("hi"), Finish("stop")]))
    events = await collect(provider.stream(ModelRequest(system="s", messages=[])))
    await provider.aclose()
    assert events[0] == TextDelta("hi")
    request = server.requests[0]
    assert request.body["model"] == "qwen2.5-coder:7b"
    assert request.headers["authorization"] == "Bearer no-key"


async def test_openrouter_sends_its_key(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "or-key")
    monkeypatch.setenv("OPENROUTER_BASE_URL", server.openai_url)
    provider = make_provider(from_mapping({"model": "openrouter:anthropic/claude-sonnet-4.5"}))
    server.enqueue(Reply([Text("hi"), Finish("stop")]))
    await collect(provider.stream(ModelRequest(system="s", messages=[])))
    await provider.aclose()
    request = server.requests[0]
    assert request.headers["authorization"] == "Bearer or-key"
    assert request.body["model"] == "anthropic/claude-sonnet-4.5"
    info = spec("openrouter").model_info("anthropic/claude-sonnet-4.5")
    assert info.context_window == 200_000  # the vendor's facts, through the aggregator's name


async def test_a_preset_end_to_end_through_the_agent(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
) -> None:
    """``--model ollama:<m> --base-url`` as a user types it: no key, a whole turn."""
    server.enqueue(Reply([Text("local "), Text("answer"), Finish("stop")]))
    agent = AgentProcess(checker, "--state-dir", state_dir, "--model", "ollama:llama3.2",
                         "--base-url", server.openai_url)  # fmt: skip
    async with agent:
        init = await agent.initialize()
        assert "No key needed" in init["authMethods"][0]["description"]
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "hi"))["stopReason"] == "end_turn"
        text = "".join(u["content"]["text"] for u in agent.updates_of(sid, "agent_message_chunk"))
        assert text == "local answer"
