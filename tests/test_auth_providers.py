"""Issue 16: ``logout``, the terminal sign-in, ``auth/status`` (with its updates) and
``providers/*``, end to end over real stdio; every message is checked against the schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, Usage
from .harness import AgentProcess, agent_env
from .limits import WAIT
from .schema_check import SchemaChecker

SECRET = "sk-stored-SENTINEL-5f3a"


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    return tmp_path / "cfg"


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def make_agent(checker: SchemaChecker, state_dir: str, cfg: Path, *args: str,
               env: dict[str, str] | None = None) -> AgentProcess:
    return AgentProcess(checker, "--state-dir", state_dir, *args,
                        env={"XDG_CONFIG_HOME": str(cfg), **(env or {})})


def login(cfg: Path, provider: str, key: str = SECRET) -> None:
    """What the user does in the terminal the editor opened (its scripted form)."""
    done = subprocess.run(
        [sys.executable, "-m", "acp_agent", "login", "--provider", provider, "--key-from-stdin",
         "--store", "file"], input=key + "\n", text=True, capture_output=True, timeout=WAIT,
        env=agent_env({"XDG_CONFIG_HOME": str(cfg)}))  # fmt: skip
    assert done.returncode == 0, done.stderr


def status_updates(agent: AgentProcess) -> list[dict[str, Any]]:
    return [m["params"] for m in agent.messages if m.get("method") == "auth/status_update"]


async def providers(agent: AgentProcess) -> dict[str, dict[str, Any]]:
    listed = (await agent.request("providers/list"))["providers"]
    return {p["providerId"]: p for p in listed}


async def error_of(agent: AgentProcess, method: str, params: Any) -> dict[str, Any]:
    response = await agent.request_raw(method, params)
    assert "error" in response, response
    error: dict[str, Any] = response["error"]
    return error


class TestAdvertising:
    async def test_each_capability_is_advertised_and_the_terminal_method_only_when_runnable(
        self, checker: SchemaChecker, state_dir: str, cfg: Path
    ) -> None:
        async with make_agent(checker, state_dir, cfg) as agent:
            init = await agent.initialize()
            assert init["agentCapabilities"]["auth"] == {"logout": {}, "status": {}}
            assert init["agentCapabilities"]["providers"] == {}
            assert [m.get("type") for m in init["authMethods"]] == [None]
        async with make_agent(checker, state_dir, cfg, "--model", "openai:gpt-4.1") as agent:
            init = await agent.initialize({"auth": {"terminal": True}})
            api, terminal = init["authMethods"]
            assert api["id"] == "api-key" and "acp-agent login" in api["description"]
            assert terminal["type"] == "terminal" and terminal["id"] == "login"
            assert terminal["args"] == ["login"] and "OpenAI" in terminal["description"]
            error = await error_of(agent, "authenticate", {"methodId": "login"})
            assert error["code"] == -32602 and "terminal method" in error["message"]

    async def test_methods_without_params_take_none(
        self, checker: SchemaChecker, state_dir: str, cfg: Path
    ) -> None:
        async with make_agent(checker, state_dir, cfg) as agent:
            await agent.initialize()
            assert (await agent.request("auth/status"))["state"] == "not_required"
            assert len((await agent.request("providers/list"))["providers"]) == 4
            assert await agent.request("logout") == {}
            assert await agent.request("logout", {"_meta": {"x": 1}}) == {}


class TestStoredKey:
    async def test_login_authenticate_use_and_logout(
        self, checker: SchemaChecker, state_dir: str, cfg: Path, workspace: str,
        server: FakeLLMServer, tmp_path: Path,
    ) -> None:
        log_file = tmp_path / "agent.log"
        server.enqueue(Reply([Text("signed in"), Usage(10, 2), Finish("end_turn")]))
        agent = make_agent(checker, state_dir, cfg, "--model", "anthropic:claude-sonnet-4-5",
                           "--base-url", server.url, "--log-level", "debug", "--log-file",
                           str(log_file))  # fmt: skip
        async with agent:
            await agent.initialize({"auth": {"terminal": True}})
            assert (await agent.request("auth/status")) == {"state": "unauthenticated"}
            error = await error_of(agent, "authenticate", {"methodId": "api-key"})
            assert error["code"] == -32000
            error = await error_of(agent, "session/new", {"cwd": workspace, "mcpServers": []})
            assert error["code"] == -32000 and "ANTHROPIC_API_KEY" in error["message"]

            login(cfg, "anthropic")  # the terminal method, run by the editor meanwhile

            assert await agent.request("authenticate", {"methodId": "api-key"}) == {}
            (update,) = status_updates(agent)  # the client asked auth/status before
            assert update == {"state": "authenticated", "accounts": [
                {"label": "Anthropic API key (stored by acp-agent login)", "active": True}]}
            sid = await agent.new_session(workspace)
            assert (await agent.prompt(sid, "hi"))["stopReason"] == "end_turn"
            sent = server.requests[0].headers
            assert SECRET in (sent.get("x-api-key", "") + sent.get("authorization", ""))

            assert await agent.request("logout", {}) == {}
            assert status_updates(agent)[-1] == {"state": "unauthenticated"}
            assert len(status_updates(agent)) == 2
            error = await error_of(agent, "session/new", {"cwd": workspace, "mcpServers": []})
            assert error["code"] == -32000
            error = await error_of(agent, "session/prompt", {
                "sessionId": sid, "prompt": [{"type": "text", "text": "again"}]})
            assert error["code"] == -32000  # the session's provider forgot the key too
            assert len(server.requests) == 1
        assert json.loads((cfg / "acp-agent/credentials/keys.json").read_text())["providers"] == {}
        # The key went to the model's server and nowhere else.
        assert SECRET not in json.dumps(agent.messages)
        assert SECRET not in agent.stderr.decode() and SECRET not in log_file.read_text()
        assert log_file.read_text()  # debug logging was on
        for f in Path(state_dir).rglob("*"):
            assert not f.is_file() or SECRET.encode() not in f.read_bytes(), f

    async def test_a_command_never_sees_a_stored_key(
        self, checker: SchemaChecker, state_dir: str, cfg: Path, workspace: str, tmp_path: Path
    ) -> None:
        login(cfg, "openai")
        script = tmp_path / "script.json"
        script.write_text(json.dumps([
            [{"tool_call": {"name": "run_command", "arguments": {"command": "env"}}}],
            [{"text": "done"}]]))
        agent = make_agent(checker, state_dir, cfg, "--mode", "bypass", env={
            "ACP_AGENT_OFFLINE_SCRIPT": str(script), "LEAKED_COPY": SECRET, "VISIBLE": "yes"})
        async with agent:
            await agent.initialize()
            sid = await agent.new_session(workspace)
            assert (await agent.prompt(sid, "env?"))["stopReason"] == "end_turn"
            (call,) = agent.tool_calls(sid)
            output = json.dumps(call["content"])
            assert "VISIBLE=yes" in output and SECRET not in output


FAKE_KEYRING = """
import json, os

def _load():
    path = os.environ["FAKE_KEYRING"]
    return json.load(open(path)) if os.path.exists(path) else {}

def _save(items):
    json.dump(items, open(os.environ["FAKE_KEYRING"], "w"))

def set_password(service, user, secret):
    items = _load()
    items[service + "/" + user] = secret
    _save(items)

def get_password(service, user):
    return _load().get(service + "/" + user)

def delete_password(service, user):
    items = _load()
    del items[service + "/" + user]
    _save(items)
"""


async def test_a_key_in_the_system_keyring_signs_the_agent_in(
    checker: SchemaChecker, state_dir: str, cfg: Path, workspace: str, server: FakeLLMServer,
    tmp_path: Path,
) -> None:
    """``--store keyring`` with a keyring package present (a file-backed stand-in)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "keyring.py").write_text(FAKE_KEYRING)
    ring = tmp_path / "ring.json"
    env = {"XDG_CONFIG_HOME": str(cfg), "FAKE_KEYRING": str(ring),
           "PYTHONPATH": f"{Path(__file__).resolve().parent.parent}{os.pathsep}{site}"}
    done = subprocess.run(
        [sys.executable, "-m", "acp_agent", "login", "--provider", "anthropic",
         "--key-from-stdin", "--store", "keyring"], input=SECRET + "\n", text=True,
        capture_output=True, timeout=WAIT, env=agent_env(env))  # fmt: skip
    assert done.returncode == 0 and "the system keyring" in done.stderr, done.stderr
    assert json.loads(ring.read_text()) == {"acp-agent/anthropic": SECRET}
    assert SECRET not in (cfg / "acp-agent/credentials/keys.json").read_text()
    server.enqueue(Reply([Text("from the keyring"), Finish("end_turn")]))
    agent = make_agent(checker, state_dir, cfg, "--model", "anthropic:claude-sonnet-4-5",
                       "--base-url", server.url, env=env)
    async with agent:
        await agent.initialize()
        assert (await agent.request("auth/status"))["state"] == "authenticated"
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "hi"))["stopReason"] == "end_turn"
        sent = server.requests[0].headers
        assert SECRET in (sent.get("x-api-key", "") + sent.get("authorization", ""))
        assert await agent.request("logout") == {}
    assert json.loads(ring.read_text()) == {}


class TestAuthStatus:
    async def test_states_and_accounts(
        self, checker: SchemaChecker, state_dir: str, cfg: Path
    ) -> None:
        login(cfg, "anthropic")
        async with make_agent(checker, state_dir, cfg, "--model", "ollama:qwen") as agent:
            await agent.initialize()
            assert await agent.request("auth/status") == {"state": "not_required", "accounts": [
                {"label": "Anthropic API key (stored by acp-agent login)", "active": False}]}
        keyed = make_agent(checker, state_dir, cfg, "--model", "openai:gpt-4.1",
                           env={"OPENAI_API_KEY": "sk-env"})
        async with keyed:
            await keyed.initialize()
            status = await keyed.request("auth/status")
            assert status["state"] == "authenticated"
            env_account = {"label": "OpenAI API key (OPENAI_API_KEY)", "active": True}
            assert env_account in status["accounts"]
            assert await keyed.request("logout") == {}  # the environment's key stays
            assert (await keyed.request("auth/status"))["accounts"] == [
                {"label": "OpenAI API key (OPENAI_API_KEY)", "active": True}]
            assert status_updates(keyed) == [{"state": "authenticated", "accounts": [
                {"label": "OpenAI API key (OPENAI_API_KEY)", "active": True}]}]

    async def test_updates_only_to_a_client_that_asked_and_only_on_change(
        self, checker: SchemaChecker, state_dir: str, cfg: Path
    ) -> None:
        login(cfg, "openai")
        async with make_agent(checker, state_dir, cfg, "--model", "openai:gpt-4.1") as agent:
            await agent.initialize()
            assert await agent.request("logout") == {}
            assert status_updates(agent) == []  # it never asked: it may not know the method
            assert (await agent.request("auth/status"))["state"] == "unauthenticated"
            routed = {"providerId": "openai", "apiType": "openai",
                      "baseUrl": "http://127.0.0.1:9/v1", "headers": {"Authorization": "Bearer t"}}
            assert await agent.request("providers/set", routed) == {}
            assert await agent.request("providers/set", routed) == {}  # the same again
            assert await agent.request("providers/disable", {"providerId": "anthropic"}) == {}
            assert status_updates(agent) == [{"state": "authenticated", "accounts": [
                {"label": "OpenAI: credentials in its endpoint's headers", "active": True}]}]


class TestProviders:
    async def test_list_shows_endpoints_never_credentials(
        self, checker: SchemaChecker, state_dir: str, cfg: Path
    ) -> None:
        login(cfg, "openrouter")
        agent = make_agent(checker, state_dir, cfg, "--model", "openai:gpt-4.1",
                           env={"OPENAI_API_KEY": "sk-env-key", "OLLAMA_BASE_URL": "http://gpu:1/v1"})
        async with agent:
            await agent.initialize()
            listed = (await agent.request("providers/list", {}))["providers"]
            assert listed == [
                {"providerId": "openai", "supported": ["openai"], "required": True,
                 "current": {"apiType": "openai", "baseUrl": "https://api.openai.com/v1"}},
                {"providerId": "anthropic", "supported": ["anthropic"], "required": False,
                 "current": {"apiType": "anthropic", "baseUrl": "https://api.anthropic.com"}},
                {"providerId": "ollama", "supported": ["openai"], "required": False,
                 "current": {"apiType": "openai", "baseUrl": "http://gpu:1/v1"}},
                {"providerId": "openrouter", "supported": ["openai"], "required": False,
                 "current": {"apiType": "openai", "baseUrl": "https://openrouter.ai/api/v1"}},
            ]  # fmt: skip
            await agent.request("providers/set", {
                "providerId": "ollama", "apiType": "openai",
                "baseUrl": "https://me:hunter2@llm.example.com/v1",
                "headers": {"X-Api-Key": "header-secret"}})  # fmt: skip
            listed = (await agent.request("providers/list"))["providers"]
            assert listed[2]["current"]["baseUrl"] == "https://me:***@llm.example.com/v1"
            said = json.dumps(agent.messages)  # everything the agent sent
            for secret in ("sk-env-key", SECRET, "header-secret", "hunter2"):
                assert secret not in said

    @pytest.mark.parametrize(("params", "field", "words"), [
        ({"providerId": "nope", "apiType": "openai", "baseUrl": "http://h/v1"}, "providerId",
         "unknown provider 'nope': one of openai, anthropic, ollama, openrouter"),
        ({"providerId": "offline", "apiType": "openai", "baseUrl": "http://h/v1"}, "providerId",
         "unknown provider"),
        ({"providerId": "anthropic", "apiType": "openai", "baseUrl": "http://h"}, "apiType",
         "anthropic speaks 'anthropic', not 'openai'"),
        ({"providerId": "openai", "apiType": "openai", "baseUrl": "llm.example.com/v1"},
         "baseUrl", "must start with http:// or https://"),
        ({"providerId": "openai", "apiType": "openai", "baseUrl": "file:///etc/passwd"},
         "baseUrl", "must start with http:// or https://"),
        ({"providerId": "openai", "apiType": "openai", "baseUrl": "http:///v1"}, "baseUrl",
         "names no host"),
        ({"providerId": "openai", "apiType": "openai", "baseUrl": "http://h:99999/v1"},
         "baseUrl", "not a valid URL"),
        ({"providerId": "openai", "apiType": "openai", "baseUrl": "http://h/v 1"}, "baseUrl",
         "spaces or control characters"),
        ({"providerId": "openai", "apiType": "openai", "baseUrl": ""}, "baseUrl", "is empty"),
        ({"providerId": "openai", "apiType": "openai", "baseUrl": "http://h/v1",
          "headers": {"Bad Name": "x"}}, "headers", "'Bad Name' is not a header name"),
        ({"providerId": "openai", "apiType": "openai", "baseUrl": "http://h/v1",
          "headers": {"X-Token": "secret\r\nInjected: 1"}}, "headers", "line break"),
        ({"providerId": "openai", "apiType": "openai"}, "", "missing required field `baseUrl`"),
        ({"providerId": "openai", "apiType": "openai", "baseUrl": "http://h/v1",
          "headers": {"X": 1}}, "headers", "Expected `str`"),
    ])
    async def test_set_refuses_bad_input_with_invalid_params(
        self, checker: SchemaChecker, state_dir: str, cfg: Path, params: dict[str, Any],
        field: str, words: str,
    ) -> None:
        async with make_agent(checker, state_dir, cfg, "--model", "openai:gpt-4.1") as agent:
            await agent.initialize()
            error = await error_of(agent, "providers/set", params)
            assert error["code"] == -32602 and words in error["message"], error
            assert f"`$.{field}" in error["message"] or not field
            assert "secret" not in error["message"]
            listed = (await agent.request("providers/list"))["providers"]
            assert listed[0]["current"]["baseUrl"] == "https://api.openai.com/v1"  # unchanged

    async def test_set_routes_new_and_open_sessions_through_the_editors_endpoint(
        self, checker: SchemaChecker, state_dir: str, cfg: Path, workspace: str,
        server: FakeLLMServer,
    ) -> None:
        server.enqueue(Reply([Text("via the gateway"), Finish("stop")]),
                       Reply([Text("open one too"), Finish("stop")]))
        agent = make_agent(checker, state_dir, cfg, "--model", "openai:gpt-4.1",
                           env={"OPENAI_API_KEY": "sk-env-must-not-leave"})
        async with agent:
            await agent.initialize()
            before = await agent.new_session(workspace)
            assert await agent.request("providers/set", {
                "providerId": "openai", "apiType": "openai", "baseUrl": server.openai_url,
                "headers": {"Authorization": "Bearer editor-token", "X-Route": "a"}}) == {}
            after = await agent.new_session(workspace)
            assert (await agent.prompt(after, "q"))["stopReason"] == "end_turn"
            assert (await agent.prompt(before, "q"))["stopReason"] == "end_turn"
            assert [r.headers["authorization"] for r in server.requests] == [
                "Bearer editor-token"] * 2
            assert all(r.headers["x-route"] == "a" for r in server.requests)
            assert "sk-env-must-not-leave" not in json.dumps([r.headers for r in server.requests])
            listed = (await agent.request("providers/list"))["providers"]
            assert listed[0]["current"] == {"apiType": "openai", "baseUrl": server.openai_url}

    async def test_disable_takes_a_family_out_of_use(
        self, checker: SchemaChecker, state_dir: str, cfg: Path, workspace: str, tmp_path: Path
    ) -> None:
        config = tmp_path / "config.toml"
        config.write_text('models = ["anthropic:claude-sonnet-4-5"]\n')
        agent = make_agent(checker, state_dir, cfg, "--config", str(config),
                           env={"ANTHROPIC_API_KEY": "k"})
        async with agent:
            await agent.initialize()
            on_claude = await agent.new_session(workspace)
            await agent.request("session/set_config_option", {
                "sessionId": on_claude, "configId": "model",
                "value": "anthropic:claude-sonnet-4-5"})
            assert await agent.request("providers/disable", {"providerId": "anthropic"}) == {}
            assert await agent.request("providers/disable", {"providerId": "anthropic"}) == {}
            assert await agent.request("providers/disable", {"providerId": "unknown"}) == {}
            listed = await providers(agent)
            assert listed["anthropic"]["current"] is None and not listed["anthropic"]["required"]

            fresh = await agent.request("session/new", {"cwd": workspace, "mcpServers": []})
            (model,) = [o for o in fresh["configOptions"] if o["id"] == "model"]
            assert [o["value"] for o in model["options"]] == ["offline"]
            error = await error_of(agent, "session/set_config_option", {
                "sessionId": fresh["sessionId"], "configId": "model",
                "value": "anthropic:claude-sonnet-4-5"})
            assert error["code"] == -32602
            error = await error_of(agent, "session/prompt", {
                "sessionId": on_claude, "prompt": [{"type": "text", "text": "hi"}]})
            assert error["code"] == -32603 and "disabled the Anthropic provider" in error["message"]

            assert await agent.request("providers/set", {
                "providerId": "anthropic", "apiType": "anthropic",
                "baseUrl": "https://api.anthropic.com"}) == {}
            listed = await providers(agent)
            assert listed["anthropic"]["current"]["baseUrl"] == "https://api.anthropic.com"

    async def test_the_configured_models_provider_cannot_be_disabled(
        self, checker: SchemaChecker, state_dir: str, cfg: Path
    ) -> None:
        async with make_agent(checker, state_dir, cfg, "--model", "openai:gpt-4.1") as agent:
            await agent.initialize()
            error = await error_of(agent, "providers/disable", {"providerId": "openai"})
            assert error["code"] == -32602 and "required" in error["message"]
            assert "`$.providerId`" in error["message"]
