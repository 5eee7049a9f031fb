"""Shared fixtures and the rules every test inherits.

* Every test gets a schema checker; any message the agent emitted that fails the official
  ACP schema fails the test.
* Every test gets pytest-timeout's limit from :mod:`tests.limits` (``ACP_TEST_TIME_SCALE``
  scales it) unless it sets its own ``timeout`` mark.
* End-to-end tests are marked ``slow``, so ``pytest -m "not slow"`` runs the fast set in
  seconds: those in ``tests/interop/``, those using the ``agent`` or ``scripted``
  fixture, and every test
  of a module that imports the harness's ways of starting an agent process
  (``AgentProcess``, ``agent_env``). Other slow tests are marked by hand.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from . import harness
from .harness import AgentProcess, Script, Scripted
from .limits import TEST
from .schema_check import SchemaChecker
from .timeouts import ManualTimeouts

_TESTS = Path(__file__).resolve().parent
_SLOW_DIRS = (_TESTS / "interop",)
_STARTS_AN_AGENT = ("AgentProcess", "agent_env")


def _end_to_end(item: pytest.Item) -> bool:
    if any(item.path.is_relative_to(d) for d in _SLOW_DIRS):
        return True
    if {"agent", "scripted"} & set(getattr(item, "fixturenames", ())):
        return True
    module = getattr(item, "module", None)
    return any(
        getattr(module, name, None) is getattr(harness, name) for name in _STARTS_AN_AGENT
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TEST))
        if item.get_closest_marker("slow") is None and _end_to_end(item):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def checker() -> Iterator[SchemaChecker]:
    c = SchemaChecker()
    yield c
    if c.failures:
        pytest.fail(
            f"{len(c.failures)} emitted message(s) failed schema validation:\n"
            + "\n".join(c.failures[:10]),
            pytrace=False,
        )


@pytest.fixture
def state_dir(tmp_path: Any) -> str:
    d = tmp_path / "state"
    d.mkdir()
    return str(d)


@pytest.fixture
def workspace(tmp_path: Any) -> str:
    d = tmp_path / "ws"
    d.mkdir()
    (d / "hello.txt").write_text("hello\nworld\n")
    return str(d)


@pytest.fixture
async def agent(checker: SchemaChecker, state_dir: str) -> AsyncIterator[AgentProcess]:
    """An agent subprocess on the offline model (demo mode), not yet initialized."""
    proc = AgentProcess(checker, "--state-dir", state_dir)
    await proc.start()
    try:
        yield proc
    finally:
        await proc.close()


@pytest.fixture
def scripted(checker: SchemaChecker, state_dir: str, tmp_path: Path) -> Scripted:
    """Agents (not started) whose offline model plays ``script``: ``scripted(script,
    *args, config="", **env)``, with more command-line ``args``, a configuration file
    holding ``config`` and more environment variables."""

    def make(script: Script, *args: str, config: str = "", **env: str) -> AgentProcess:
        n = len(list(tmp_path.glob("script*.json")))
        path = tmp_path / f"script{n}.json"
        path.write_text(json.dumps(script))
        if config:
            cfg = tmp_path / f"config{n}.toml"
            cfg.write_text(config)
            args = (*args, "--config", str(cfg))
        return AgentProcess(checker, "--state-dir", state_dir, *args,
                            env={"ACP_AGENT_OFFLINE_SCRIPT": str(path), **env})  # fmt: skip

    return make


@pytest.fixture
def manual_timeouts(monkeypatch: pytest.MonkeyPatch) -> ManualTimeouts:
    """``asyncio.timeout()`` on a fake clock: timeouts expire on ``await expire()``."""
    fake = ManualTimeouts()
    monkeypatch.setattr(asyncio, "timeout", fake)
    return fake
