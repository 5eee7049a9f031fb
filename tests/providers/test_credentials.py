"""Stored provider keys (``acp-agent login``): private files or the system keyring, read
after the environment, never handed to children."""

from __future__ import annotations

import json
import os
import stat
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_agent.config import from_mapping
from acp_agent.engine.childenv import child_environ
from acp_agent.providers import credentials, missing_key
from acp_agent.providers.credentials import CredentialsError
from acp_agent.providers.registry import HEADERS, STORED, endpoint, key_source


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "cfg")}


class FakeKeyring:
    """The ``keyring`` package's three calls, over a dict; ``broken`` refuses them all."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], str] = {}
        self.broken = False
        self.reads = 0

    def module(self) -> types.ModuleType:
        mod = types.ModuleType("keyring")
        mod.set_password = self.set_password  # type: ignore[attr-defined]
        mod.get_password = self.get_password  # type: ignore[attr-defined]
        mod.delete_password = self.delete_password  # type: ignore[attr-defined]
        return mod

    def _check(self) -> None:
        if self.broken:
            raise RuntimeError("No recommended backend was available")

    def set_password(self, service: str, user: str, secret: str) -> None:
        self._check()
        self.items[(service, user)] = secret

    def get_password(self, service: str, user: str) -> str | None:
        self._check()
        self.reads += 1
        return self.items.get((service, user))

    def delete_password(self, service: str, user: str) -> None:
        self._check()
        del self.items[(service, user)]


@pytest.fixture
def keyring(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKeyring]:
    fake = FakeKeyring()
    monkeypatch.setitem(sys.modules, "keyring", fake.module())
    yield fake
    credentials._fetched.clear()


@pytest.fixture
def no_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "keyring", None)  # `import keyring` raises ImportError


def test_a_stored_key_is_a_private_file_in_a_private_directory(
    env: dict[str, str], no_keyring: None
) -> None:
    where = credentials.save("openai", "sk-one", env=env)
    file = Path(env["XDG_CONFIG_HOME"]) / "acp-agent" / "credentials" / "keys.json"
    assert where == f"{file} (readable only by you)"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert stat.S_IMODE(file.parent.stat().st_mode) == 0o700
    assert json.loads(file.read_text()) == {
        "version": 1, "providers": {"openai": {"key": "sk-one"}}}  # fmt: skip
    assert credentials.key("openai", env) == "sk-one"
    assert credentials.key("anthropic", env) is None
    assert [p.name for p in file.parent.iterdir() if p.name.startswith(".keys-")] == []


def test_an_existing_open_directory_is_made_private(env: dict[str, str], no_keyring: None) -> None:
    d = Path(env["XDG_CONFIG_HOME"]) / "acp-agent" / "credentials"
    d.mkdir(parents=True, mode=0o755)
    os.chmod(d, 0o755)
    credentials.save("openai", "sk-one", "file", env)
    assert stat.S_IMODE(d.stat().st_mode) == 0o700


def test_saving_keeps_the_other_families_and_remove_forgets(
    env: dict[str, str], no_keyring: None
) -> None:
    credentials.save("openai", "sk-one", env=env)
    credentials.save("anthropic", "sk-ant", env=env)
    credentials.save("openai", "sk-two", env=env)
    assert {f: e.key for f, e in credentials.entries(env).items()} == {
        "openai": "sk-two", "anthropic": "sk-ant"}  # fmt: skip
    assert credentials.remove("openai", env) == ["openai"]
    assert credentials.remove("openai", env) == []
    assert list(credentials.entries(env)) == ["anthropic"]
    assert credentials.remove(None, env) == ["anthropic"]
    assert credentials.entries(env) == {}


def test_no_home_no_store(no_keyring: None) -> None:
    assert credentials.path({}) is None
    assert credentials.entries({}) == {} and credentials.key("openai", {}) is None
    assert credentials.remove(None, {}) == []
    with pytest.raises(CredentialsError, match="HOME or XDG_CONFIG_HOME"):
        credentials.save("openai", "sk", env={})
    assert credentials.path({"HOME": "/h"}) == "/h/.config/acp-agent/credentials/keys.json"


def test_a_damaged_file_is_ignored_without_quoting_it(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    file = Path(env["XDG_CONFIG_HOME"]) / "acp-agent" / "credentials" / "keys.json"
    file.parent.mkdir(parents=True)
    file.write_text('{"providers": {"openai": {"key": "sk-secret"')
    assert credentials.entries(env) == {}
    with pytest.raises(CredentialsError, match="not a credentials file") as info:
        credentials._read(str(file))
    assert "sk-secret" not in str(info.value)
    assert "sk-secret" not in capsys.readouterr().err


def test_the_keyring_keeps_the_key_and_the_file_only_says_so(
    env: dict[str, str], keyring: FakeKeyring
) -> None:
    where = credentials.save("openai", "sk-ring", env=env)
    assert where == "the system keyring (service 'acp-agent', account 'openai')"
    assert keyring.items == {("acp-agent", "openai"): "sk-ring"}
    assert "sk-ring" not in Path(credentials.path(env) or "").read_text()
    assert credentials.entries(env)["openai"].keyring
    assert credentials.key("openai", env) == "sk-ring"
    assert credentials.key("openai", env) == "sk-ring"
    assert keyring.reads == 1  # asked once per process
    assert credentials.secrets(env) == {"sk-ring"}
    assert credentials.remove(None, env) == ["openai"]
    assert keyring.items == {} and credentials.secrets(env) == set()


def test_a_broken_keyring_falls_back_to_the_file_unless_asked_for(
    env: dict[str, str], keyring: FakeKeyring
) -> None:
    keyring.broken = True
    with pytest.raises(CredentialsError, match="system keyring: RuntimeError: No recommended"):
        credentials.save("openai", "sk-one", "keyring", env)
    assert credentials.entries(env) == {}
    assert credentials.save("openai", "sk-one", env=env).endswith("(readable only by you)")
    assert credentials.key("openai", env) == "sk-one"


def test_the_file_store_is_chosen_over_a_working_keyring_on_request(
    env: dict[str, str], keyring: FakeKeyring
) -> None:
    credentials.save("openai", "sk-ring", env=env)
    credentials.save("openai", "sk-file", "file", env)
    assert keyring.items == {}  # the old keyring entry went with it
    assert credentials.key("openai", env) == "sk-file"


def test_without_the_keyring_package_it_says_how_to_get_it(
    env: dict[str, str], no_keyring: None
) -> None:
    with pytest.raises(CredentialsError, match="needs the `keyring` package"):
        credentials.save("openai", "sk", "keyring", env)


class TestPrecedence:
    def test_the_environment_wins_over_a_stored_key(
        self, env: dict[str, str], no_keyring: None
    ) -> None:
        config = from_mapping({"model": "openai:gpt-4.1"})
        assert missing_key(config, env=env) == "OPENAI_API_KEY"
        credentials.save("openai", "sk-stored", env=env)
        assert missing_key(config, env=env) is None
        assert key_source(config, "openai", env) == STORED
        stored = endpoint(config, "openai", env)
        assert stored.api_key == "sk-stored" and "acp-agent login" in (stored.key_env or "")
        both = {**env, "OPENAI_API_KEY": "sk-env"}
        assert key_source(config, "openai", both) == "OPENAI_API_KEY"
        assert endpoint(config, "openai", both).api_key == "sk-env"

    def test_an_anthropic_token_in_the_environment_wins_too(
        self, env: dict[str, str], no_keyring: None
    ) -> None:
        config = from_mapping({"model": "anthropic:claude-sonnet-4-5"})
        credentials.save("anthropic", "sk-stored", env=env)
        with_token = {**env, "ANTHROPIC_AUTH_TOKEN": "tok"}
        assert key_source(config, "anthropic", with_token) == "ANTHROPIC_AUTH_TOKEN"
        assert endpoint(config, "anthropic", with_token).api_key is None  # the token, by _build

    def test_credentials_in_headers_win_and_no_key_of_ours_is_sent(
        self, env: dict[str, str], no_keyring: None
    ) -> None:
        credentials.save("openai", "sk-stored", env=env)
        config = from_mapping({"model": "openai:gpt-4.1",
                               "openai": {"headers": {"authorization": "Bearer gw"}}})  # fmt: skip
        both = {**env, "OPENAI_API_KEY": "sk-env"}
        assert key_source(config, "openai", both) == HEADERS
        ep = endpoint(config, "openai", both)
        assert ep.api_key is None and ep.auth_in_headers
        assert ep.headers == {"authorization": "Bearer gw"}
        assert missing_key(from_mapping({"model": "anthropic:claude-sonnet-4-5",
                                         "anthropic": {"headers": {"X-Api-Key": "k"}}}),
                           env={}) is None  # fmt: skip

    def test_a_family_without_keys_ignores_stored_ones(self, env: dict[str, str]) -> None:
        assert key_source(from_mapping({"model": "ollama:q"}), "ollama", env) is None


def test_children_never_get_a_stored_key_whatever_the_variable(
    env: dict[str, str], no_keyring: None
) -> None:
    credentials.save("openai", "sk-stored", env=env)
    child = child_environ(from_mapping({"keep-env": ["KEPT"]}), {
        **env, "PATH": "/bin", "COPY": "sk-stored", "KEPT": "sk-stored", "OTHER": "x"})  # fmt: skip
    assert child == {**env, "PATH": "/bin", "KEPT": "sk-stored", "OTHER": "x"}
