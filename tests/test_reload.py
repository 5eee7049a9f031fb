"""Reloading the limits (``acp_agent.handlers.reload``, SIGUSR1): what changes, what does
not, and a configuration that cannot be read. Through the agent process, the provider
fault tests use it (``test_provider_faults``): a turn already running is bounded again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acp_agent import log
from acp_agent.config import Config, ConfigError, from_mapping
from acp_agent.handlers import reload as reloading
from acp_agent.providers.pool import Models


class Runtime:
    """The models and the running turns' deadlines, as the agent holds them."""

    def __init__(self, config: Config) -> None:
        self.models = Models(config)
        self.turn_deadlines: dict[asyncio.Timeout, float] = {}

    @property
    def config(self) -> Config:
        return self.models.config

    def provider_for(self, model: str) -> Any:
        return self.models.provider_for(model)


def runtime(state_dir: str, **limits: float) -> Runtime:
    config = from_mapping({"model": "openai:gpt-4.1", "state-dir": state_dir,
                           "models": ["anthropic:claude-sonnet-4-5"], "limits": limits,
                           "anthropic": {"timeout": 900.0}})  # fmt: skip
    return Runtime(config)


def reload(rt: Runtime, load: Any) -> None:
    reloading.reload(rt.models, rt.turn_deadlines, load)


def loads(raw: dict[str, Any]) -> Any:
    return lambda: from_mapping({"model": "offline", **raw})


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    lines: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(log, "_emit", lambda level, event, kw: lines.append((event, kw)))
    return lines


def test_only_the_limits_change_and_the_log_names_them(
    state_dir: str, logged: list[tuple[str, dict[str, Any]]]
) -> None:
    rt = runtime(state_dir, **{"max-retries": 1})
    reload(rt, loads({"limits": {"max-retries": 3, "compact-at": 0.9}, "default-mode": "plan"}))
    assert rt.config.limits.max_retries == 3 and rt.config.limits.compact_at == 0.9
    assert rt.config.model == "openai:gpt-4.1" and rt.config.default_mode == "ask"
    assert logged == [("limits reloaded", {"max_retries": 3, "compact_at": 0.9})]


def test_a_configuration_that_cannot_be_read_changes_nothing(
    state_dir: str, logged: list[tuple[str, dict[str, Any]]]
) -> None:
    rt = runtime(state_dir, **{"idle-timeout": 5.0})
    before = rt.config

    def broken() -> Config:
        raise ConfigError("c.toml: invalid TOML: Expected '=' (at line 2, column 5)")

    reload(rt, broken)
    assert rt.config is before
    assert logged == [("configuration not reloaded",
                       {"error": "c.toml: invalid TOML: Expected '=' (at line 2, column 5)"})]


def test_a_family_whose_http_timeout_moves_gets_new_providers(state_dir: str) -> None:
    rt = runtime(state_dir)
    openai, anthropic = rt.provider_for("openai:gpt-4.1"), rt.provider_for(
        "anthropic:claude-sonnet-4-5")
    reload(rt, loads({"limits": {"first-event-timeout": 300.0}}))  # under 600 s and 900 s
    assert rt.provider_for("openai:gpt-4.1") is openai
    reload(rt, loads({"limits": {"first-event-timeout": 900.0}}))
    assert rt.provider_for("openai:gpt-4.1") is not openai  # 600 s -> 900 s
    assert rt.provider_for("anthropic:claude-sonnet-4-5") is anthropic  # its 900 s stays


async def test_running_turns_are_bounded_again_from_their_start(state_dir: str) -> None:
    rt = runtime(state_dir, **{"turn-timeout": 3600.0})
    started = asyncio.get_running_loop().time() - 10  # a turn that has run for 10 s
    ended = asyncio.timeout(0)
    with pytest.raises(TimeoutError):
        async with ended:
            await asyncio.Event().wait()
    rt.turn_deadlines[ended] = started
    ended_at = ended.when()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(3600.0) as running:
            rt.turn_deadlines[running] = started
            reload(rt, loads({"limits": {"turn-timeout": 60.0}}))
            assert running.when() == started + 60.0
            assert ended.when() == ended_at  # over: left alone
            reload(rt, loads({"limits": {"turn-timeout": 5.0}}))  # less than it has run
            await asyncio.Event().wait()  # so it ends now
    assert running.expired()
